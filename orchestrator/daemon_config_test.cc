#include "orchestrator/daemon_config.h"

#include <stdlib.h>

#include <functional>

#include "auth/pki.h"
#include "gtest/gtest.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

class DaemonConfigTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTestDir("gputravel-dcfg-"));
    ASSERT_TRUE(InitCampaignCa(*dir_, "test", 2).ok());
    ASSERT_TRUE(IssueIdentity(*dir_, {kRoleOrchestrator, "orchestrator"}, 1).ok());
    ASSERT_TRUE(IssueIdentity(*dir_, {kRoleOperator, "alice"}, 1).ok());
  }
  static void TearDownTestSuite() {
    (void)system(("rm -rf " + *dir_).c_str());
    delete dir_;
  }

  static nlohmann::json Good() {
    const Identity me{kRoleOrchestrator, "orchestrator"};
    return nlohmann::json{
        {"listen", "unix:/tmp/o.sock"},
        {"domain", "orchestrator"},
        {"state_dir", "/tmp/s"},
        {"mux_endpoint", "unix:/tmp/m.sock"},
        {"gpus", {{{"name", "gpu0"},
                   {"device_endpoint", "unix:/tmp/d.sock"},
                   {"device_ca", "/tmp/ca.pem"},
                   {"serial", "S0"}},
                  {{"name", "gpu1"},
                   {"device_endpoint", "unix:/tmp/d1.sock"},
                   {"device_ca", "/tmp/ca.pem"},
                   {"serial", "S1"},
                   {"heartbeat_period_seconds", 20}}}},
        {"attestation", {{"backend", "dev"}}},
        {"tls", {{"ca", CaCertPath(*dir_)},
                 {"cert", IdentityCertPath(*dir_, me)},
                 {"key", IdentityKeyPath(*dir_, me)}}}};
  }

  static std::string* dir_;
};

std::string* DaemonConfigTest::dir_ = nullptr;

TEST_F(DaemonConfigTest, GoodConfigParses) {
  auto c = ParseOrchestratorConfig(Good(), "o.json");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->gpus.size(), 2u);
  EXPECT_EQ(c->gpus[1].serial, "S1");
  EXPECT_EQ(c->gpus[0].heartbeat_period_seconds, 0u) << "off unless configured";
  EXPECT_EQ(c->gpus[1].heartbeat_period_seconds, 20u);
  EXPECT_EQ(c->mux_name, "mux");
  EXPECT_EQ(c->tls.ca, CaCertPath(*dir_));
  EXPECT_EQ(c->checkpoint_key_file, "/tmp/s/checkpoint.key") << "beside the database by default";
  auto j = Good();
  j["checkpoint_key_file"] = "/secrets/checkpoint.key";
  auto elsewhere = ParseOrchestratorConfig(j, "o.json");
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_EQ(elsewhere->checkpoint_key_file, "/secrets/checkpoint.key");
  EXPECT_EQ(c->trainer_listen, "") << "no trainer service unless configured";
  j["trainer_listen"] = "unix:/run/gputravel/trainer.sock";
  auto trainer = ParseOrchestratorConfig(j, "o.json");
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ(trainer->trainer_listen, "unix:/run/gputravel/trainer.sock");
  EXPECT_EQ(c->metrics_listen, "") << "no metrics unless configured";
  j["metrics_listen"] = "127.0.0.1:9464";
  auto metrics = ParseOrchestratorConfig(j, "o.json");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->metrics_listen, "127.0.0.1:9464");
}

