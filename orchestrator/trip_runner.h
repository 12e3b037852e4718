#ifndef GPUTRAVEL_ORCHESTRATOR_TRIP_RUNNER_H_
#define GPUTRAVEL_ORCHESTRATOR_TRIP_RUNNER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "device/gpu_session.h"
#include "keyxfer/attester.h"
#include "orchestrator/campaign_config.h"
#include "proto/holder.grpc.pb.h"
#include "proto/mux.grpc.pb.h"
#include "proto/orchestrator.pb.h"

namespace gputravel {

// What one trip moves: holder H's dataset window into device buffer B.
struct TripPlan {
  std::string campaign;
  uint64_t trip = 0;
  const HolderConfig* holder = nullptr;
  uint64_t window_offset = 0;
  uint64_t window_length = 0;
  uint64_t buffer_id = 0;
  uint64_t buffer_bytes = 0;
  uint32_t chunk_bytes = 0;
  double timeout_seconds = 120;
};

// The steps of ARCHITECTURE section 4 for one trip, in order: hand-off channel
// (mutual attestation), route out, hand-off + provisioning, route back,
// same-GPU check and fresh re-key, consume (read back and compare digests),
// scrub and verify. Any failure after route-out takes the safe path: route
// back, re-key, scrub, verify, so no holder keeps a working key and no other
// party finds residue.
class TripRunner {
 public:
  TripRunner(std::string orchestrator_domain, std::string gpu_name,
             v1::Mux::Stub* mux, GpuSession* gpu, Attester* attester,
             Verifier* verifier, std::string state_dir)
      : domain_(std::move(orchestrator_domain)), gpu_name_(std::move(gpu_name)),
        mux_(mux), gpu_(gpu), attester_(attester), verifier_(verifier),
        state_dir_(std::move(state_dir)) {}

  // Always returns a report; report.error() says what failed. A non-OK status
  // means the GPU could not be brought back to a safe state: stop everything.
  absl::StatusOr<v1::TripReport> Run(const TripPlan& plan,
                                     v1::HolderAgent::Stub* holder);

  // Routes the GPU to the orchestrator with `token`.
  absl::Status RouteHome(uint64_t token);

 private:
  absl::Status RouteTo(const std::string& domain, uint64_t token);
  // Route back, re-key, scrub + verify. Fills the report's safety fields.
  absl::Status SafeReturn(const TripPlan& plan, v1::TripReport* report);

  const std::string domain_, gpu_name_;
  v1::Mux::Stub* const mux_;
  GpuSession* const gpu_;
  Attester* const attester_;
  Verifier* const verifier_;
  const std::string state_dir_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_TRIP_RUNNER_H_
