#ifndef GPUTRAVEL_TESTS_GPU_CONTACT_H_
#define GPUTRAVEL_TESTS_GPU_CONTACT_H_

// For tests that must not race the orchestrator's first contact with an
// idle GPU (it brings the GPU home and re-keys it when it starts).

#include <string>

#include "proto/orchestrator.grpc.pb.h"

namespace gputravel {

// GPU `gpu` as ListGpus shows it once the orchestrator's first contact with
// it is over (reach not GPU_REACH_UNKNOWN), polling for at most 120 s; a
// test failure if ListGpus fails or the contact never ends.
v1::CampaignGpu WaitForGpuContact(v1::Orchestrator::Stub* stub, const std::string& gpu = "gpu0");

}  // namespace gputravel

#endif  // GPUTRAVEL_TESTS_GPU_CONTACT_H_
