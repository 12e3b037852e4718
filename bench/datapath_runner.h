#ifndef GPUTRAVEL_BENCH_DATAPATH_RUNNER_H_
#define GPUTRAVEL_BENCH_DATAPATH_RUNNER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/report.h"

namespace gputravel {
namespace bench {

// Sizes and repetitions of one run.
struct BenchConfig {
  double reference_seconds = 0.5;               // per OpenSSL figure
  double adjacent_reference_seconds = 0.1;      // before each (a)/(a')/(b) pass; 0: none
  std::vector<uint32_t> chunk_sizes = {64u << 10, 256u << 10, 1u << 20, 2u << 20};
  std::vector<int> threads = {1, 2};
  uint64_t stage_window = 256ull << 20;         // (a) bytes per pass
  int stage_passes = 5;
  uint64_t device_window = 128ull << 20;        // (a') bytes per pass
  int device_passes = 3;
  uint64_t provision_window = 256ull << 20;     // (b)
  uint32_t provision_chunk = 2u << 20;          // (b): H2dWriterOptions defaults
  int provision_threads = 2;
  int provision_passes = 3;
  // (b') the same window through k copy engines side by side, per k.
  std::vector<uint32_t> copy_engines = {1, 2, 4, 8};
  size_t source_bytes = 256u << 20;             // in-memory dataset, read cyclically;
                                                // also the large-source reference's
  int component_iterations = 50;                // (c) steps in process
  bool run_datapath = true;                     // (a), (a'), (b) and (b')
  bool run_stages = true;                       // (a), (a') and (b) (false: only (b'))
  // (a) also from a dataset file through the holder agent's DatasetSource
  // (smallest and largest chunk size), as diagnostic rows.
  bool dataset_file_rows = true;
  bool run_trips = true;                        // (c) multi-process stack
  TripBenchOptions trips;
  std::string bounce_dir = "/dev/shm";
  std::string state_dir = "/tmp";               // where durable writes are timed

  static BenchConfig Full();
  static BenchConfig Quick();
};

// Runs every section in order: (ref), (a), (a'), (b), (c); run_datapath and
// run_trips leave sections out. `progress` (may be
// empty) gets a line before each section. A failing (c) is recorded in the
// report (trips_error) rather than failing the run; anything else fails it,
// and so do daemons that cannot be found for (c), before anything is measured.
absl::StatusOr<BenchReport> RunDatapathBench(
    const BenchConfig& config, const std::function<void(const std::string&)>& progress);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_DATAPATH_RUNNER_H_
