// What the daemons say, against the real binaries: at --v=3 every daemon
// traces each RPC it serves; a start-up refusal names the path and the
// system's reason (errno) for a state_dir that cannot be created, and a
// holder refuses a bounce_dir that does not exist, before it serves.
#include <string>

#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/lone_daemon.h"
#include "util/files.h"

namespace gputravel {
namespace {

// A copy of `config` with `key` set to `value`, next to it.
std::string Edited(const std::string& config, const std::string& key,
                   const std::string& value) {
  auto j = ReadJsonFile(config);
  EXPECT_TRUE(j.ok()) << j.status();
  (*j)[key] = value;
  const std::string out = config + "." + key + ".json";
  EXPECT_TRUE(WriteFile(out, j->dump(2), 0600).ok());
  return out;
}

class DaemonMessagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StackOptions o;
    o.holders = 1;
    o.dataset_bytes = {1u << 20};
    o.trainer = false;
    o.eval_set = false;
    o.log_level = 3;
    auto stack = EmulatedStack::Start(o);
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::move(*stack);
    auto bin_dir = FindDaemonDir("");
    ASSERT_TRUE(bin_dir.ok()) << bin_dir.status();
    bin_dir_ = *bin_dir;
  }

  std::unique_ptr<EmulatedStack> stack_;
  std::string bin_dir_;
};

TEST_F(DaemonMessagesTest, EveryDaemonTracesEachRpcAtVerbosity3) {
  auto report = stack_->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  const std::string holder = stack_->holder_names()[0];
  // Each daemon's log has the entry and the exit of a call it served.
  const std::vector<std::pair<std::string, std::string>> served = {
      {"orchestrator", "rpc /gputravel.v1.Orchestrator/CreateCampaign"},
      {"mux", "rpc /gputravel.v1.Mux/Route"},
      {holder, "rpc /gputravel.v1.HolderAgent/Provision"},
      {"gpu", "rpc /gputravel.v1."},
  };
  for (const auto& [daemon, call] : served) {
    SCOPED_TRACE(daemon);
    const std::string log = ReadFile(stack_->logs().at(daemon)).value_or("");
    const size_t begins = log.find(call);
    ASSERT_NE(begins, std::string::npos) << log.substr(0, 4000);
    EXPECT_NE(log.find(" begins", begins), std::string::npos);
    EXPECT_NE(log.find(" ends: OK (", begins), std::string::npos);
    EXPECT_NE(log.find("TRACE"), std::string::npos);
  }
}

TEST_F(DaemonMessagesTest, StartupRefusalsNameThePathAndTheReason) {
  const std::string d = stack_->dir();
  // A state_dir whose parent does not exist: the errno is in the message.
  {
    const std::string missing = d + "/no-such-parent/state";
    LoneDaemonExit o = RunDaemonToExit(DaemonBinary(bin_dir_, "orchestrator/orchestrator"),
                                       Edited(d + "/orchestrator.json", "state_dir", missing),
                                       d + "/logs/orchestrator-bad-state.log");
    EXPECT_EQ(o.exit_code, 2) << o.log;
    EXPECT_NE(o.log.find("cannot create state_dir " + missing + ": No such file or directory"),
              std::string::npos)
        << o.log;
  }
  // A holder whose bounce_dir does not exist is refused before it serves.
  {
    const std::string holder = stack_->holder_names()[0];
    const std::string missing = d + "/shm/no-such-domain";
    const std::string config = Edited(d + "/" + holder + ".json", "bounce_dir", missing);
    LoneDaemonExit o = RunDaemonToExit(DaemonBinary(bin_dir_, "holder_agent/holder_agent"),
                                       config, d + "/logs/holder-bad-bounce.log");
    EXPECT_EQ(o.exit_code, 2) << o.log;
    EXPECT_NE(o.log.find(config + ": bounce_dir " + missing + ": No such file or directory"),
              std::string::npos)
        << o.log;
    EXPECT_NE(o.log.find("shared-memory directory"), std::string::npos) << o.log;
  }
  // Both left the running stack alone.
  EXPECT_TRUE(stack_->process("orchestrator")->Running());
  EXPECT_TRUE(stack_->process(stack_->holder_names()[0])->Running());
}

}  // namespace
}  // namespace gputravel
