#include "tests/gpu_contact.h"

#include <chrono>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace gputravel {

v1::CampaignGpu WaitForGpuContact(v1::Orchestrator::Stub* stub, const std::string& gpu) {
  for (int i = 0; i < 1200; ++i) {
    v1::ListCampaignGpusResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    grpc::Status s = stub->ListGpus(&ctx, {}, &resp);
    if (!s.ok()) {
      ADD_FAILURE() << "ListGpus: " << s.error_message();
      return {};
    }
    for (const auto& g : resp.gpus()) {
      if (g.name() == gpu && g.reach() != v1::GPU_REACH_UNKNOWN) return g;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "the orchestrator's first contact with " << gpu << " did not end in 120 s";
  return {};
}

}  // namespace gputravel
