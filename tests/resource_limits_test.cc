// What a caller with a certificate of the campaign can make a daemon spend:
// the real daemons (orchestrator, holder agents, MUX) as processes over
// mTLS, flooded with large requests while their resident memory is read
// from /proc (util/server_limits.h, auth/role_gate.h, */api_limits.h).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "auth/identity.h"
#include "auth/pki.h"
#include "auth/tls_config.h"
#include "cli/emulated_stack.h"
#include "orchestrator/api_limits.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "proto/holder.grpc.pb.h"
#include "proto/mux.grpc.pb.h"
#include "proto/orchestrator.grpc.pb.h"
#include "util/proc_stats.h"
#include "util/subprocess.h"

namespace gputravel {
namespace {

const Identity kOrch{kRoleOrchestrator, "orchestrator"};
const Identity kMux{kRoleMux, "mux"};
const Identity kOperator{kRoleOperator, "operator"};
const Identity kTrainer{kRoleTrainer, "trainer"};
const Identity kHolderA{kRoleHolder, "holder-a"};
const Identity kHolderB{kRoleHolder, "holder-b"};

// The flood of the review: 8 concurrent calls, each with a ~60 MiB field.
constexpr int kFloodCalls = 8;
constexpr size_t kFloodFieldBytes = size_t{60} << 20;
// What the whole flood may add to a daemon's resident memory (the peak,
// VmHWM, against VmRSS before it). Without the limits each call's body was
// buffered and parsed: about 1 GB for the orchestrator.
constexpr int64_t kMaxGrowthKiB = 48 << 10;

// `daemon`'s peak growth in KiB is under `bound_kib`; under ASan, where
// resident memory is ASan's, only printed (the refusals are still checked).
void ExpectGrowthUnder(const std::string& daemon, int64_t growth, int64_t bound_kib) {
  if (kUnderAddressSanitizer) return;
  EXPECT_LT(growth, bound_kib) << daemon << " grew by " << growth << " KiB";
}

class ResourceLimitsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    StackOptions o;
    o.holders = 2;
    o.dataset_bytes = {256u << 10, 256u << 10};
    o.buffer_bytes = 1u << 20;
    o.holder_training_policy["min_window_bytes"] = 4096;  // windows under 1 MiB
    o.chunk_bytes = 256u << 10;
    o.trainer = false;
    auto st = EmulatedStack::Start(o);
    ASSERT_TRUE(st.ok()) << st.status();
    stack_ = st->release();
    auto trainer = IssueIdentity(stack_->tls_dir(), kTrainer, 1);
    ASSERT_TRUE(trainer.ok()) << trainer.status();
  }
  static void TearDownTestSuite() {
    delete stack_;
    stack_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(stack_, nullptr) << "the stack did not start"; }

  static std::shared_ptr<grpc::Channel> As(const Identity& client, const std::string& endpoint,
                                           const Identity& server) {
    auto ch = MakeSecureChannel(endpoint, stack_->tls(client), server);
    EXPECT_TRUE(ch.ok()) << ch.status();
    return ch.ok() ? *ch : nullptr;
  }
  static std::string HolderEndpoint(const std::string& name) {
    return "unix:" + stack_->dir() + "/" + name + ".sock";
  }

