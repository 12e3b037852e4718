// The load benchmark's machinery on a small load: every trip counted, every
// watcher complete, samples taken and summarized.
#include "bench/load_bench.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace bench {
namespace {

TEST(LoadBench, SmallLoadCompletesAndIsSampled) {
  LoadOptions o;
  o.holders = 4;
  o.rounds = 3;
  o.watchers = 10;  // two scheduler identities (8 streams each at most)
  o.window_bytes = 16u << 10;
  o.sample_seconds = 0.2;
  auto r = RunLoad(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state, "COMPLETED");
  EXPECT_EQ(r->trips, 12u);
  EXPECT_EQ(r->failed_trips, 0u);
  EXPECT_EQ(r->watchers_complete, 10);
  ASSERT_GE(r->samples.size(), 2u);
  EXPECT_EQ(r->samples.back().trips_done, 12u);  // the last look is after the end
  for (const auto& s : r->samples) {
    EXPECT_GT(s.rss_kib, 0);
    EXPECT_GT(s.open_files, 0);
  }
  EXPECT_GT(r->rss_warm_kib, 0);
  EXPECT_GT(r->open_files_max, 0);
  EXPECT_GE(r->open_files_max, r->open_files_min);
  const auto j = LoadJson(*r);
  EXPECT_EQ(j["samples"].size(), r->samples.size());
  EXPECT_NE(LoadText(*r).find("12 trips, 0 failed"), std::string::npos) << LoadText(*r);
}

TEST(LoadBench, RefusesNonsense) {
  LoadOptions o;
  o.holders = 0;
  EXPECT_FALSE(RunLoad(o).ok());
  o.holders = 1;
  o.window_bytes = 100;
  EXPECT_FALSE(RunLoad(o).ok());
}

}  // namespace
}  // namespace bench
}  // namespace gputravel
