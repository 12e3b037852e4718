// `gputravel config check`: a deployment WriteDeployment wrote passes; each
// class of mistake is found, naming the file and the field.
#include "cli/config_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "auth/test_server.h"
#include "cli/deployment.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "util/files.h"

namespace gputravel {
namespace {

using json = nlohmann::json;

class ConfigCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string bin = t_.path() + "/bin";
    ASSERT_EQ(::mkdir(bin.c_str(), 0700), 0);
    for (const char* d : {"emulated_gpu_daemon", "vfio_mux", "holder_agent", "orchestrator"}) {
      ASSERT_TRUE(WriteFile(bin + "/" + d, std::string("#!/bin/false\n") + d, 0755).ok());
    }
    DeploymentOptions o;
    o.holders = 2;
    o.bin_dir = bin;
    o.dataset_bytes = {1u << 16, 1u << 16};
    o.eval_set = false;
    auto d = WriteDeployment(t_.path() + "/deploy", o);
    ASSERT_TRUE(d.ok()) << d.status();
    d_ = *d;
  }

  std::string Config(const std::string& daemon) const { return d_.config_path(daemon); }

  // Applies `edit` to a configuration file.
  void Edit(const std::string& daemon, const std::function<void(json*)>& edit) {
    auto j = ReadJsonFile(Config(daemon));
    ASSERT_TRUE(j.ok()) << j.status();
    edit(&*j);
    ASSERT_TRUE(WriteFile(Config(daemon), j->dump(2), 0600).ok());
  }

  // Every error of checking `files` together.
  std::string Errors(const std::vector<std::string>& files, const std::string& kind = "") {
    std::string out;
    for (const auto& r : CheckConfigs(files, kind)) {
      for (const auto& e : r.errors) out += e + "\n";
    }
    return out;
  }
  std::string ErrorsOfDeployment() { return Errors({d_.dir}); }

  TempDir t_;
  Deployment d_;
};

TEST_F(ConfigCheckTest, AWrittenDeploymentPassesAndEveryFileIsToldApart) {
  auto results = CheckConfigs({d_.dir}, "");
  ASSERT_EQ(results.size(), 7u);  // manifest, 5 daemons, campaign
  std::vector<std::string> kinds;
  for (const auto& r : results) {
    EXPECT_TRUE(r.errors.empty()) << r.file << ": " << r.errors.front();
    kinds.push_back(r.kind);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"deployment", "emulated_gpu", "vfio_mux",
                                             "holder_agent", "holder_agent", "orchestrator",
                                             "campaign"}));
  EXPECT_EQ(results[5].summary, "orchestrator 'orchestrator', attestation dev");
  EXPECT_EQ(results[3].summary, "holder 'holder-a', dataset 65536 bytes, attestation dev");
}

TEST_F(ConfigCheckTest, FieldsUnknownMissingOrWrong) {
  Edit("holder-a", [](json* j) { (*j)["thread"] = 2; });
  Edit("mux", [](json* j) { j->erase("audit_log"); });
  Edit("orchestrator", [](json* j) { (*j)["gpus"][0]["heartbeat_period_seconds"] = 3; });
  Edit("gpu", [](json* j) { (*j)["domains"] = json::array({"a/b"}); });
  const std::string e = ErrorsOfDeployment();
  EXPECT_NE(e.find(Config("holder-a") + ": unknown field 'thread' (did you mean 'threads'?"),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("mux") + ": missing field 'audit_log'"), std::string::npos) << e;
  EXPECT_NE(e.find(Config("orchestrator") + ": gpus[0].heartbeat_period_seconds: 3 is not 0"),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("gpu") + ": every domain must be a plain name"), std::string::npos)
      << e;
}

// What a daemon refuses at start, config check refuses offline: metrics on
// anything but the IPv4 loopback, in the holder's and the MUX's too.
TEST_F(ConfigCheckTest, MetricsListenOnAllInterfacesIsRefusedForEveryDaemon) {
  for (const char* daemon : {"holder-a", "mux", "orchestrator"}) {
    Edit(daemon, [](json* j) { (*j)["metrics_listen"] = "0.0.0.0:9100"; });
  }
  const std::string e = ErrorsOfDeployment();
  for (const char* daemon : {"holder-a", "mux", "orchestrator"}) {
    EXPECT_NE(e.find(Config(daemon) + ": metrics_listen"), std::string::npos)
        << daemon << ":\n" << e;
  }
}

