#include "keyxfer/handoff.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "keyxfer/aes_gcm.h"
#include "keyxfer/random.h"
#include "util/hex.h"

namespace gputravel {
namespace {

std::vector<ChannelMaterial> One(const ChannelMaterial& k) {
  std::vector<ChannelMaterial> v;
  v.push_back(k.Clone());
  return v;
}

class HandoffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = SecretBytes(32);
    RandomBytes(key_.data(), 32);
    lce_.key = SecretBytes(32);
    RandomBytes(lce_.key.data(), 32);
    RandomBytes(lce_.iv_mask.data(), 12);
    lce_.channel_counter = 0x0102030405060708ull;
    b_.set_campaign("c1");
    b_.set_trip(7);
    b_.set_gpu_serial("EMU-H100-0001");
    b_.set_gpu_session(3);
    b_.set_holder("hospital-a");
    b_.set_buffer_id(1);
    b_.set_window_offset(0);
    b_.set_window_length(1 << 20);
    b_.set_chunk_size(1 << 21);
    v1::H2dLane* lane = b_.add_lanes();
    lane->set_copy_engine(0);
    lane->set_length(1 << 20);
    lane->set_first_counter(1);
    lane->set_counter_count(1);
    v1::TrainingTerms* t = b_.mutable_terms();
    t->set_trainer_kind("next-token");
    t->set_vocab(512);
    t->set_dim(32);
    t->set_learning_rate(0.05);
    t->set_batch_tokens(65536);
    t->set_seed(1);
    t->set_min_window_bytes(1 << 20);
    t->set_loss_decimals(2);
    t->set_min_windows_per_loss(4);
  }
  SecretBytes key_;
  ChannelMaterial lce_;
  v1::HandoffBinding b_;
};

TEST_F(HandoffTest, RoundTrip) {
  auto blob = WrapHandoff(key_, b_, One(lce_));
  ASSERT_TRUE(blob.ok());
  auto m = UnwrapHandoff(key_, b_, *blob);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 1u);
  EXPECT_TRUE((*m)[0].key.Equals(lce_.key));
  EXPECT_EQ((*m)[0].iv_mask, lce_.iv_mask);
  EXPECT_EQ((*m)[0].channel_counter, lce_.channel_counter);
}

// k lanes carry k keys, each in its lane's place; the number of keys must
// be the number of lanes on both ends.
TEST_F(HandoffTest, OneKeyPerLaneRoundTrips) {
  std::vector<ChannelMaterial> keys;
  b_.clear_lanes();
  for (uint32_t e = 0; e < 3; ++e) {
    ChannelMaterial k;
    k.key = SecretBytes(32);
    RandomBytes(k.key.data(), 32);
    RandomBytes(k.iv_mask.data(), 12);
    k.channel_counter = e;
    keys.push_back(std::move(k));
    v1::H2dLane* l = b_.add_lanes();
    l->set_copy_engine(e);
    l->set_offset(e * 4096);
    l->set_length(4096);
    l->set_first_counter(1);
    l->set_counter_count(1);
  }
  auto blob = WrapHandoff(key_, b_, keys);
  ASSERT_TRUE(blob.ok()) << blob.status();
  auto m = UnwrapHandoff(key_, b_, *blob);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE((*m)[i].key.Equals(keys[i].key)) << i;
    EXPECT_EQ((*m)[i].iv_mask, keys[i].iv_mask) << i;
    EXPECT_EQ((*m)[i].channel_counter, keys[i].channel_counter) << i;
  }
  // Two keys for three lanes are not wrapped; a binding with a lane dropped
  // does not open the blob.
  keys.pop_back();
  EXPECT_EQ(WrapHandoff(key_, b_, keys).status().code(), absl::StatusCode::kInvalidArgument);
  v1::HandoffBinding fewer = b_;
  fewer.mutable_lanes()->RemoveLast();
  EXPECT_FALSE(UnwrapHandoff(key_, fewer, *blob).ok());
}

TEST_F(HandoffTest, BlobDoesNotContainTheKey) {
  auto blob = *WrapHandoff(key_, b_, One(lce_));
  std::string k(reinterpret_cast<const char*>(lce_.key.data()), 32);
  EXPECT_EQ(blob.find(k), std::string::npos);
}

