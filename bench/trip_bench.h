#ifndef GPUTRAVEL_BENCH_TRIP_BENCH_H_
#define GPUTRAVEL_BENCH_TRIP_BENCH_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "bench/stats.h"

namespace gputravel {
namespace bench {

struct TripBenchOptions {
  uint32_t rounds = 100;          // trips (one holder, one window per round)
  uint64_t window_bytes = 4096;   // dataset = buffer = one window
  uint32_t chunk_bytes = 0;       // 0: the window (one chunk)
  uint64_t gpu_memory_bytes = 0;  // 0: the stack's default
  int route_samples = 50;         // MUX Route calls timed after the campaign
  std::string bin_dir;            // daemons; empty: Bazel runfiles
  // The network links (orchestrator API, MUX, holder agent) over TCP on
  // 127.0.0.1, as between TDs; false: Unix sockets. The device's sockets
  // are Unix sockets either way (EmulatedStack).
  bool tcp_loopback = true;
};

struct TripBenchResult {
  std::string transport;           // "tcp-loopback" or "unix" (network links)
  double stack_start_seconds = 0;  // five processes up and ready
  double campaign_seconds = 0;     // RunCampaign RPC, wall
  uint64_t trips = 0, failed_trips = 0;
  Summary trip_seconds;            // report: route out .. scrub, whole trip
  Summary holder_seconds;          // report: holder's Provision handler
  Summary orchestrator_seconds;    // trip_seconds - holder seconds, per trip
  // Phases from the daemons' own timestamps (orchestrator log: ms; MUX audit
  // log: us), averaged over the trips where every mark was found.
  uint64_t phase_trips = 0;
  double setup_mean = 0;   // trip start .. MUX moved the GPU to the holder
  double away_mean = 0;    // .. MUX moved it back (includes Provision)
  double return_mean = 0;  // .. trip done (re-key, read, digest, scrub)
  // MUX Route RPC (one SetOwner on the device, one journal line fdatasync'd),
  // timed against the live stack after the campaign.
  Summary mux_route_seconds;
  // Bounce rings the device still maps after the campaign (they must all be
  // detached): count and bytes, from /proc/<gpu pid>/maps.
  uint64_t device_bounce_mappings = 0;
  uint64_t device_bounce_bytes = 0;
  // False when /proc/<gpu pid>/maps could not be read (it takes
  // CAP_SYS_PTRACE: the device is not dumpable); the two counts are then
  // unknown, not zero.
  bool device_maps_readable = false;
  // CPU time (user + system, /proc/<pid>/stat) each daemon spent during the
  // campaign, divided by the trips: what a trip costs the machine, which on
  // a few shared cores bounds how short a trip can be.
  std::map<std::string, double> cpu_seconds_per_trip;
};

// Starts the real multi-process stack (EmulatedStack: emulated GPU, MUX,
// one holder agent, orchestrator), runs one campaign of `rounds` trips of a
// `window_bytes` window and reads the per-trip figures of the report, the
// phase marks of the logs, and MUX routing cost.
absl::StatusOr<TripBenchResult> MeasureTrips(const TripBenchOptions& options);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_TRIP_BENCH_H_
