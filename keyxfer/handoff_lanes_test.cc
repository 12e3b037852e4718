#include "keyxfer/handoff_lanes.h"

#include "keyxfer/cc_channel.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

v1::HandoffBinding Bound(uint64_t length, uint32_t chunk, uint32_t engines) {
  v1::HandoffBinding b;
  b.set_window_length(length);
  b.set_chunk_size(chunk);
  auto lanes = PlanLanes(length, chunk, engines);  // kept: the loop reads into it
  EXPECT_TRUE(lanes.ok()) << lanes.status();
  if (!lanes.ok()) return b;
  for (const auto& l : *lanes) *b.add_lanes() = l;
  return b;
}

TEST(HandoffLanesTest, SplitsWholeChunksEvenlyInWindowOrder) {
  // 10 chunks, the last one short, over 4 engines: 3, 3, 2, 2 chunks.
  const uint64_t len = 9 * 64 + 32;
  auto lanes = PlanLanes(len, 64, 4);
  ASSERT_TRUE(lanes.ok()) << lanes.status();
  ASSERT_EQ(lanes->size(), 4u);
  const uint32_t counts[] = {3, 3, 2, 2};
  uint64_t at = 0;
  for (uint32_t e = 0; e < 4; ++e) {
    const v1::H2dLane& l = (*lanes)[e];
    EXPECT_EQ(l.copy_engine(), e);
    EXPECT_EQ(l.offset(), at);
    EXPECT_EQ(l.counter_count(), counts[e]);
    EXPECT_EQ(l.first_counter(), 1u);
    at += l.length();
  }
  EXPECT_EQ(at, len);
  EXPECT_EQ((*lanes)[3].length(), 64u + 32u);
  EXPECT_TRUE(CheckLanes(Bound(len, 64, 4)).ok());
}

TEST(HandoffLanesTest, NoMoreLanesThanChunksAndOneEngineIsOneLane) {
  auto lanes = PlanLanes(100, 64, 8);
  ASSERT_TRUE(lanes.ok());
  EXPECT_EQ(lanes->size(), 2u);
  lanes = PlanLanes(1 << 20, 4096, 1);
  ASSERT_TRUE(lanes.ok());
  ASSERT_EQ(lanes->size(), 1u);
  EXPECT_EQ((*lanes)[0].length(), 1u << 20);
  EXPECT_EQ((*lanes)[0].counter_count(), 256u);
  EXPECT_FALSE(PlanLanes(100, 64, 0).ok());
  EXPECT_FALSE(PlanLanes(100, 64, 9).ok());
  EXPECT_FALSE(PlanLanes(0, 64, 2).ok());
  EXPECT_FALSE(PlanLanes(100, 48, 2).ok());
}

// A holder refuses lanes that do not cover its window exactly, once each,
// in order, on whole chunks with one counter per chunk.
// Found by //keyxfer:handoff_fuzzer's property (planned lanes pass the
// holder's check): a lane of more than 2^32 - 1 chunks would have wrapped
// its 32-bit counter_count.
TEST(HandoffLanesTest, RefusesALaneWithMoreChunksThanAKeyHasCounters) {
  const uint64_t most = uint64_t{kLastMessageCounter} - kFirstMessageCounter + 1;
  auto too_many = PlanLanes((most + 1) * 32, 32, 1);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(PlanLanes(uint64_t{1} << 40, 32, 8).ok());
  auto at_limit = PlanLanes(most * 32, 32, 1);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_EQ((*at_limit)[0].counter_count(), most);
  v1::HandoffBinding b;
  b.set_window_length(most * 32);
  b.set_chunk_size(32);
  *b.add_lanes() = (*at_limit)[0];
  EXPECT_TRUE(CheckLanes(b).ok()) << CheckLanes(b);
  EXPECT_TRUE(PlanLanes((most + 1) * 32, 32, 2).ok());
}

TEST(HandoffLanesTest, HolderRefusesLanesThatDoNotTileTheWindow) {
  const v1::HandoffBinding good = Bound(8 * 64, 64, 4);
  ASSERT_TRUE(CheckLanes(good).ok());
  std::vector<std::function<void(v1::HandoffBinding*)>> changes = {
      [](v1::HandoffBinding* b) { b->clear_lanes(); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(1)->set_copy_engine(0); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(1)->set_copy_engine(8); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(1)->set_offset(64); },  // overlaps lane 0
      [](v1::HandoffBinding* b) { b->mutable_lanes(3)->set_length(32); },  // leaves a gap
      [](v1::HandoffBinding* b) { b->mutable_lanes(2)->set_counter_count(3); },
      [](v1::HandoffBinding* b) { b->mutable_lanes(2)->set_first_counter(0); },
      [](v1::HandoffBinding* b) { b->set_window_length(9 * 64); },
      [](v1::HandoffBinding* b) { b->mutable_lanes()->SwapElements(0, 1); },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    v1::HandoffBinding b = good;
    changes[i](&b);
    EXPECT_EQ(CheckLanes(b).code(), absl::StatusCode::kInvalidArgument) << "change " << i;
  }
}

}  // namespace
}  // namespace gputravel
