// P6 end to end: the daemons measure their binary and configuration into
// (development) RTMR3 and pin each other's; a daemon whose configuration the
// host edited is refused by its peers, though it still starts.
#include <sys/stat.h>

#include <string>

#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "util/files.h"

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

}  // namespace
}  // namespace gputravel