TEST_F(HandoffTest, ReplayForAnotherTripHolderGpuWindowOrTermsRefused) {
  auto blob = *WrapHandoff(key_, b_, One(lce_));
  std::vector<std::function<void(v1::HandoffBinding*)>> changes = {
      [](v1::HandoffBinding* b) { b->set_trip(8); },
      [](v1::HandoffBinding* b) { b->set_holder("hospital-b"); },
      [](v1::HandoffBinding* b) { b->set_gpu_serial("EMU-H100-0002"); },
      [](v1::HandoffBinding* b) { b->set_gpu_session(4); },
      [](v1::HandoffBinding* b) { b->set_campaign("c2"); },
      [](v1::HandoffBinding* b) { b->set_buffer_id(2); },
      [](v1::HandoffBinding* b) { b->set_window_offset(4096); },
      [](v1::HandoffBinding* b) { b->set_window_length(1); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(0)->set_first_counter(2); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(0)->set_counter_count(9); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(0)->set_copy_engine(1); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(0)->set_offset(32); },
      [](v1::HandoffBinding* b) { b->set_chunk_size(1 << 20); },
      // The training terms: the agent checks these against its policy, so
      // the orchestrator cannot show it one set and apply another.
      [](v1::HandoffBinding* b) { b->mutable_terms()->set_trainer_kind("none"); },
      [](v1::HandoffBinding* b) { b->mutable_terms()->set_vocab(2); },
      [](v1::HandoffBinding* b) { b->mutable_terms()->set_dim(8); },
      [](v1::HandoffBinding* b) { b->mutable_terms()->set_learning_rate(0.0500001); },
      [](v1::HandoffBinding* b) { b->mutable_terms()->set_batch_tokens(2); },
      [](v1::HandoffBinding* b) { b->mutable_terms()->set_seed(2); },
      [](v1::HandoffBinding* b) { b->mutable_terms()->set_min_window_bytes(32); },
      [](v1::HandoffBinding* b) { b->mutable_terms()->set_loss_decimals(6); },
      [](v1::HandoffBinding* b) { b->mutable_terms()->set_min_windows_per_loss(1); },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    v1::HandoffBinding other = b_;
    changes[i](&other);
    auto m = UnwrapHandoff(key_, other, blob);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kPermissionDenied) << i;
  }
}

TEST_F(HandoffTest, LceKeyOfTheWrongSizeIsNotWrapped) {
  for (size_t size : {size_t{0}, size_t{16}, size_t{31}, size_t{33}, size_t{64}}) {
    ChannelMaterial bad = lce_.Clone();
    bad.key = SecretBytes(size);
    auto blob = WrapHandoff(key_, b_, One(bad));
    EXPECT_EQ(blob.status().code(), absl::StatusCode::kInvalidArgument) << size;
    EXPECT_NE(blob.status().message().find(std::to_string(size) + " bytes, not the 32"),
              std::string::npos)
        << blob.status();
  }
}

TEST_F(HandoffTest, OtherChannelKeyRefused) {
  auto blob = *WrapHandoff(key_, b_, One(lce_));
  SecretBytes other(32);
  RandomBytes(other.data(), 32);
  EXPECT_FALSE(UnwrapHandoff(other, b_, blob).ok());
}