TEST_F(ConfigCheckTest, PlaceholdersLeftInAreEachNamed) {
  Edit("orchestrator", [](json* j) { (*j)["gpus"][0]["serial"] = "REPLACE-WITH-GPU-SERIAL"; });
  const std::string e = ErrorsOfDeployment();
  EXPECT_NE(e.find(Config("orchestrator") +
                   ": /gpus/0/serial: still the placeholder 'REPLACE-WITH-GPU-SERIAL'"),
            std::string::npos)
      << e;
}

TEST_F(ConfigCheckTest, ModesOfTheFileItsKeysAndItsDirectories) {
  ASSERT_EQ(::chmod(Config("mux").c_str(), 0664), 0);
  ASSERT_EQ(::chmod(d_.tls({kRoleHolder, "holder-a"}).key.c_str(), 0644), 0);
  ASSERT_EQ(::chmod(d_.dev_pki().domains.at("td-holder-b").key.c_str(), 0640), 0);
  ASSERT_EQ(::chmod(d_.dev_pki().device_key.c_str(), 0604), 0);
  ASSERT_EQ(::chmod((d_.dir + "/state").c_str(), 0770), 0);
  const std::string e = ErrorsOfDeployment();
  EXPECT_NE(e.find(Config("mux") + ": " + Config("mux") +
                   " may be written by group or others (mode 0664)"),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("holder-a") + ": tls.key"), std::string::npos) << e;
  EXPECT_NE(e.find(Config("holder-b") + ": attestation.dev_key: the key " +
                   d_.dev_pki().domains.at("td-holder-b").key +
                   " may be read by group or others (mode 0640)"),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("gpu") + ": identity_key: the key " + d_.dev_pki().device_key +
                   " may be read by group or others (mode 0604)"),
            std::string::npos) << e;
  // The orchestrator's state directory (and the MUX's, the same here).
  EXPECT_NE(e.find(Config("orchestrator") + ": state_dir"), std::string::npos) << e;
  EXPECT_NE(e.find("may be written by group or others (mode 0770)"), std::string::npos) << e;
}

// The orchestrator refuses to start when the checkpoint key's directory is
// not private (CheckpointSeal::LoadOrCreate, as for state_dir); the check
// says so before it starts, as it does for state_dir and the MUX's files.
TEST_F(ConfigCheckTest, TheCheckpointKeysDirectoryIsCheckedAsTheOrchestratorChecksIt) {
  const std::string keys = t_.path() + "/keys";
  ASSERT_EQ(::mkdir(keys.c_str(), 0700), 0);
  const std::string key = keys + "/checkpoint.key";
  ASSERT_TRUE(WriteFile(key, std::string(32, 'k'), 0600).ok());
  ASSERT_EQ(::chmod(keys.c_str(), 0777), 0);
  Edit("orchestrator", [&](json* j) { (*j)["checkpoint_key_file"] = key; });
  const std::string e = ErrorsOfDeployment();
  EXPECT_NE(e.find(Config("orchestrator") + ": "), std::string::npos)
      << "checkpoint_key_file " << key << " is in a directory anyone may write (mode 0777): "
      << "the orchestrator refuses to start, yet the check found nothing:\n" << e;
  EXPECT_NE(e.find("checkpoint_key_file"), std::string::npos) << e;
  ASSERT_EQ(::chmod(keys.c_str(), 0700), 0);
}

