#include "keyxfer/device_session.h"

#include <vector>

#include "gtest/gtest.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/hkdf.h"
#include "keyxfer/random.h"

namespace gputravel {
namespace {

TEST(DeviceSessionTest, BothSidesDeriveTheSameKeysAndChannelsDiffer) {
  auto req = *EcKey::Generate(Curve::kP384);
  auto dev = *EcKey::Generate(Curve::kP384);
  std::string t = DeviceSessionTranscript("EMU-1", req.PublicPoint(), "n1",
                                          dev.PublicPoint(), "n2", 1);
  auto s1 = *req.DeriveSharedSecret(dev.PublicPoint());
  auto s2 = *dev.DeriveSharedSecret(req.PublicPoint());
  auto k1 = *DeriveDeviceSessionKeys(s1, t);
  auto k2 = *DeriveDeviceSessionKeys(s2, t);
  EXPECT_TRUE(k1.lce_h2d.key.Equals(k2.lce_h2d.key));
  EXPECT_EQ(k1.lce_h2d.iv_mask, k2.lce_h2d.iv_mask);
  EXPECT_FALSE(k1.lce_h2d.key.Equals(k1.lce_d2h.key));
  EXPECT_FALSE(k1.gsp_h2d.key.Equals(k1.lce_h2d.key));
}

// Every copy engine has its own pair of key slots, all expanded from the one
// session secret; engine 0's are the ones DeriveDeviceSessionKeys gives.
TEST(DeviceSessionTest, EachCopyEngineHasItsOwnKeySlots) {
  auto req = *EcKey::Generate(Curve::kP384);
  auto dev = *EcKey::Generate(Curve::kP384);
  std::string t = DeviceSessionTranscript("EMU-1", req.PublicPoint(), "n1",
                                          dev.PublicPoint(), "n2", 1);
  auto secret = *DeviceSessionSecret(*req.DeriveSharedSecret(dev.PublicPoint()), t);
  auto keys = *ExpandDeviceSessionKeys(secret);
  EXPECT_TRUE(keys.lce_h2d.key.Equals(
      DeriveDeviceSessionKeys(*req.DeriveSharedSecret(dev.PublicPoint()), t)->lce_h2d.key));
  // The labels, fixed: HKDF-Expand(secret, "lce0N_{h2d,d2h}_user" + "_key" /
  // "_ivmask").
  auto lce0 = *DeriveCopyEngineKey(secret, 0, true);
  EXPECT_TRUE(lce0.key.Equals(*HkdfSha384Expand(secret, "lce00_h2d_user_key", 32)));
  auto mask0 = *HkdfSha384Expand(secret, "lce00_h2d_user_ivmask", 12);
  EXPECT_EQ(std::string(lce0.iv_mask.begin(), lce0.iv_mask.end()),
            std::string(reinterpret_cast<const char*>(mask0.data()), mask0.size()));
  EXPECT_TRUE(lce0.key.Equals(keys.lce_h2d.key));
  EXPECT_EQ(lce0.iv_mask, keys.lce_h2d.iv_mask);
  EXPECT_TRUE(DeriveCopyEngineKey(secret, 0, false)->key.Equals(keys.lce_d2h.key));
  EXPECT_TRUE(DeriveCopyEngineKey(secret, 7, false)->key.Equals(
      *HkdfSha384Expand(secret, "lce07_d2h_user_key", 32)));
  std::vector<ChannelMaterial> all;
  for (uint32_t e = 0; e < kCopyEngines; ++e) {
    for (bool h2d : {true, false}) all.push_back(*DeriveCopyEngineKey(secret, e, h2d));
  }
  all.push_back(std::move(keys.gsp_h2d));
  all.push_back(std::move(keys.gsp_d2h));
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = i + 1; j < all.size(); ++j) {
      EXPECT_FALSE(all[i].key.Equals(all[j].key)) << i << " " << j;
      EXPECT_NE(all[i].iv_mask, all[j].iv_mask) << i << " " << j;
    }
  }
  auto none = DeriveCopyEngineKey(secret, kCopyEngines, true);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("LCE7"), std::string::npos) << none.status();
}

TEST(DeviceSessionTest, FreshExchangeSharesNothingWithTheOld) {
  // P3: a new session's keys are independent of the old ones.
  auto req1 = *EcKey::Generate(Curve::kP384);
  auto dev1 = *EcKey::Generate(Curve::kP384);
  auto req2 = *EcKey::Generate(Curve::kP384);
  auto dev2 = *EcKey::Generate(Curve::kP384);
  auto k1 = *DeriveDeviceSessionKeys(
      *req1.DeriveSharedSecret(dev1.PublicPoint()),
      DeviceSessionTranscript("EMU-1", req1.PublicPoint(), "a", dev1.PublicPoint(), "b", 1));
  auto k2 = *DeriveDeviceSessionKeys(
      *req2.DeriveSharedSecret(dev2.PublicPoint()),
      DeviceSessionTranscript("EMU-1", req2.PublicPoint(), "c", dev2.PublicPoint(), "d", 2));
  EXPECT_FALSE(k1.lce_h2d.key.Equals(k2.lce_h2d.key));
}

TEST(DeviceSessionTest, InvalidPeerPointRefused) {
  auto req = *EcKey::Generate(Curve::kP384);
  std::string bogus(97, '\x01');
  bogus[0] = 0x04;
  EXPECT_FALSE(req.DeriveSharedSecret(bogus).ok());
  EXPECT_FALSE(req.DeriveSharedSecret("short").ok());
}

TEST(DeviceSessionTest, ChunkAadBindsDestination) {
  EXPECT_NE(ChunkAad(1, 2, 0, 64), ChunkAad(1, 2, 64, 64));
  EXPECT_NE(ChunkAad(1, 2, 0, 64), ChunkAad(1, 3, 0, 64));
  EXPECT_NE(ChunkAad(1, 2, 0, 64), ChunkAad(2, 2, 0, 64));
}

}  // namespace
}  // namespace gputravel