TEST_F(HandoffTest, MalformedBlobsRefused) {
  auto blob = *WrapHandoff(key_, b_, One(lce_));
  EXPECT_EQ(UnwrapHandoff(key_, b_, blob.substr(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (char version : {'\x02', '\x04'}) {
    std::string other = blob;
    other[0] = version;
    EXPECT_EQ(UnwrapHandoff(key_, b_, other).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  std::string flipped = blob;
  flipped[20] ^= 1;
  EXPECT_FALSE(UnwrapHandoff(key_, b_, flipped).ok());
}

// A fixed hand-off, byte for byte: a change to the format (docs/protocol.md
// section 10) must change these bytes, and so fail here. The expected bytes
// were made apart from this code, from the layout in docs/protocol.md, with
// Python's struct and python3-cryptography's AESGCM. Two lanes, so the
// per-lane parts of the AAD and the payload are both covered.
class HandoffVectorTest : public HandoffTest {
 protected:
  void SetUp() override {
    HandoffTest::SetUp();
    key_ = Counting(0x00, 32);  // 00 01 .. 1f
    b_.set_chunk_size(1 << 19);
    b_.clear_lanes();
    for (uint32_t e = 0; e < 2; ++e) {
      v1::H2dLane* l = b_.add_lanes();
      l->set_copy_engine(e);
      l->set_offset(e << 19);
      l->set_length(1 << 19);
      l->set_first_counter(1);
      l->set_counter_count(1);
    }
    ChannelMaterial a, b;
    a.key = Counting(0x20, 32);
    std::copy_n(Counting(0xa0, 12).data(), 12, a.iv_mask.begin());
    a.channel_counter = 0x0102030405060708ull;
    b.key = Counting(0x40, 32);
    std::copy_n(Counting(0xb0, 12).data(), 12, b.iv_mask.begin());
    b.channel_counter = 9;
    lanes_.push_back(std::move(a));
    lanes_.push_back(std::move(b));
  }
  static SecretBytes Counting(uint8_t first, size_t n) {
    SecretBytes s(n);
    for (size_t i = 0; i < n; ++i) s.data()[i] = static_cast<uint8_t>(first + i);
    return s;
  }
  static std::string Unhex(const char* hex) {
    auto b = HexDecode(hex);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *b : "";
  }

  // W(x) = U32(length) || x; integers big-endian.
  static constexpr char kAad[] =
      "00000014" "67707574726176656c2d68616e646f66662d7633"  // W("gputravel-handoff-v3")
      "00000002" "6331"                                      // W(campaign "c1")
      "0000000000000007"                                     // U64(trip)
      "0000000d" "454d552d483130302d30303031"                // W(gpu_serial)
      "0000000000000003"                                     // U64(gpu_session)
      "0000000a" "686f73706974616c2d61"                      // W(holder "hospital-a")
      "0000000000000001"                                     // U64(buffer_id)
      "0000000000000000"                                     // U64(window_offset)
      "0000000000100000"                                     // U64(window_length)
      "00080000"                                             // U32(chunk_size)
      "00000002"                                             // U32(lane count)
      "00000000" "0000000000000000" "0000000000080000" "00000001" "00000001"  // lane 0
      "00000001" "0000000000080000" "0000000000080000" "00000001" "00000001"  // lane 1
      "0000000a" "6e6578742d746f6b656e"                      // W(trainer_kind)
      "00000200" "00000020"                                  // U32(vocab) U32(dim)
      "3fa999999999999a"                                     // learning_rate 0.05
      "0000000000010000" "0000000000000001" "0000000000100000"  // batch_tokens seed min_window
      "00000002" "00000004";                                 // loss_decimals min_windows
  // Per lane: key (32) || iv_mask (12) || channel_counter (U64).
  static constexpr char kPayload[] =
      "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
      "a0a1a2a3a4a5a6a7a8a9aaab" "0102030405060708"
      "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
      "b0b1b2b3b4b5b6b7b8b9babb" "0000000000000009";
  // 0x03 || IV c0..cb || AES-256-GCM(key, IV, kAad, kPayload) || tag.
  static constexpr char kBlob[] =
      "03" "c0c1c2c3c4c5c6c7c8c9cacb"
      "20690544535db079b0f0d7891e81c6797c42d10c08d7298d12fa71310b404189"
      "1c373504d67ee3a460e4feb2f8c6668d8863d872928ce25ac0606897aaae7156"
      "4161c572b9972eff36c04e4bac0e45dd191bf4f076bc973e179b02a40ef5a979"
      "c08170a7460ccba1a9be1d6e"
      "0c5bf23cc07041521ed9041e";  // tag

  std::vector<ChannelMaterial> lanes_;
};

TEST_F(HandoffVectorTest, AssociatedDataIsTheDocumentedLayout) {
  EXPECT_EQ(HexEncode(HandoffAad(b_)), kAad);
  EXPECT_EQ(kHandoffVersion, 3);
}

TEST_F(HandoffVectorTest, FixedBlobUnwrapsToItsKeys) {
  auto m = UnwrapHandoff(key_, b_, Unhex(kBlob));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE("lane " + std::to_string(i));
    EXPECT_TRUE((*m)[i].key.Equals(lanes_[i].key));
    EXPECT_EQ((*m)[i].iv_mask, lanes_[i].iv_mask);
    EXPECT_EQ((*m)[i].channel_counter, lanes_[i].channel_counter);
  }
}

// The IV is random, so a wrapped blob is the vector's layout under its own
// IV: version, IV, then the documented payload sealed with that IV and the
// documented AAD.
TEST_F(HandoffVectorTest, WrappedBlobIsVersionIvAndTheSealedPayload) {
  auto blob = WrapHandoff(key_, b_, lanes_);
  ASSERT_TRUE(blob.ok()) << blob.status();
  const std::string payload = Unhex(kPayload);
  ASSERT_EQ(blob->size(), 1 + kGcmIvSize + payload.size() + kGcmTagSize);
  EXPECT_EQ(static_cast<uint8_t>((*blob)[0]), 0x03);
  auto gcm = AesGcm::Create(key_);
  ASSERT_TRUE(gcm.ok()) << gcm.status();
  const auto* iv = reinterpret_cast<const uint8_t*>(blob->data() + 1);
  auto sealed = (*gcm)->Seal(iv, Unhex(kAad), payload);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(HexEncode(blob->substr(1 + kGcmIvSize)), HexEncode(*sealed));
  // And the vector's own IV gives the vector's blob.
  const std::string vector_blob = Unhex(kBlob);
  auto fixed = (*gcm)->Seal(reinterpret_cast<const uint8_t*>(vector_blob.data() + 1),
                            Unhex(kAad), payload);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ("03c0c1c2c3c4c5c6c7c8c9cacb" + HexEncode(*fixed), kBlob);
}

}  // namespace
}  // namespace gputravel