TEST_F(ConfigCheckTest, CertificatesMustChainAndKeysMatch) {
  const DevPki pki = d_.dev_pki();
  // A CA that did not issue the holder's certificate.
  Edit("holder-a", [&](json* j) { (*j)["tls"]["ca"] = pki.attestation_root; });
  // The MUX with the operator's key.
  Edit("mux", [&](json* j) {
    (*j)["tls"]["key"] = d_.tls({kRoleOperator, "operator"}).key;
  });
  // The device with another key than its certificate's.
  Edit("gpu", [&](json* j) { (*j)["identity_key"] = pki.device_ca_key; });
  const std::string e = ErrorsOfDeployment();
  EXPECT_NE(e.find(Config("holder-a") + ": tls"), std::string::npos) << e;
  EXPECT_NE(e.find(Config("mux") + ": tls"), std::string::npos) << e;
  EXPECT_NE(e.find(Config("gpu") + ": identity_key " + pki.device_ca_key +
                   " is not the key of identity_cert " + pki.device_cert),
            std::string::npos) << e;
}

TEST_F(ConfigCheckTest, IdentitiesMustBeTheDaemonsOwn) {
  // Holder a with holder b's certificate and key; the orchestrator with the
  // MUX's; the GPU with another serial than its certificate's.
  Edit("holder-a", [&](json* j) {
    const TlsFiles b = d_.tls({kRoleHolder, "holder-b"});
    (*j)["tls"]["cert"] = b.cert;
    (*j)["tls"]["key"] = b.key;
  });
  Edit("orchestrator", [&](json* j) {
    const TlsFiles m = d_.tls({kRoleMux, "mux"});
    (*j)["tls"]["cert"] = m.cert;
    (*j)["tls"]["key"] = m.key;
  });
  Edit("gpu", [](json* j) { (*j)["serial"] = "EMU-H100-0009"; });
  const std::string e = ErrorsOfDeployment();
  EXPECT_NE(e.find(Config("holder-a") +
                   ": tls.cert is for holder 'holder-b', this agent is holder 'holder-a'"),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("orchestrator") + ": tls.cert: is for mux 'mux'; the orchestrator "
                                            "needs a certificate of role orchestrator"),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("gpu") + ": identity_cert " + d_.dev_pki().device_cert +
                   " is for serial 'EMU-H100-0001', this GPU's serial is 'EMU-H100-0009'"),
            std::string::npos) << e;
}

// A GPU whose serial the orchestrator does not pin would be refused.
TEST_F(ConfigCheckTest, TheOrchestratorPinsTheGpusSerial) {
  Edit("gpu", [](json* j) { (*j)["serial"] = "EMU-H100-0009"; });
  const std::string e = ErrorsOfDeployment();
  EXPECT_NE(e.find(Config("gpu") + ": serial: 'EMU-H100-0009' is not pinned by any "
                                   "gpus[].serial of " + Config("orchestrator")),
            std::string::npos) << e;
}

// What only shows with the files side by side.
TEST_F(ConfigCheckTest, AcrossFilesDomainsCallersNamesAndTheDeviceCa) {
  Edit("mux", [](json* j) {
    (*j)["domains"] = json::array({"orchestrator", "td-holder-a"});
    (*j)["callers"] = json::array({(*j)["callers"][1]});  // the operator's only
  });
  Edit("holder-b", [](json* j) { (*j)["orchestrator_names"] = json::array({"other"}); });
  Edit("orchestrator", [&](json* j) {
    (*j)["gpus"][0]["device_ca"] = d_.dev_pki().attestation_root;
  });
  const std::string campaign = d_.campaign_spec_path();
  auto spec = ReadJsonFile(campaign);
  ASSERT_TRUE(spec.ok());
  (*spec)["holders"][0]["dataset"]["name"] = "something-else";
  ASSERT_TRUE(WriteFile(campaign, spec->dump(2), 0600).ok());
  const std::string e = ErrorsOfDeployment();
  EXPECT_NE(e.find(Config("mux") + ": domains: lacks 'td-holder-b', the domain of " +
                   Config("holder-b")),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("mux") + ": callers: none is " +
                   d_.tls({kRoleOrchestrator, "orchestrator"}).cert),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("holder-b") + ": orchestrator_names: lacks 'orchestrator', the "
                                        "orchestrator of " + Config("orchestrator")),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("gpu") + ": identity_cert " + d_.dev_pki().device_cert +
                   " does not chain to the device CA " + d_.dev_pki().attestation_root),
            std::string::npos) << e;
  EXPECT_NE(e.find(campaign + ": holders[0].dataset.name: 'something-else', but " +
                   Config("holder-a") + " serves 'holder-a-tokens'"),
            std::string::npos) << e;
  // Each file alone passes those: they are about the files together.
  EXPECT_EQ(Errors({Config("mux")}), "");
  EXPECT_EQ(Errors({Config("holder-b")}), "");
}

