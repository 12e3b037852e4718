#ifndef GPUTRAVEL_BENCH_LOAD_BENCH_H_
#define GPUTRAVEL_BENCH_LOAD_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace bench {

struct LoadOptions {
  int holders = 100;
  uint32_t rounds = 10;           // trips = holders x rounds
  int watchers = 50;              // concurrent WatchCampaign streams, one channel each
  uint64_t window_bytes = 64u << 10;  // dataset = buffer = one window per holder
  double sample_seconds = 1.0;    // how often the orchestrator is sampled
  std::string bin_dir;            // daemons; empty: Bazel runfiles
};

// One look at the orchestrator during the campaign.
struct LoadSample {
  double seconds = 0;      // since the campaign started
  uint64_t trips_done = 0;  // TRIP_FINISHED events seen by the first watcher
  int64_t rss_kib = 0;     // VmRSS
  int64_t rss_anon_kib = 0;  // RssAnon: the heap and stacks (not mapped files)
  int64_t open_files = 0;  // entries of /proc/PID/fd
  bool after_campaign = false;  // the last look, once the watchers have gone
};

struct LoadResult {
  int holders = 0, watchers = 0;
  uint32_t rounds = 0;
  double stack_start_seconds = 0;  // every daemon up and ready
  double campaign_seconds = 0;     // StartCampaign .. final
  std::string state;               // the campaign's final state
  uint64_t trips = 0, failed_trips = 0;
  // Watchers whose stream delivered every trip's TRIP_FINISHED and the
  // final state, in sequence order, every trip's events naming its holder.
  int watchers_complete = 0;
  std::vector<LoadSample> samples;
  // After warm-up (every holder met once and a tenth of the trips done)
  // until the campaign ends: the least squares slope of RSS against trips
  // done (KiB per 100 trips), the last sample's RSS over the first one's,
  // and the spread of open files.
  uint64_t warm_trips = 0;
  int64_t rss_warm_kib = 0, rss_end_kib = 0;
  double rss_end_over_warm = 0;
  double rss_kib_per_100_trips = 0;
  int64_t open_files_min = 0, open_files_max = 0;
  double orchestrator_cpu_seconds_per_trip = 0;
};

// Starts the real multi-process stack with `holders` holder agents (no
// trainer: the load is the control plane's), creates one campaign of
// `rounds` passes over every holder's one-window dataset, opens `watchers`
// WatchCampaign streams (each on its own mTLS channel) before starting it,
// samples the orchestrator's resident memory and open files while it runs,
// and reads every trip of the final campaign.
absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options);

nlohmann::json LoadJson(const LoadResult& r);
// A human-readable report: the summary, then the curves as a table.
std::string LoadText(const LoadResult& r);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_LOAD_BENCH_H_
