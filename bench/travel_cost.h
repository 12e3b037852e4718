#ifndef GPUTRAVEL_BENCH_TRAVEL_COST_H_
#define GPUTRAVEL_BENCH_TRAVEL_COST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace bench {

// What moving a window by travelling costs, with the network baseline's
// accounting: from "window requested" (the trip starts) to "window in device
// memory and verified" (read back, digest matched, and the GPU scrubbed and
// home), split into its parts.
struct TravelCost {
  uint64_t bytes = 0;
  uint64_t trips = 0;
  // The real trip on the emulated multi-process stack (MeasureTrips): the
  // orchestrator's own Trip.seconds, median.
  double trip_seconds = 0;
  // Parts from the trips' own marks and reports (trip_bench's phases):
  double routing_seconds = 0;       // two MUX Route calls (out and home), median each
  double handoff_seconds = 0;       // trip start .. routed to the holder, less one route
  double provisioning_seconds = 0;  // the holder's Provision report, median
  double return_seconds = 0;        // routed home .. trip done (mean)
  // The return phase's parts, timed in process on an emulated GPU with a
  // window of this size (not from the trip's logs, which do not mark them):
  double rekey_seconds = 0;         // one key exchange keeping memory (median of 5)
  double scrub_seconds = 0;         // zero the window and read every byte back
  // What is left of the trip: read-back, digest, the away phase's slack
  // (trip - routing - handoff - provisioning - rekey - scrub).
  double readback_and_rest_seconds = 0;
  // The holder's provisioning throughput, 1e6 bytes/s.
  double provision_mbps = 0;
};
nlohmann::json ToJson(const TravelCost& c);

// `rounds` trips of a `window_bytes` window (2 MiB chunks) over the emulated
// stack (TCP on 127.0.0.1 between the daemons), and the re-key and scrub at
// that size in process. `bin_dir`: the daemons (empty: Bazel runfiles).
absl::StatusOr<TravelCost> MeasureTravel(uint64_t window_bytes, uint32_t rounds,
                                         const std::string& bin_dir);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_TRAVEL_COST_H_