TEST_F(ConfigCheckTest, AttestationDatasetAndPathsTheDaemonOpens) {
  Edit("orchestrator", [&](json* j) {
    (*j)["attestation"]["dev_peer_binaries"] = json::array({d_.dir + "/no-such-binary"});
  });
  Edit("holder-a", [&](json* j) { (*j)["dataset"]["path"] = d_.dir + "/data/missing.bin"; });
  Edit("holder-b", [&](json* j) { (*j)["bounce_dir"] = d_.dir + "/shm/nowhere"; });
  const std::string e = ErrorsOfDeployment();
  EXPECT_NE(e.find(Config("orchestrator") + ": attestation.dev_peer_binaries[0]: cannot read " +
                   d_.dir + "/no-such-binary"),
            std::string::npos) << e;
  EXPECT_NE(e.find(Config("holder-a") + ": dataset: "), std::string::npos) << e;
  EXPECT_NE(e.find(d_.dir + "/data/missing.bin"), std::string::npos) << e;
  EXPECT_NE(e.find(Config("holder-b") + ": bounce_dir: " + d_.dir +
                   "/shm/nowhere is not an existing directory"),
            std::string::npos) << e;
  // The development backend cannot pass as production: a TDX section with a
  // development field is refused by name.
  Edit("orchestrator", [&](json* j) {
    (*j)["attestation"]["backend"] = "tdx";
  });
  EXPECT_NE(Errors({Config("orchestrator")}).find("a development field (backend \"dev\" only)"),
            std::string::npos);
}

TEST_F(ConfigCheckTest, KindsUnknownAndDirectoriesThatAreNoDeployment) {
  const std::string other = t_.path() + "/other.json";
  ASSERT_TRUE(WriteFile(other, R"({"something": 1})", 0600).ok());
  EXPECT_NE(Errors({other}).find(other + ": cannot tell which daemon's configuration this is "
                                         "(pass --kind orchestrator|holder_agent|vfio_mux|"
                                         "emulated_gpu|campaign|deployment)"),
            std::string::npos);
  // With --kind the daemon's own parser says what is wrong.
  EXPECT_NE(Errors({other}, "holder_agent").find(other + ": unknown field 'something'"),
            std::string::npos) << Errors({other}, "holder_agent");
  EXPECT_NE(Errors({t_.path() + "/bin"}).find(t_.path() + "/bin: a directory is checked as a "
                                                          "deployment `gputravel init` wrote"),
            std::string::npos);
  EXPECT_NE(Errors({t_.path() + "/missing.json"}).find(t_.path() + "/missing.json"),
            std::string::npos);
}

TEST_F(ConfigCheckTest, ExitStatus) {
  auto run = [](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(&a[0]);
    return ConfigCommand(static_cast<int>(argv.size()), argv.data());
  };
  EXPECT_EQ(run({"gputravel", "config", "check", d_.dir}), 0);
  EXPECT_EQ(run({"gputravel", "config", "check", Config("holder-a"), Config("orchestrator")}), 0);
  EXPECT_EQ(run({"gputravel", "config", "check", "--kind", "mux", Config("mux")}), 2);
  EXPECT_EQ(run({"gputravel", "config", "check"}), 2);
  EXPECT_EQ(run({"gputravel", "config", "verify", d_.dir}), 2);
  EXPECT_EQ(run({"gputravel", "config", "check", "--help"}), 0);
  Edit("holder-a", [](json* j) { (*j)["threads"] = 0; });
  EXPECT_EQ(run({"gputravel", "config", "check", d_.dir}), 1);
}

}  // namespace
}  // namespace gputravel
