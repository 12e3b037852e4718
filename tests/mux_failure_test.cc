// The MUX dies in the middle of a campaign, against the real daemons: the
// trip in flight cannot be made safe, so the campaign pauses saying so.
// Once the MUX is back, recovery makes the trip safe; its event names what
// happened (the failure to bring the GPU home, not an orchestrator restart),
// the campaign's error stops saying the trip is unsafe, no message repeats
// a part of itself, and a resume completes the campaign.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/stack_campaign.h"

namespace gputravel {
namespace {

bool Has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
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
  absl::Status run = CreateAndStartCampaign(stack, "mux-failure");
  ASSERT_TRUE(run.ok()) << run;
  v1::Campaign c;
  ASSERT_TRUE(WaitForCampaign(stack, "demo", 120, [](const v1::Campaign& c) { return c.trips_ok() >= 1; }, &c));

  Subprocess* mux = stack->process("mux");
  ASSERT_NE(mux, nullptr);
  mux->Kill();
  ASSERT_TRUE(WaitForCampaign(
      stack, "demo", 120,
      [](const v1::Campaign& c) {
        return c.state() == v1::PAUSED && Has(c.error(), "could not be made safe");
      },
      &c))
      << v1::CampaignState_Name(c.state()) << " " << c.error();
  EXPECT_TRUE(Has(c.error(), "MUX Route gpu0")) << c.error();
  ExpectSaidOnce(c.error());

  ASSERT_TRUE(stack->Restart("mux").ok());
  // Recovery makes the trip safe: the error says so instead.
  ASSERT_TRUE(WaitForCampaign(
      stack, "demo", 120,
      [](const v1::Campaign& c) { return !Has(c.error(), "could not be made safe"); }, &c))
      << c.error();
  EXPECT_EQ(c.state(), v1::PAUSED);
  EXPECT_TRUE(Has(c.error(), "recovery has since made it safe")) << c.error();
  EXPECT_TRUE(Has(c.error(), "MUX Route gpu0")) << "the reason stays: " << c.error();
  ExpectSaidOnce(c.error());

  int recoveries = 0;
  // Up to the campaign_state event that replaced the stale error.
  const auto made_safe = [](const v1::Event& e) {
    return e.kind() == v1::CAMPAIGN_STATE && Has(e.message(), "recovery has since made it safe");
  };
  for (const v1::Event& e : RecordedEvents(stack, "demo", made_safe)) {
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
    auto stub = stack->OperatorClient();
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
