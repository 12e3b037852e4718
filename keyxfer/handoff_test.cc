#include "keyxfer/handoff.h"

#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "keyxfer/random.h"

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

}  // namespace
}  // namespace gputravel
