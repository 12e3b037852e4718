// The MUX dies in the middle of a campaign, against the real daemons: the
// trip in flight cannot be made safe, so the campaign pauses saying so.
// Once the MUX is back, recovery makes the trip safe; its event names what
// happened (the failure to bring the GPU home, not an orchestrator restart),
// the campaign's error stops saying the trip is unsafe, no message repeats
// a part of itself, and a resume completes the campaign.
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/orchestrator.grpc.pb.h"

namespace gputravel {
namespace {

v1::Campaign Get(EmulatedStack* stack) {
  auto stub = stack->OperatorClient();
  v1::GetCampaignRequest req;
  req.set_name("demo");
  v1::Campaign out;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status s = stub->GetCampaign(&ctx, req, &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return out;
}

// Polls the campaign until `done` holds, or `seconds` pass.
bool WaitFor(EmulatedStack* stack, double seconds,
             const std::function<bool(const v1::Campaign&)>& done, v1::Campaign* last) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    *last = Get(stack);
    if (done(*last)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<v1::Event> AllEvents(EmulatedStack* stack) {
  auto stub = stack->OperatorClient();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::WatchCampaignRequest req;
  req.set_name("demo");
  auto reader = stub->WatchCampaign(&ctx, req);
  std::vector<v1::Event> out;
  v1::Event e;
  while (reader->Read(&e)) {
    if (e.seq() != 0) out.push_back(e);
  }
  (void)reader->Finish();
  return out;
}

// A message says each thing once: no hint twice, and no run of its
// ": "-separated parts repeated right after itself ("X: X").
void ExpectSaidOnce(const std::string& msg) {
  const std::string hint = "(is the daemon running";
  const size_t first = msg.find(hint);
  EXPECT_TRUE(first == std::string::npos || msg.find(hint, first + 1) == std::string::npos)
      << msg;
  const std::vector<std::string> parts = absl::StrSplit(msg, ": ");
  for (size_t len = 1; 2 * len <= parts.size(); ++len) {
    for (size_t i = 0; i + 2 * len <= parts.size(); ++i) {
      bool same = true;
      for (size_t k = 0; k < len && same; ++k) same = parts[i + k] == parts[i + len + k];
      EXPECT_FALSE(same) << "\"" << parts[i] << "\" ... repeated in: " << msg;
    }
  }
}

TEST(MuxFailureTest, RecoveryNamesTheMuxFailureAndTheStaleErrorGoes) {
  StackOptions o;
  o.holders = 2;
  o.dataset_bytes = {2u << 20, 2u << 20};
  o.buffer_bytes = 1u << 20;
  o.chunk_bytes = 256u << 10;
  o.rounds = 3;
  o.trainer = false;
  o.eval_set = false;
  auto started = EmulatedStack::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  EmulatedStack* stack = started->get();
  auto stub = stack->OperatorClient();
  {
    v1::CreateCampaignRequest req;
    req.set_request_id("mux-failure");
    req.set_spec_json(stack->CampaignSpec().dump());
    v1::CreateCampaignResponse created;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->CreateCampaign(&ctx, req, &created).ok());
    v1::CampaignRef ref;
    ref.set_name("demo");
    v1::Campaign c;
    grpc::ClientContext ctx2;
    ASSERT_TRUE(stub->StartCampaign(&ctx2, ref, &c).ok());
  }
  v1::Campaign c;
  ASSERT_TRUE(WaitFor(stack, 120, [](const v1::Campaign& c) { return c.trips_ok() >= 1; }, &c));

  Subprocess* mux = stack->process("mux");
  ASSERT_NE(mux, nullptr);
  mux->Kill();
  ASSERT_TRUE(WaitFor(
      stack, 120,
      [](const v1::Campaign& c) {
        return c.state() == v1::PAUSED && Has(c.error(), "could not be made safe");
      },
      &c))
      << v1::CampaignState_Name(c.state()) << " " << c.error();
  EXPECT_TRUE(Has(c.error(), "MUX Route gpu0")) << c.error();
  ExpectSaidOnce(c.error());

  ASSERT_TRUE(stack->Restart("mux").ok());
  // Recovery makes the trip safe: the error says so instead.
  ASSERT_TRUE(WaitFor(
      stack, 120,
      [](const v1::Campaign& c) { return !Has(c.error(), "could not be made safe"); }, &c))
      << c.error();
  EXPECT_EQ(c.state(), v1::PAUSED);
  EXPECT_TRUE(Has(c.error(), "recovery has since made it safe")) << c.error();
  EXPECT_TRUE(Has(c.error(), "MUX Route gpu0")) << "the reason stays: " << c.error();
  ExpectSaidOnce(c.error());

  int recoveries = 0;
  for (const v1::Event& e : AllEvents(stack)) {
    SCOPED_TRACE("event " + std::to_string(e.seq()));
    ExpectSaidOnce(e.message());
    EXPECT_FALSE(Has(e.message(), "orchestrator restart")) << e.message();
    if (e.kind() == v1::RECOVERY) {
      ++recoveries;
      EXPECT_TRUE(Has(e.message(), "by a failure to bring the GPU back to a safe state (")) << e.message();
    }
  }
  EXPECT_EQ(recoveries, 1);

  // The operator resumes: the campaign completes, every window once.
  {
    v1::CampaignRef ref;
    ref.set_name("demo");
    grpc::ClientContext ctx;
    grpc::Status s = stub->ResumeCampaign(&ctx, ref, &c);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  auto done = stack->WaitForFinal("demo", 300);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), v1::COMPLETED) << done->error();
  EXPECT_EQ(done->error(), "");
  EXPECT_EQ(done->bytes_provisioned(), done->bytes_total());
}

}  // namespace
}  // namespace gputravel
