// Two instances on one state: a second daemon started on a running one's
// durable state or Unix socket refuses to start (exit 2, naming the path and
// the pid holding it), touches nothing, and the first goes on serving.
#include <string>
#include <vector>

#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "tests/lone_daemon.h"

namespace gputravel {
namespace {

TEST(SingleInstanceTest, SecondDaemonsOnLiveStateAreRefusedAndTheFirstGoOn) {
  StackOptions o;
  o.holders = 1;
  o.dataset_bytes = {1u << 20};
  o.trainer = false;
  o.eval_set = false;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto bin_dir = FindDaemonDir("");
  ASSERT_TRUE(bin_dir.ok()) << bin_dir.status();
  const std::string d = (*stack)->dir();
  const std::string holder = (*stack)->holder_names()[0];

  struct Case {
    std::string daemon, binary, config, expect;
  };
  const std::vector<Case> cases = {
      // The orchestrator's state_dir (its lock comes before any recovery).
      {"orchestrator", "orchestrator/orchestrator", d + "/orchestrator.json",
       d + "/state/orchestrator.lock is locked by pid " +
           std::to_string((*stack)->process("orchestrator")->pid())},
      // The MUX's route table (before any GPU or journal is touched).
      {"mux", "vfio_mux/vfio_mux", d + "/mux.json",
       d + "/state/mux-routes.json.lock is locked by pid " +
           std::to_string((*stack)->process("mux")->pid())},
      // The holder's bounce-ring directory.
      {holder, "holder_agent/holder_agent", d + "/" + holder + ".json",
       "is locked by pid " + std::to_string((*stack)->process(holder)->pid())},
      // The emulated GPU keeps no state: its live sockets are what it refuses
      // to replace.
      {"gpu", "device/emulated_gpu_daemon", d + "/device.json",
       "another daemon is serving " + d + "/dev/"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.daemon);
    LoneDaemonExit second = RunDaemonToExit(DaemonBinary(*bin_dir, c.binary), c.config,
                                            d + "/logs/" + c.daemon + "-second.log");
    EXPECT_EQ(second.exit_code, 2) << second.log;
    EXPECT_NE(second.log.find(c.expect), std::string::npos) << second.log;
    EXPECT_TRUE((*stack)->process(c.daemon)->Running());
  }

  // The first instances still serve, on their sockets: a campaign completes.
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  EXPECT_GT(report->trips_ok(), 0u);
}

}  // namespace
}  // namespace gputravel
