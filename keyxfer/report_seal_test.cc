#include "keyxfer/report_seal.h"

#include <string>

#include "gtest/gtest.h"
#include "keyxfer/random.h"

namespace gputravel {
namespace {

class ReportSealTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = SecretBytes(32);
    RandomBytes(key_.data(), key_.size());
    b_.set_campaign("c1");
    b_.set_trip(7);
    b_.set_gpu_serial("EMU-H100-0001");
    b_.set_gpu_session(3);
    b_.set_holder("hospital-a");
    b_.set_buffer_id(1);
    b_.set_window_offset(0);
    b_.set_window_length(1 << 20);
    report_.set_bytes(1 << 20);
    report_.set_chunks(1);
    report_.set_digest(std::string(32, 'D'));
    report_.set_seconds(0.5);
  }
  void ExpectRefused(const absl::StatusOr<v1::ProvisionReport>& r, const std::string& says) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();
    // The orchestrator's error names the holder, its trip and campaign.
    EXPECT_NE(r.status().message().find("holder 'hospital-a'"), std::string::npos)
        << r.status();
    EXPECT_NE(r.status().message().find("trip 7 of campaign 'c1'"), std::string::npos)
        << r.status();
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status();
  }
  SecretBytes key_;
  v1::HandoffBinding b_;
  v1::ProvisionReport report_;
};

TEST_F(ReportSealTest, OpensUnderItsChannelKeyAndBinding) {
  auto sealed = SealReport(key_, b_, report_);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(static_cast<uint8_t>((*sealed)[0]), kReportSealVersion);
  auto opened = OpenReport(key_, b_, *sealed);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->bytes(), report_.bytes());
  EXPECT_EQ(opened->chunks(), report_.chunks());
  EXPECT_EQ(opened->digest(), report_.digest());
  EXPECT_EQ(opened->seconds(), report_.seconds());
}

// A party without the channel's report key (the host, another holder, or
// whoever holds the holder's TLS key) makes up a report with the right
// numbers and digest (the digest is a hash of GCM tags the host sees in
// the bounce ring): sealed under its own key, or not sealed at all, it is
// refused.
TEST_F(ReportSealTest, ForgedReportIsRefusedNamingTheHolder) {
  SecretBytes other(32);
  RandomBytes(other.data(), other.size());
  auto forged = SealReport(other, b_, report_);
  ASSERT_TRUE(forged.ok());
  ExpectRefused(OpenReport(key_, b_, *forged), "its seal does not verify");
  std::string plain;
  ASSERT_TRUE(report_.SerializeToString(&plain));
  ExpectRefused(OpenReport(key_, b_, ""), "it is not sealed");
  ExpectRefused(OpenReport(key_, b_, plain), "");
}

// The holder's genuine report of another trip (another channel's key, or
// even the same key with another binding) does not open for this one.
TEST_F(ReportSealTest, ReportReplayedFromAnotherTripIsRefused) {
  SecretBytes earlier_channel(32);
  RandomBytes(earlier_channel.data(), earlier_channel.size());
  v1::HandoffBinding earlier = b_;
  earlier.set_trip(6);
  auto replayed = SealReport(earlier_channel, earlier, report_);
  ASSERT_TRUE(replayed.ok());
  ExpectRefused(OpenReport(key_, b_, *replayed), "its seal does not verify");
  // Every bound field counts, even under the right key.
  for (int field = 0; field < 8; ++field) {
    v1::HandoffBinding other = b_;
    if (field == 0) other.set_campaign("c2");
    if (field == 1) other.set_trip(6);
    if (field == 2) other.set_holder("hospital-b");
    if (field == 3) other.set_gpu_serial("EMU-H100-0002");
    if (field == 4) other.set_gpu_session(4);
    if (field == 5) other.set_buffer_id(2);
    if (field == 6) other.set_window_offset(1 << 20);
    if (field == 7) other.set_window_length(1 << 19);
    auto sealed = SealReport(key_, other, report_);
    ASSERT_TRUE(sealed.ok());
    ExpectRefused(OpenReport(key_, b_, *sealed), "its seal does not verify");
  }
}

TEST_F(ReportSealTest, AlteredOrMalformedReportIsRefused) {
  const std::string sealed = *SealReport(key_, b_, report_);
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string bad = sealed;
    bad[i] ^= 0x01;
    auto r = OpenReport(key_, b_, bad);
    EXPECT_FALSE(r.ok()) << "byte " << i;
  }
  std::string version = sealed;
  version[0] = 2;
  ExpectRefused(OpenReport(key_, b_, version), "unknown report seal version 2");
  ExpectRefused(OpenReport(key_, b_, sealed.substr(0, 20)), "malformed");
  ExpectRefused(OpenReport(key_, b_, sealed + std::string(kMaxSealedReportBytes, 'x')),
                "malformed");
}

}  // namespace
}  // namespace gputravel