// Only a development configuration may leave a GPU's serial unpinned.
TEST_F(DaemonConfigTest, DevelopmentConfigMayOmitTheSerial) {
  auto j = Good();
  j["gpus"][0].erase("serial");
  j["attestation"]["allow_insecure_dev_attestation"] = true;
  auto c = ParseOrchestratorConfig(j, "o.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->gpus[0].serial, "");
}

struct BadCase {
  std::string name;
  std::function<void(nlohmann::json&)> mutate;
  std::string expected;  // substring of the error
};

TEST_F(DaemonConfigTest, EveryBadFieldIsNamed) {
  const std::vector<BadCase> cases = {
      {"NotObject", [](nlohmann::json& j) { j = nlohmann::json::array(); }, "o.json: must be"},
      {"UnknownField", [](nlohmann::json& j) { j["campaigns"] = 1; }, "o.json: unknown field 'campaigns' (accepted: attestation, checkpoint_key_file, domain, eval_tokens, gpus, listen, metrics_listen, mux_endpoint, mux_name, state_dir, tls, trainer_listen)"},
      {"MissingListen", [](nlohmann::json& j) { j.erase("listen"); }, "listen"},
      {"ListenNotString", [](nlohmann::json& j) { j["listen"] = 5; }, "listen"},
      {"MissingDomain", [](nlohmann::json& j) { j.erase("domain"); }, "domain"},
      {"MissingStateDir", [](nlohmann::json& j) { j.erase("state_dir"); }, "state_dir"},
      {"MissingMux", [](nlohmann::json& j) { j.erase("mux_endpoint"); }, "mux_endpoint"},
      {"MuxNameNotString", [](nlohmann::json& j) { j["mux_name"] = 1; }, "mux_name"},
      {"NoGpus", [](nlohmann::json& j) { j.erase("gpus"); }, "gpus: must be a non-empty array"},
      {"EmptyGpus", [](nlohmann::json& j) { j["gpus"] = nlohmann::json::array(); }, "gpus: must be"},
      {"GpuNotObject", [](nlohmann::json& j) { j["gpus"][0] = 3; }, "gpus[0]: must be an object"},
      {"GpuUnknownField", [](nlohmann::json& j) { j["gpus"][0]["bus"] = "x"; }, "o.json: gpus[0]: unknown field 'bus' (accepted: device_ca, device_endpoint, heartbeat_period_seconds, name, serial)"},
      {"GpuMissingName", [](nlohmann::json& j) { j["gpus"][0].erase("name"); }, "gpus[0]"},
      {"GpuEmptyName", [](nlohmann::json& j) { j["gpus"][0]["name"] = ""; }, "gpus[0].name: must not be empty"},
      {"GpuDuplicate", [](nlohmann::json& j) { j["gpus"][1]["name"] = "gpu0"; }, "gpus[1].name: GPU 'gpu0' appears twice"},
      {"GpuMissingEndpoint", [](nlohmann::json& j) { j["gpus"][0].erase("device_endpoint"); }, "device_endpoint"},
      {"GpuMissingCa", [](nlohmann::json& j) { j["gpus"][1].erase("device_ca"); }, "gpus[1]"},
      {"GpuSerialNotString", [](nlohmann::json& j) { j["gpus"][0]["serial"] = 7; }, "serial"},
      {"GpuSerialMissing", [](nlohmann::json& j) { j["gpus"][0].erase("serial"); },
       "gpus[0].serial: required"},
      {"GpuSerialTwice", [](nlohmann::json& j) { j["gpus"][1]["serial"] = "S0"; },
       "gpus[1].serial: GPU serial 'S0' is pinned by two entries"},
      {"GpuEndpointTwice",
       [](nlohmann::json& j) { j["gpus"][1]["device_endpoint"] = "unix:/tmp/d.sock"; },
       "gpus[1].device_endpoint: 'unix:/tmp/d.sock' is used by two entries"},
      {"HeartbeatTooShort", [](nlohmann::json& j) { j["gpus"][1]["heartbeat_period_seconds"] = 3; },
       "gpus[1].heartbeat_period_seconds: 3 is not 0 (off) or 4..255"},
      {"HeartbeatTooLong", [](nlohmann::json& j) { j["gpus"][1]["heartbeat_period_seconds"] = 256; },
       "256 is not 0"},
      {"HeartbeatNotNumber", [](nlohmann::json& j) { j["gpus"][1]["heartbeat_period_seconds"] = "x"; },
       "heartbeat_period_seconds"},
      {"MetricsListenNotLoopback", [](nlohmann::json& j) { j["metrics_listen"] = "0.0.0.0:9464"; },
       "o.json: metrics_listen: '0.0.0.0:9464' is not \"127.0.0.1:PORT\""},
      {"MetricsListenNotString", [](nlohmann::json& j) { j["metrics_listen"] = 9464; },
       "metrics_listen"},
      {"TrainerListenTcp", [](nlohmann::json& j) { j["trainer_listen"] = "127.0.0.1:7001"; },
       "o.json: trainer_listen: '127.0.0.1:7001' is not \"unix:/absolute/path\""},
      {"TrainerListenRelative", [](nlohmann::json& j) { j["trainer_listen"] = "unix:t.sock"; },
       "trainer_listen: 'unix:t.sock' is not"},
      {"TrainerListenNotString", [](nlohmann::json& j) { j["trainer_listen"] = 1; },
       "trainer_listen"},
      {"NoAttestation", [](nlohmann::json& j) { j.erase("attestation"); }, "attestation: missing object"},
      {"NoTls", [](nlohmann::json& j) { j.erase("tls"); }, "tls: missing object"},
      {"TlsMissingCert", [](nlohmann::json& j) { j["tls"].erase("cert"); }, "tls.cert"},
      {"TlsCertOfAnotherRole",
       [](nlohmann::json& j) {
         j["tls"]["cert"] = IdentityCertPath(*dir_, {kRoleOperator, "alice"});
         j["tls"]["key"] = IdentityKeyPath(*dir_, {kRoleOperator, "alice"});
       },
       "tls.cert: is for operator 'alice'"},
      {"TlsUnreadableKey", [](nlohmann::json& j) { j["tls"]["key"] = "/nonexistent/k.pem"; }, "/nonexistent/k.pem"},
  };
  for (const auto& c : cases) {
    auto j = Good();
    c.mutate(j);
    auto r = ParseOrchestratorConfig(j, "o.json");
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.name << ": " << r.status();
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << c.name << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace gputravel
