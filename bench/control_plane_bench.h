#ifndef GPUTRAVEL_BENCH_CONTROL_PLANE_BENCH_H_
#define GPUTRAVEL_BENCH_CONTROL_PLANE_BENCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/device_rig.h"
#include "bench/stats.h"

namespace gputravel {
namespace bench {

// One step a trip takes, timed on its own.
struct ComponentTiming {
  std::string name;
  std::string what;
  int per_trip = 0;  // how many times one 4 KiB trip takes this step
  Summary seconds;
};

// Times, in this process, the steps a trip is made of: a unary gRPC round
// trip on a Unix socket, the orchestrator's device key exchange
// (GpuSession::Establish), one sealed control command, scrub-and-verify of a
// 4 KiB buffer, the mutually attested channel's cryptography (development
// attester), hand-off wrap + unwrap, the orchestrator's durable record of a
// trip (StateStore, SQLite in a scratch directory under `state_dir`), and
// the holder's 4 KiB H2dWriter::Write with a new gRPC channel (as the holder
// agent does per trip) and with a reused one. `iterations` samples each.
absl::StatusOr<std::vector<ComponentTiming>> MeasureControlPlaneComponents(
    DeviceRig& rig, uint64_t buffer_id, const std::string& state_dir, int iterations);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_CONTROL_PLANE_BENCH_H_
