// P6 end to end: the daemons measure their binary and configuration into
// (development) RTMR3 and pin each other's; a daemon whose configuration the
// host edited is refused by its peers, though it still starts.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/subprocess.h"

namespace gputravel {
namespace {

// Stops `name`, applies `edit` to its configuration file, starts it again.
void EditConfigAndRestart(EmulatedStack* stack, const std::string& name,
                          const std::function<void(nlohmann::json*)>& edit) {
  stack->process(name)->Terminate();
  const std::string path = stack->dir() + "/" + name + ".json";
  auto cfg = ReadJsonFile(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  edit(&*cfg);
  ASSERT_TRUE(WriteFile(path, cfg->dump(2), 0600).ok());
  ASSERT_TRUE(stack->Restart(name).ok());
}

// The host re-points the orchestrator's device CA (here at a copy of the same
// certificate, so everything else would work): every holder refuses its
// evidence, and no trip provisions anything.
TEST(MeasuredConfigurationTest, HoldersRefuseAnOrchestratorWhoseConfigurationChanged) {
  StackOptions o;
  o.holders = 2;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  const std::string copy = (*stack)->dir() + "/pki/device-ca-copy.pem";
  auto ca = ReadFile((*stack)->pki().device_ca_cert);
  ASSERT_TRUE(ca.ok());
  ASSERT_TRUE(WriteFile(copy, *ca, 0644).ok());
  EditConfigAndRestart(stack->get(), "orchestrator", [&](nlohmann::json* c) {
    (*c)["gpus"][0]["device_ca"] = copy;
  });
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->trips_ok(), 0u);
  ASSERT_GT(report->trips_size(), 0);
  for (const auto& t : report->trips()) {
    EXPECT_NE(t.outcome(), "ok") << t.holder();
    EXPECT_EQ(t.bytes(), 0u) << t.holder();
  }
  // The refusal is the holders', and says why.
  const auto logs = (*stack)->logs();
  bool named = false;
  for (const char* h : {"holder-a", "holder-b"}) {
    auto log = ReadFile(logs.at(h));
    ASSERT_TRUE(log.ok());
    named = named || log->find("RTMR3 config event mismatch") != std::string::npos;
  }
  std::string trip_errors;
  for (const auto& t : report->trips()) trip_errors += t.error() + "\n";
  EXPECT_TRUE(named || trip_errors.find("RTMR3 config event mismatch") != std::string::npos)
      << trip_errors;
}

// The host edits one holder's configuration (a field as harmless as its
// thread count): the orchestrator refuses that holder and serves the others.
TEST(MeasuredConfigurationTest, OrchestratorRefusesAHolderWhoseConfigurationChanged) {
  StackOptions o;
  o.holders = 2;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  EditConfigAndRestart(stack->get(), "holder-b", [](nlohmann::json* c) { (*c)["threads"] = 1; });
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  bool a_ok = false, b_refused = false;
  for (const auto& t : report->trips()) {
    if (t.holder() == "holder-a") a_ok = a_ok || t.outcome() == "ok";
    if (t.holder() == "holder-b") {
      EXPECT_NE(t.outcome(), "ok");
      b_refused = b_refused || t.error().find("RTMR3 config event mismatch") != std::string::npos;
    }
  }
  EXPECT_TRUE(a_ok);
  EXPECT_TRUE(b_refused);
  // The same holder restarted with its reviewed configuration is accepted.
  EditConfigAndRestart(stack->get(), "holder-b", [](nlohmann::json* c) { (*c)["threads"] = 2; });
  nlohmann::json spec = (*stack)->CampaignSpec();
  spec["name"] = "again";
  report = (*stack)->RunCampaign(&spec);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  for (const auto& t : report->trips()) EXPECT_EQ(t.outcome(), "ok") << t.holder() << t.error();
}

// With TDX attestation a daemon extends RTMR3 before it serves; on a kernel
// without the interface it exits 2 saying so, and serves nothing.
TEST(MeasuredConfigurationTest, TdxDaemonsRefuseToStartWhenRtmr3CannotBeExtended) {
  StackOptions o;
  o.holders = 1;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto bin_dir = FindDaemonDir("");
  ASSERT_TRUE(bin_dir.ok()) << bin_dir.status();
  const std::string dir = (*stack)->dir() + "/tdx";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string pin(96, 'a');
  const nlohmann::json tdx = {
      {"backend", "tdx"},
      {"tdx",
       {{"measurements_root", dir + "/no-measurements"},
        {"peer_policy",
         {{"mrtd", pin}, {"rtmr0", pin}, {"rtmr1", pin}, {"rtmr2", pin},
          {"min_tee_tcb_svn", std::string(32, '0')}}}}},
      {"peer_rtmr3", {{"binary", pin}, {"config", pin}}}};
  int n = 0;
  for (const char* name : {"holder-a", "orchestrator"}) {
    auto cfg = ReadJsonFile((*stack)->dir() + "/" + name + ".json");
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    const std::string socket = dir + "/" + name + ".sock";
    (*cfg)["listen"] = "unix:" + socket;
    (*cfg)["attestation"] = tdx;
    if (cfg->contains("state_dir")) (*cfg)["state_dir"] = dir + "/state";
    const std::string path = dir + "/" + std::to_string(++n) + ".json";
    const std::string log_path = dir + "/" + std::to_string(n) + ".log";
    ASSERT_TRUE(WriteFile(path, cfg->dump(), 0600).ok());
    const std::string binary = std::string(name) == "orchestrator"
                                   ? "orchestrator/orchestrator"
                                   : "holder_agent/holder_agent";
    Subprocess p;
    ASSERT_TRUE(p.Start({*bin_dir + "/" + binary, "--config=" + path}, log_path).ok());
    for (int i = 0; i < 2000 && p.Running(); ++i) usleep(10000);
    if (p.Running()) p.Terminate(1000);
    const int st = p.exit_status();
    auto log = ReadFile(log_path);
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE(WIFEXITED(st)) << name << ": status " << st << "\n" << *log;
    EXPECT_EQ(WEXITSTATUS(st), 2) << *log;
    EXPECT_NE(log->find(path + ": attestation: cannot measure this daemon into RTMR3, "
                               "refusing to start: reading " + dir +
                        "/no-measurements/rtmr3:sha384"),
              std::string::npos)
        << *log;
    EXPECT_NE(::access(socket.c_str(), F_OK), 0) << name << " served";
  }
}

}  // namespace
}  // namespace gputravel