  // Runs `call` kFloodCalls times at once, each on its own connection from
  // `make_channel`, and returns the peak growth of `daemon`'s resident
  // memory in KiB; every call's status goes to `codes`.
  static int64_t Flood(const std::string& daemon,
                       const std::function<std::shared_ptr<grpc::Channel>()>& make_channel,
                       const std::function<grpc::Status(std::shared_ptr<grpc::Channel>)>& call,
                       std::vector<grpc::StatusCode>* codes) {
    Subprocess* p = stack_->process(daemon);
    EXPECT_NE(p, nullptr) << daemon;
    if (p == nullptr) return -1;
    const int64_t rss_before = ProcStatusKib(p->pid(), "VmRSS");
    codes->assign(kFloodCalls, grpc::StatusCode::OK);
    std::vector<std::thread> threads;
    for (int i = 0; i < kFloodCalls; ++i) {
      threads.emplace_back([&, i] { (*codes)[i] = call(make_channel()).error_code(); });
    }
    for (auto& t : threads) t.join();
    const int64_t hwm_after = ProcStatusKib(p->pid(), "VmHWM");
    const int64_t rss_after = ProcStatusKib(p->pid(), "VmRSS");
    std::printf("%s: VmRSS before %lld KiB, VmHWM after %lld KiB, VmRSS after %lld KiB\n",
                daemon.c_str(), static_cast<long long>(rss_before),
                static_cast<long long>(hwm_after), static_cast<long long>(rss_after));
    EXPECT_GT(rss_before, 0);
    EXPECT_GT(hwm_after, 0);
    return hwm_after - rss_before;
  }

  static void WithDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  }

  static EmulatedStack* stack_;
};

EmulatedStack* ResourceLimitsTest::stack_ = nullptr;

// The review's flood: a trainer (a role the orchestrator serves nothing to)
// sends eight 60 MiB GetCampaign names at once. The role gate refuses each
// call at its headers, so no body is read.
TEST_F(ResourceLimitsTest, WrongRoleFloodOfTheOrchestratorStaysSmall) {
  std::vector<grpc::StatusCode> codes;
  const int64_t growth = Flood(
      "orchestrator",
      [] { return As(kTrainer, stack_->orchestrator_endpoint(), kOrch); },
      [](std::shared_ptr<grpc::Channel> ch) {
        v1::GetCampaignRequest req;
        req.set_name(std::string(kFloodFieldBytes, 'x'));
        v1::Campaign out;
        grpc::ClientContext ctx;
        WithDeadline(&ctx);
        return v1::Orchestrator::NewStub(ch)->GetCampaign(&ctx, req, &out);
      },
      &codes);
  for (grpc::StatusCode c : codes) EXPECT_EQ(c, grpc::StatusCode::PERMISSION_DENIED);
  ExpectGrowthUnder("the orchestrator", growth, kMaxGrowthKiB);
}

// A holder floods another holder's agent (only the orchestrator may call it).
TEST_F(ResourceLimitsTest, WrongRoleFloodOfAHolderAgentStaysSmall) {
  std::vector<grpc::StatusCode> codes;
  const int64_t growth = Flood(
      "holder-b", [] { return As(kHolderA, HolderEndpoint("holder-b"), kHolderB); },
      [](std::shared_ptr<grpc::Channel> ch) {
        v1::ProvisionRequest req;
        req.set_wrapped_handoff(std::string(kFloodFieldBytes, 'x'));
        grpc::ClientContext ctx;
        WithDeadline(&ctx);
        auto reader = v1::HolderAgent::NewStub(ch)->Provision(&ctx, req);
        v1::ProvisionUpdate u;
        while (reader->Read(&u)) {
        }
        return reader->Finish();
      },
      &codes);
  for (grpc::StatusCode c : codes) EXPECT_EQ(c, grpc::StatusCode::PERMISSION_DENIED);
  ExpectGrowthUnder("holder-b", growth, kMaxGrowthKiB);
}

// A holder floods the MUX (only the orchestrator and operators may call it).
TEST_F(ResourceLimitsTest, WrongRoleFloodOfTheMuxStaysSmall) {
  std::vector<grpc::StatusCode> codes;
  const int64_t growth = Flood(
      "mux", [] { return As(kHolderA, stack_->mux_endpoint(), kMux); },
      [](std::shared_ptr<grpc::Channel> ch) {
        v1::RouteRequest req;
        req.set_gpu(std::string(kFloodFieldBytes, 'x'));
        v1::RouteResponse out;
        grpc::ClientContext ctx;
        WithDeadline(&ctx);
        return v1::Mux::NewStub(ch)->Route(&ctx, req, &out);
      },
      &codes);
  for (grpc::StatusCode c : codes) EXPECT_EQ(c, grpc::StatusCode::PERMISSION_DENIED);
  ExpectGrowthUnder("the MUX", growth, kMaxGrowthKiB);
}

