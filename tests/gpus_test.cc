// What `gpus` and create know of a GPU, against the real daemons: the
// orchestrator brings an idle GPU home at start, so its health, CC session
// and declared memory show in ListGpus (and `gputravel gpus`), with the
// campaigns queued for it and the memory their buffers hold; create refuses
// a buffer larger than that memory and a chunk larger than the buffer; a
// GPU the orchestrator cannot reach reads UNREACHABLE with the reason.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/gpu_contact.h"
#include "tests/operator_cli.h"
#include "tests/stack_campaign.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

v1::CampaignGpu Gpu0(v1::Orchestrator::Stub* stub) {
  v1::ListCampaignGpusResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(30));
  grpc::Status s = stub->ListGpus(&ctx, {}, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.gpus_size(), 1);
  return resp.gpus_size() == 1 ? resp.gpus(0) : v1::CampaignGpu();
}

// Waits (at most 120 s) for campaign `name`'s first TRIP_STARTED event.
void WaitForATrip(v1::Orchestrator::Stub* stub, const std::string& name) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(120));
  v1::WatchCampaignRequest req;
  req.set_name(name);
  auto reader = stub->WatchCampaign(&ctx, req);
  v1::Event ev;
  bool started = false;
  while (!started && reader->Read(&ev)) started = ev.kind() == v1::TRIP_STARTED;
  ctx.TryCancel();
  (void)reader->Finish();
  ASSERT_TRUE(started) << "campaign " << name << " started no trip";
}

class GpusTest : public ::testing::Test {
 protected:
  void StartStack(const std::string& device_endpoint) {
    StackOptions o;
    o.holders = 2;
    o.rounds = 40;  // long enough to be running while we look
    o.log_level = 0;
    o.orchestrator_device_endpoint = device_endpoint;
    options_ = o;
    auto stack = EmulatedStack::Start(o);
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::move(*stack);
    stub_ = stack_->OperatorClient();
  }
  void TearDown() override {
    if (stack_) stack_->Stop();
  }

  StackOptions options_;
  std::unique_ptr<EmulatedStack> stack_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

TEST_F(GpusTest, AnIdleGpuIsBroughtHomeAtStartAndShowsItsHealthSessionAndMemory) {
  ASSERT_NO_FATAL_FAILURE(StartStack(""));
  v1::CampaignGpu g = WaitForGpuContact(stub_.get());
  EXPECT_EQ(g.reach(), v1::GPU_REACHABLE) << g.error();
  EXPECT_TRUE(g.error().empty());
  EXPECT_TRUE(g.session());
  EXPECT_FALSE(g.device_serial().empty());
  EXPECT_EQ(g.memory_bytes(), options_.gpu_memory_bytes);
  EXPECT_EQ(g.memory_free_bytes(), options_.gpu_memory_bytes);
  EXPECT_GT(g.checked_unix_ms(), 0);
  EXPECT_TRUE(g.campaign().empty());
  EXPECT_EQ(g.queue_size(), 0);

  std::string out;
  ASSERT_EQ(RunOperatorCli(*stack_, {"gpus"}, 60, &out), 0) << out;
  EXPECT_NE(out.find("HEALTH"), std::string::npos) << out;
  EXPECT_NE(out.find("reachable"), std::string::npos) << out;
  EXPECT_NE(out.find("256.0 MiB of 256.0 MiB"), std::string::npos) << out;
}

TEST_F(GpusTest, CreateRefusesABufferLargerThanTheGpuAndAChunkLargerThanTheBuffer) {
  ASSERT_NO_FATAL_FAILURE(StartStack(""));
  WaitForGpuContact(stub_.get());
  nlohmann::json spec = stack_->CampaignSpec();
  spec["buffer_bytes"] = options_.gpu_memory_bytes + 32;
  grpc::Status s = CreateNamedCampaign(stub_.get(), spec, "too-big");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("buffer_bytes: " +
                                   std::to_string(options_.gpu_memory_bytes + 32) +
                                   " bytes do not fit on GPU 'gpu0'"),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("has " + std::to_string(options_.gpu_memory_bytes) +
                                   " bytes of memory"),
            std::string::npos)
      << s.error_message();

  spec = stack_->CampaignSpec();
  spec["buffer_bytes"] = 1 << 20;
  spec["chunk_bytes"] = 2 << 20;
  s = CreateNamedCampaign(stub_.get(), spec, "big-chunk");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("chunk_bytes: 2097152 is larger than buffer_bytes (1048576)"),
            std::string::npos)
      << s.error_message();

  // Neither was recorded: the names are free.
  spec = stack_->CampaignSpec();
  s = CreateNamedCampaign(stub_.get(), spec, "too-big");
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(GpusTest, ARunningCampaignHoldsItsBufferAndTheNextWaitsInTheQueue) {
  ASSERT_NO_FATAL_FAILURE(StartStack(""));
  nlohmann::json spec = stack_->CampaignSpec();
  ASSERT_TRUE(CreateNamedCampaign(stub_.get(), spec, "alpha").ok());
  ASSERT_TRUE(CreateNamedCampaign(stub_.get(), spec, "beta").ok());
  v1::Campaign c;
  ASSERT_TRUE(ControlCampaign(stub_.get(), "start", "alpha", &c).ok());
  ASSERT_NO_FATAL_FAILURE(WaitForATrip(stub_.get(), "alpha"));
  ASSERT_TRUE(ControlCampaign(stub_.get(), "start", "beta", &c).ok());
  v1::CampaignGpu g = Gpu0(stub_.get());
  EXPECT_EQ(g.campaign(), "alpha");
  ASSERT_EQ(g.queue_size(), 1);
  EXPECT_EQ(g.queue(0), "beta");
  EXPECT_EQ(g.reach(), v1::GPU_REACHABLE);
  const uint64_t buffer = spec["buffer_bytes"].get<uint64_t>();
  EXPECT_EQ(g.memory_free_bytes(), options_.gpu_memory_bytes - buffer);

  std::string out;
  ASSERT_EQ(RunOperatorCli(*stack_, {"gpus"}, 60, &out), 0) << out;
  EXPECT_NE(out.find("alpha"), std::string::npos) << out;
  EXPECT_NE(out.find("beta"), std::string::npos) << out;
}

TEST_F(GpusTest, AGpuTheOrchestratorCannotReachReadsUnreachableWithTheReason) {
  // The orchestrator looks for its GPU where nothing listens.
  ASSERT_NO_FATAL_FAILURE(
      StartStack("unix:" + TestTmpDir() + "/no-gpu-here.sock"));
  v1::CampaignGpu g = WaitForGpuContact(stub_.get());
  EXPECT_EQ(g.reach(), v1::GPU_UNREACHABLE);
  EXPECT_NE(g.error().find("GPU GetIdentity"), std::string::npos) << g.error();
  EXPECT_FALSE(g.session());
  EXPECT_EQ(g.memory_bytes(), 0u);

  std::string out;
  ASSERT_EQ(RunOperatorCli(*stack_, {"gpus"}, 60, &out), 0) << out;
  EXPECT_NE(out.find("UNREACHABLE"), std::string::npos) << out;
  EXPECT_NE(out.find("gpu0: "), std::string::npos) << out;
}

}  // namespace
}  // namespace gputravel
