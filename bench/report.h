#ifndef GPUTRAVEL_BENCH_REPORT_H_
#define GPUTRAVEL_BENCH_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/control_plane_bench.h"
#include "bench/gcm_reference.h"
#include "bench/machine_info.h"
#include "bench/provision_bench.h"
#include "bench/trip_bench.h"

namespace gputravel {
namespace bench {

// Targets the figures are judged against.
inline constexpr double kStageTargetRatio = 0.9;      // (a) vs threads x OpenSSL
inline constexpr double kEnginesTargetRatio = 0.8;    // (b') vs the machine's limit
inline constexpr double kTripP50TargetSeconds = 0.005;  // (c)
// Fewer trips than this give no p99 worth the name: no verdict on (c).
inline constexpr uint64_t kTripsForFigures = 100;

// One throughput configuration, measured over several passes.
struct ThroughputFigure {
  uint32_t chunk_size = 0;
  int threads = 0;
  uint64_t window_bytes = 0;      // bytes per pass
  std::vector<double> pass_mbps;  // every pass, in order
  double mbps = 0;                // median pass
  double best_mbps = 0;
  double reference_mbps = 0;      // OpenSSL single thread at chunk_size
  double ring_reference_mbps = 0; // the same out of place into a /dev/shm ring
  double large_source_reference_mbps = 0;  // ... reading a large buffer in turn
  double ratio = 0;               // mbps / (threads x reference_mbps)
  double ratio_single = 0;        // mbps / reference_mbps
  // OpenSSL single thread at chunk_size measured right before each pass (the
  // machine is shared and its speed drifts during a run), and the median over
  // passes of pass_mbps / (threads x that pass's own reference).
  std::vector<double> pass_adjacent_reference_mbps;
  double adjacent_reference_mbps = 0;  // median
  double ratio_adjacent = 0;
  // Several threads only, (a): OpenSSL on `threads` threads at once right
  // before each pass (MeasureGcmReferenceConcurrent), and the median over
  // passes of pass_mbps / that figure. Diagnostic, not a target.
  std::vector<double> pass_concurrent_reference_mbps;
  double concurrent_reference_mbps = 0;  // median
  double ratio_concurrent = 0;
  // (b') only: both sides of the window with OpenSSL alone right before each
  // pass (MeasureGcmBothSides, nproc / 2 pairs of threads), and the median
  // over passes of pass_mbps / that figure: how much of what the machine can
  // do the data path gets.
  std::vector<double> pass_both_sides_mbps;
  double both_sides_mbps = 0;  // median
  double ratio_both_sides = 0;
  // Median pass: wall, process CPU (cpu/wall = CPUs busy on average), and
  // the writer's time getting the plaintext (a view of the source, or a copy
  // into staging), summed over its workers.
  double seconds = 0, cpu_seconds = 0;
  double read_seconds = 0;
  bool zero_copy = false;  // (a) the workers encrypted straight from source views
  // Creating the bounce ring the passes share: once per holder agent (it
  // keeps its ring between trips, device/bounce_pool.h), so not in any pass.
  double ring_create_seconds = 0;
};

struct BenchReport {
  MachineInfo machine;
  std::string command_line;
  bool quick = false;
  std::string bounce_dir;
  uint64_t large_source_bytes = 0;  // the buffer of the large-source reference
  std::string load_average_end;
  double total_seconds = 0;
  bool ran_datapath = true;  // (a), (a') and (b) ran (not --trips_only)
  bool ran_trips = true;     // (c) over the stack was attempted (not --skip_trips)

  std::vector<GcmReference> reference;           // (ref), both kinds
  std::vector<ThroughputFigure> stage;           // (a) without the device
  // (a) from a dataset file through DatasetSource (diagnostic, no target),
  // the file system the file was on, whether chunks were mapped (else read
  // into staging), and why the rows are missing when they are.
  std::vector<ThroughputFigure> stage_from_file;
  std::string stage_from_file_fs;
  bool stage_from_file_mapped = false;
  std::string stage_from_file_note;
  std::vector<ThroughputFigure> stage_device;    // (a') H2dWriter -> in-process device
  std::vector<DeviceCeiling> device_ceiling;     // (a') the device side alone
  ThroughputFigure provision;                    // (b) 256 MiB window end to end
  // (b') the same window through k copy engines side by side (the hand-off's
  // lanes: k keys, each engine granted its lane), one figure per k. Each
  // figure's `threads` is the writer's workers; the engines are in
  // copy_engines. Ratios: to OpenSSL single thread (adjacent reference), and
  // to this machine's limit, nproc x that / 2 (both sides' AES-GCM on the
  // same cores).
  struct EngineFigure {
    uint32_t copy_engines = 0;
    ThroughputFigure figure;
    double limit_mbps = 0;
    double ratio_limit = 0;
    // OpenSSL on nproc threads at once (median over the passes) / 2: the
    // limit as the machine delivers it (0 on one CPU).
    double measured_limit_mbps = 0;
    double ratio_measured_limit = 0;
    // What OpenSSL alone gets doing both sides (figure.both_sides_mbps) as a
    // share of the limit: the median over passes of that pass's two-sided
    // figure / (nproc x its adjacent reference / 2). Where it is below the
    // target, no data path can meet the target on this machine.
    double both_sides_ratio_limit = 0;
  };
  std::vector<EngineFigure> provision_engines;
  std::vector<ComponentTiming> components;       // (c) steps, in process
  TripBenchResult trips;                         // (c) multi-process stack
  std::string trips_error;                       // set when (c) could not run
};

// Reference figure for `message_bytes` (0 if it was not measured): in place
// (the yardstick), or into the bounce ring.
double ReferenceMbps(const BenchReport& report, size_t message_bytes, bool into_ring = false,
                     bool large_source = false);

// A figure measured before each pass (`refs`, one per pass; nothing
// otherwise): its median into *ref, and the median over passes of the pass's
// MB/s / (scale x its own figure) into *ratio.
void PairWithPasses(const std::vector<double>& refs, const std::vector<double>& passes,
                    double scale, double* ref, double* ratio);

// Fills mbps/best/ratios of `f` from its passes and the report's reference.
void FinishFigure(const BenchReport& report, ThroughputFigure* f);

// The ratio a throughput verdict is taken on: the lower of the ratio to the
// reference measured at the start of the run and the median ratio to the
// reference measured right before each pass, so a reference measured while
// the machine was slow cannot flatter a figure.
double VerdictRatio(const ThroughputFigure& f);

// The verdict on (c): true (met), false (missed), or empty when it was not
// measured or rests on fewer than kTripsForFigures trips.
std::optional<bool> TripTargetMet(const BenchReport& report);

// One JSON object with every figure, the machine and the command line.
// Sections that did not run are null ("sections_run" says which did).
std::string ReportJson(const BenchReport& report);
// Human-readable tables.
std::string ReportTable(const BenchReport& report);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_REPORT_H_
