#include "orchestrator/schedule.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

constexpr auto kRR = SchedulePolicy::kRoundRobin;
constexpr auto kProp = SchedulePolicy::kProportional;

HolderProgress Fresh(uint64_t size) { return HolderProgress{size, 0, 0, true}; }

// Runs a whole campaign the way the orchestrator would: pick, send the
// window, persist the advanced progress. Returns the sequence of picks.
std::vector<size_t> Simulate(SchedulePolicy p, std::vector<HolderProgress>& hs, uint32_t rounds,
                             uint64_t buffer) {
  std::vector<size_t> picks;
  std::optional<size_t> last;
  while (auto next = PickNextHolder(p, hs, rounds, last)) {
    Window w = NextWindow(hs[*next], buffer);
    EXPECT_GT(w.length, 0u);
    hs[*next] = AdvanceProgress(hs[*next], w.length);
    picks.push_back(*next);
    last = next;
    if (picks.size() > 100000) {
      ADD_FAILURE() << "does not terminate";
      break;
    }
  }
  return picks;
}

TEST(NextWindowTest, FullAndTailWindows) {
  HolderProgress h{100, 0, 0, true};
  Window w = NextWindow(h, 32);
  EXPECT_EQ(w.offset, 0u);
  EXPECT_EQ(w.length, 32u);
  h.cursor_offset = 96;
  w = NextWindow(h, 32);
  EXPECT_EQ(w.offset, 96u);
  EXPECT_EQ(w.length, 4u);
  h.cursor_offset = 100;  // at the end: nothing (no underflow)
  EXPECT_EQ(NextWindow(h, 32).length, 0u);
  EXPECT_EQ(NextWindow(HolderProgress{0, 0, 0, true}, 32).length, 0u);
  EXPECT_EQ(NextWindow(HolderProgress{10, 0, 0, true}, 1 << 20).length, 10u);
}

TEST(AdvanceProgressTest, MovesCursorAndWrapsIntoNextRound) {
  HolderProgress h{100, 0, 0, true};
  h = AdvanceProgress(h, 32);
  EXPECT_EQ(h.cursor_offset, 32u);
  EXPECT_EQ(h.round, 0u);
  h = AdvanceProgress(h, 68);
  EXPECT_EQ(h.cursor_offset, 0u);
  EXPECT_EQ(h.round, 1u);
  EXPECT_TRUE(h.active);
}

TEST(HolderFinishedTest, Rules) {
  EXPECT_TRUE(HolderFinished(HolderProgress{0, 0, 0, true}, 1));  // empty dataset
  EXPECT_FALSE(HolderFinished(HolderProgress{10, 0, 0, true}, 1));
  EXPECT_TRUE(HolderFinished(HolderProgress{10, 0, 1, true}, 1));
  EXPECT_FALSE(HolderFinished(HolderProgress{10, 0, 1, true}, 2));
  // A cursor left at the end of the last pass counts as finished.
  EXPECT_TRUE(HolderFinished(HolderProgress{10, 10, 1, true}, 2));
}