// A caller whose role may call the method is bounded by the API's receive
// limit instead (orchestrator/api_limits.h): its oversized requests are
// refused RESOURCE_EXHAUSTED. gRPC reads a message before it compares its
// size with the limit, so what the flood may buffer meanwhile is bounded by
// the server's ResourceQuota (kOrchestratorQuotaMiB), not by the header.
TEST_F(ResourceLimitsTest, RightRoleFloodIsRefusedByTheReceiveLimit) {
  std::vector<grpc::StatusCode> codes;
  const int64_t growth = Flood(
      "orchestrator",
      [] { return As(kOperator, stack_->orchestrator_endpoint(), kOrch); },
      [](std::shared_ptr<grpc::Channel> ch) {
        v1::GetCampaignRequest req;
        req.set_name(std::string(kFloodFieldBytes, 'x'));
        v1::Campaign out;
        grpc::ClientContext ctx;
        WithDeadline(&ctx);
        return v1::Orchestrator::NewStub(ch)->GetCampaign(&ctx, req, &out);
      },
      &codes);
  for (grpc::StatusCode c : codes) EXPECT_EQ(c, grpc::StatusCode::RESOURCE_EXHAUSTED);
  ExpectGrowthUnder("the orchestrator", growth,
                    (int64_t{kOrchestratorQuotaMiB} << 10) + kMaxGrowthKiB);
}

// Each watch stream holds a server thread: one caller may hold
// kMaxWatchesPerCaller (8) at once; another caller has its own.
TEST_F(ResourceLimitsTest, WatchStreamsAreBoundedPerCaller) {
  auto op = As(kOperator, stack_->orchestrator_endpoint(), kOrch);
  {
    nlohmann::json spec = stack_->CampaignSpec();
    spec["name"] = "watched";
    v1::CreateCampaignRequest req;
    req.set_request_id("watched-1");
    req.set_spec_json(spec.dump());
    v1::CreateCampaignResponse out;
    grpc::ClientContext ctx;
    WithDeadline(&ctx);
    grpc::Status s = v1::Orchestrator::NewStub(op)->CreateCampaign(&ctx, req, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  struct Open {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReader<v1::Event>> reader;
  };
  auto watch = [](std::shared_ptr<grpc::Channel> ch) {
    Open o;
    o.ctx = std::make_unique<grpc::ClientContext>();
    WithDeadline(o.ctx.get());
    v1::WatchCampaignRequest req;
    req.set_name("watched");
    o.reader = v1::Orchestrator::NewStub(ch)->WatchCampaign(o.ctx.get(), req);
    return o;
  };
  std::vector<Open> open;
  for (int i = 0; i < 8; ++i) open.push_back(watch(op));
  // Each stream has been accepted once its first event (campaign created)
  // arrives.
  for (auto& o : open) {
    v1::Event ev;
    ASSERT_TRUE(o.reader->Read(&ev));
  }
  Open ninth = watch(op);
  v1::Event ev;
  EXPECT_FALSE(ninth.reader->Read(&ev));
  grpc::Status s = ninth.reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("operator 'operator' already has 8 campaign watches open"),
            std::string::npos)
      << s.error_message();
  for (auto& o : open) o.ctx->TryCancel();
  for (auto& o : open) (void)o.reader->Finish();
  // A stream that ended gives its place back once the server notices the
  // cancel: until then a new watch is refused as the ninth was (30 s at most).
  bool accepted = false;
  for (int i = 0; i < 300 && !accepted; ++i) {
    Open again = watch(op);
    accepted = again.reader->Read(&ev);
    if (accepted) again.ctx->TryCancel();
    grpc::Status end = again.reader->Finish();
    if (!accepted) {
      ASSERT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << end.error_message();
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  EXPECT_TRUE(accepted) << "the ended streams never gave their places back";
}

}  // namespace
}  // namespace gputravel