TEST(RoundRobinTest, ListOrderOneWindowEach) {
  std::vector<HolderProgress> hs = {Fresh(64), Fresh(64), Fresh(64)};
  EXPECT_EQ(PickNextHolder(kRR, hs, 1, std::nullopt), 0u);
  EXPECT_EQ(PickNextHolder(kRR, hs, 1, 0), 1u);
  EXPECT_EQ(PickNextHolder(kRR, hs, 1, 1), 2u);
  EXPECT_EQ(PickNextHolder(kRR, hs, 1, 2), 0u);  // wraps
  std::vector<size_t> picks = Simulate(kRR, hs, 1, 32);
  EXPECT_EQ(picks, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
}

TEST(RoundRobinTest, SkipsInactiveAndFinishedHolders) {
  std::vector<HolderProgress> hs = {Fresh(64), Fresh(64), Fresh(64), Fresh(64)};
  hs[1].active = false;                // failed
  hs[2] = HolderProgress{64, 0, 1, true};  // already did its one pass
  EXPECT_EQ(PickNextHolder(kRR, hs, 1, 0), 3u);
  EXPECT_EQ(PickNextHolder(kRR, hs, 1, 3), 0u);
  std::vector<size_t> picks = Simulate(kRR, hs, 1, 32);
  EXPECT_EQ(picks, (std::vector<size_t>{0, 3, 0, 3}));
}

TEST(RoundRobinTest, EmptyDatasetIsFinished) {
  std::vector<HolderProgress> hs = {Fresh(0), Fresh(32), Fresh(0)};
  EXPECT_EQ(PickNextHolder(kRR, hs, 1, std::nullopt), 1u);
  EXPECT_EQ(Simulate(kRR, hs, 3, 32), (std::vector<size_t>{1, 1, 1}));
}

TEST(RoundRobinTest, UnevenSizesKeepRotatingUntilEachIsDone) {
  std::vector<HolderProgress> hs = {Fresh(32), Fresh(96)};
  EXPECT_EQ(Simulate(kRR, hs, 1, 32), (std::vector<size_t>{0, 1, 1, 1}));
}

TEST(RoundRobinTest, MultipleRounds) {
  std::vector<HolderProgress> hs = {Fresh(64), Fresh(32)};
  std::vector<size_t> picks = Simulate(kRR, hs, 2, 32);
  EXPECT_EQ(picks, (std::vector<size_t>{0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(hs[0].round, 2u);
  EXPECT_EQ(hs[1].round, 2u);
}

TEST(RoundRobinTest, LastOutOfRangeStartsAtTheBeginning) {
  std::vector<HolderProgress> hs = {Fresh(64), Fresh(64)};
  EXPECT_EQ(PickNextHolder(kRR, hs, 1, 7), 0u);
}

TEST(RoundRobinTest, SingleRemainingHolderIsPickedAgain) {
  std::vector<HolderProgress> hs = {Fresh(64), HolderProgress{64, 0, 0, false}};
  EXPECT_EQ(PickNextHolder(kRR, hs, 1, 0), 0u);
}

TEST(ScheduleTest, AllFinishedOrInactiveGivesNullopt) {
  for (auto p : {kRR, kProp}) {
    std::vector<HolderProgress> hs = {HolderProgress{64, 0, 2, true},
                                      HolderProgress{64, 32, 0, false}, Fresh(0)};
    EXPECT_FALSE(PickNextHolder(p, hs, 2, std::nullopt).has_value()) << SchedulePolicyName(p);
    EXPECT_FALSE(PickNextHolder(p, hs, 2, 1).has_value()) << SchedulePolicyName(p);
    EXPECT_FALSE(PickNextHolder(p, {}, 1, std::nullopt).has_value()) << SchedulePolicyName(p);
  }
}

TEST(ProportionalTest, OneToThreeSharesTripsThreeToOneInterleaved) {
  std::vector<HolderProgress> hs = {Fresh(4 * 32), Fresh(12 * 32)};
  std::vector<size_t> picks = Simulate(kProp, hs, 1, 32);
  ASSERT_EQ(picks.size(), 16u);
  size_t small = 0;
  for (size_t p : picks) small += p == 0;
  EXPECT_EQ(small, 4u);
  EXPECT_EQ(picks.size() - small, 12u);
  // Interleaved: one small trip in every four, never a long run of one holder.
  EXPECT_EQ(picks, (std::vector<size_t>{0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1}));
}

// "Smallest fraction done goes next" keeps the holders' fractions done within
// one window of each other at every point: max(done) - min(done) never
// exceeds the largest window fraction (buffer / smallest dataset). So when
// the first holder finishes, everyone else is at most that far from the end.
TEST(ProportionalTest, EveryoneFinishesTogether) {
  const uint64_t buffer = 32;
  std::vector<uint64_t> sizes = {10 * 32, 35 * 32 + 8, 20 * 32, 70 * 32};
  std::vector<HolderProgress> hs;
  for (uint64_t s : sizes) hs.push_back(Fresh(s));
  const uint32_t rounds = 2;
  const double max_window = static_cast<double>(buffer) / (10 * 32);
  auto done = [&](const HolderProgress& h) {
    return static_cast<double>(h.round * h.dataset_bytes + h.cursor_offset) /
           (static_cast<double>(rounds) * h.dataset_bytes);
  };
  size_t trips = 0;
  bool first_finish_seen = false;
  while (auto next = PickNextHolder(kProp, hs, rounds, std::nullopt)) {
    hs[*next] = AdvanceProgress(hs[*next], NextWindow(hs[*next], buffer).length);
    ++trips;
    double lo = 2, hi = -1;
    for (const auto& h : hs) {
      lo = std::min(lo, done(h));
      hi = std::max(hi, done(h));
    }
    EXPECT_LE(hi - lo, max_window / rounds + 1e-9) << "after trip " << trips;
    if (!first_finish_seen && HolderFinished(hs[*next], rounds)) {
      first_finish_seen = true;
      EXPECT_GE(lo, 1.0 - max_window / rounds - 1e-9);
    }
  }
  EXPECT_TRUE(first_finish_seen);
  for (const auto& h : hs) EXPECT_EQ(h.round, rounds);
}

TEST(ProportionalTest, TiesGoByListOrder) {
  std::vector<HolderProgress> hs = {Fresh(100), Fresh(100), Fresh(100)};
  EXPECT_EQ(PickNextHolder(kProp, hs, 1, std::nullopt), 0u);
  // `last` plays no part.
  EXPECT_EQ(PickNextHolder(kProp, hs, 1, 0), 0u);
  hs[0].cursor_offset = 50;
  EXPECT_EQ(PickNextHolder(kProp, hs, 1, std::nullopt), 1u);
  // Equal fractions with different sizes are a tie too: 25/100 == 50/200.
  std::vector<HolderProgress> ts = {HolderProgress{200, 50, 0, true},
                                    HolderProgress{100, 25, 0, true}};
  EXPECT_EQ(PickNextHolder(kProp, ts, 1, std::nullopt), 0u);
}

TEST(ProportionalTest, SkipsInactiveAndFinished) {
  std::vector<HolderProgress> hs = {HolderProgress{100, 0, 0, false},
                                    HolderProgress{100, 0, 1, true}, HolderProgress{100, 90, 0, true}};
  EXPECT_EQ(PickNextHolder(kProp, hs, 1, std::nullopt), 2u);
}

TEST(ProportionalTest, RoundsCountInTheFraction) {
  // Holder 0 is in its second pass at 10%, holder 1 at 90% of its first: 1
  // has done less (0.9 < 1.1) and goes first.
  std::vector<HolderProgress> hs = {HolderProgress{100, 10, 1, true},
                                    HolderProgress{1000, 900, 0, true}};
  EXPECT_EQ(PickNextHolder(kProp, hs, 2, std::nullopt), 1u);
}

TEST(ProportionalTest, MultipleRoundsKeepsTheRatio) {
  std::vector<HolderProgress> hs = {Fresh(2 * 32), Fresh(6 * 32)};
  std::vector<size_t> picks = Simulate(kProp, hs, 3, 32);
  ASSERT_EQ(picks.size(), 24u);
  // Neither holder runs more than a pass ahead of the other: after every
  // trip their pass counts differ by at most one.
  std::vector<HolderProgress> replay = {Fresh(2 * 32), Fresh(6 * 32)};
  for (size_t p : picks) {
    replay[p] = AdvanceProgress(replay[p], NextWindow(replay[p], 32).length);
    int64_t diff = static_cast<int64_t>(replay[0].round) - replay[1].round;
    EXPECT_LE(std::abs(diff), 1);
  }
  EXPECT_EQ(hs[0].round, 3u);
  EXPECT_EQ(hs[1].round, 3u);
}

TEST(ProportionalTest, HugeSizesCompareExactly) {
  // Cross products overflow 64 bits; the comparison must still be exact.
  const uint64_t big = UINT64_MAX - 1;
  std::vector<HolderProgress> hs = {HolderProgress{big, big / 2 + 1, 0, true},
                                    HolderProgress{big - 2, (big - 2) / 2, 0, true}};
  EXPECT_EQ(PickNextHolder(kProp, hs, 1, std::nullopt), 1u);
}

// The choice depends only on the persisted progress: a fresh evaluation from
// the same state (as after a crash and restart) gives the same sequence.
TEST(ScheduleTest, DeterministicAcrossRestart) {
  for (auto p : {kRR, kProp}) {
    std::vector<HolderProgress> a = {Fresh(5 * 32), Fresh(7 * 32 + 3), Fresh(2 * 32)};
    std::vector<size_t> full = Simulate(p, a, 2, 32);

    // Run half, "crash" (drop everything but the persisted progress and the
    // last pick), then resume.
    std::vector<HolderProgress> b = {Fresh(5 * 32), Fresh(7 * 32 + 3), Fresh(2 * 32)};
    std::vector<size_t> resumed;
    std::optional<size_t> last;
    for (size_t k = 0; k < full.size() / 2; ++k) {
      last = PickNextHolder(p, b, 2, last);
      b[*last] = AdvanceProgress(b[*last], NextWindow(b[*last], 32).length);
      resumed.push_back(*last);
    }
    std::vector<HolderProgress> persisted = b;
    std::optional<size_t> persisted_last = last;
    while (auto next = PickNextHolder(p, persisted, 2, persisted_last)) {
      persisted[*next] = AdvanceProgress(persisted[*next], NextWindow(persisted[*next], 32).length);
      resumed.push_back(*next);
      persisted_last = next;
    }
    EXPECT_EQ(resumed, full) << SchedulePolicyName(p);
    // And the same call twice gives the same answer.
    EXPECT_EQ(PickNextHolder(p, b, 2, last), PickNextHolder(p, b, 2, last));
  }
}

}  // namespace
}  // namespace gputravel
