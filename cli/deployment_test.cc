// What WriteDeployment (`gputravel init`) writes: every file and its mode,
// the development pins that survive a rebuild, the --tdx template's
// placeholders, and what it refuses. Nothing is started here
// (tests/init_deployment_test starts a deployment).
#include "cli/deployment.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "auth/test_server.h"
#include "cli/systemd_units.h"
#include "gtest/gtest.h"
#include "util/files.h"

namespace gputravel {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// Stand-ins for the four daemons (only their bytes are read here).
std::string FakeDaemons(const std::string& dir) {
  const std::string bin = dir + "/bin";
  EXPECT_EQ(::mkdir(bin.c_str(), 0700), 0);
  for (const char* d : {"emulated_gpu_daemon", "vfio_mux", "holder_agent", "orchestrator"}) {
    EXPECT_TRUE(WriteFile(bin + "/" + d, std::string("#!/bin/false\n") + d + "\n", 0755).ok());
  }
  return bin;
}

DeploymentOptions Options(const std::string& bin, int holders = 2) {
  DeploymentOptions o;
  o.holders = holders;
  o.bin_dir = bin;
  o.dataset_bytes = std::vector<uint64_t>(holders, 1u << 16);
  o.eval_set = false;
  return o;
}

// Every file and directory under `dir`, relative, with its mode.
std::map<std::string, mode_t> Tree(const std::string& dir) {
  std::map<std::string, mode_t> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    out[e.path().string().substr(dir.size() + 1)] = ModeOf(e.path().string());
  }
  return out;
}

TEST(DeploymentTest, WritesEveryFileWithItsMode) {
  TempDir t;
  const std::string dir = t.path() + "/deploy";
  auto d = WriteDeployment(dir, Options(FakeDaemons(t.path())));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(ModeOf(dir), 0700u);
  const auto tree = Tree(dir);
  // The daemons' configurations and the deployment's own files.
  for (const char* f : {"deployment.json", "campaign.json", "operator.env", "device.json",
                        "mux.json", "holder-a.json", "holder-b.json", "orchestrator.json",
                        "data/holder-a.bin", "data/holder-b.bin"}) {
    ASSERT_EQ(tree.count(f), 1u) << f;
    EXPECT_EQ(tree.at(f), 0600u) << f;
  }
  // Every key 0600, every certificate 0644, every directory 0700.
  size_t keys = 0;
  for (const auto& [path, mode] : tree) {
    if (std::filesystem::is_directory(dir + "/" + path)) {
      EXPECT_EQ(mode, 0700u) << path;
    } else if (path.size() > 4 && (path.substr(path.size() - 4) == ".key" ||
                                   path.find("key.pem") != std::string::npos)) {
      EXPECT_EQ(mode, 0600u) << path;
      ++keys;
    } else if (path.substr(path.size() - 4) == ".pem") {
      EXPECT_EQ(mode, 0644u) << path;
    }
  }
  // Campaign CA, orchestrator, MUX, operator, scheduler, 2 holders; device
  // CA, device, 3 attestation keys.
  EXPECT_EQ(keys, 7u + 5u);
  for (const char* sub : {"pki", "pki/tls", "data", "dev", "logs", "run", "state",
                          "shm/td-holder-a", "shm/td-holder-b"}) {
    EXPECT_EQ(tree.count(sub), 1u) << sub;
  }
  // The manifest lists the daemons in start order, each with its file.
  ASSERT_EQ(d->daemons.size(), 5u);
  const std::vector<std::string> order = {"gpu", "mux", "holder-a", "holder-b", "orchestrator"};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(d->daemons[i].name, order[i]);
    EXPECT_EQ(d->daemons[i].config, d->config_path(order[i]));
  }
  auto read = ReadDeployment(d->dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->orchestrator_endpoint, "unix:" + d->dir + "/orchestrator.sock");
  EXPECT_EQ(read->holders.size(), 2u);
  EXPECT_EQ(read->campaign_spec, d->campaign_spec);
  auto env = ReadFile(d->operator_env_path());
  ASSERT_TRUE(env.ok());
  EXPECT_NE(env->find("export GPUTRAVEL_ENDPOINT='unix:" + d->dir + "/orchestrator.sock'"),
            std::string::npos)
      << *env;
  EXPECT_NE(env->find("export GPUTRAVEL_KEY='" + d->dir + "/pki/tls/operator-operator.key'"),
            std::string::npos)
      << *env;
}

// The development pins name the peers' binaries, not their hashes: a
// rebuilt daemon needs no edited configuration. Every RTMR3 config pin is
// written, and the orchestrator's pins of the holders are its own event.
TEST(DeploymentTest, DevelopmentPinsNameBinariesAndPinEachOthersConfiguration) {
  TempDir t;
  const std::string bin = FakeDaemons(t.path());
  auto d = WriteDeployment(t.path() + "/deploy", Options(bin));
  ASSERT_TRUE(d.ok()) << d.status();
  auto orch = ReadJsonFile(d->config_path("orchestrator"));
  auto holder = ReadJsonFile(d->config_path("holder-a"));
  ASSERT_TRUE(orch.ok() && holder.ok());
  const auto& oa = (*orch)["attestation"];
  const auto& ha = (*holder)["attestation"];
  EXPECT_EQ(oa["backend"], "dev");
  EXPECT_EQ(oa["allow_insecure_dev_attestation"], true);
  EXPECT_EQ(oa["dev_peer_binaries"], nlohmann::json::array({bin + "/holder_agent"}));
  EXPECT_EQ(ha["dev_peer_binaries"], nlohmann::json::array({bin + "/orchestrator"}));
  EXPECT_FALSE(oa.contains("peer_mrtd"));
  EXPECT_FALSE(ha.contains("peer_mrtd"));
  EXPECT_EQ(oa["peer_rtmr3"]["config"].size(), 2u);
  EXPECT_FALSE(oa["peer_rtmr3"].contains("binary"));
  EXPECT_EQ(ha["peer_rtmr3"]["config"].get<std::string>().size(), 96u);
  EXPECT_EQ(ha["peer_rtmr3"]["peer_pins"].get<std::string>().size(), 96u);
  // A "rebuild" (new bytes in every binary) leaves every file as it was.
  std::map<std::string, std::string> before;
  for (const auto& dm : d->daemons) before[dm.config] = *ReadFile(dm.config);
  for (const char* b : {"holder_agent", "orchestrator"}) {
    ASSERT_TRUE(WriteFile(bin + "/" + b, "#!/bin/false\nrebuilt\n", 0755).ok());
  }
  for (const auto& dm : d->daemons) EXPECT_EQ(*ReadFile(dm.config), before[dm.config]);
}

TEST(DeploymentTest, TdxTemplateMarksEveryOperatorValueAndHoldsNoDevelopmentKey) {
  TempDir t;
  DeploymentOptions o;
  o.holders = 2;
  o.tdx = true;
  auto d = WriteDeployment(t.path() + "/tdx", o);
  ASSERT_TRUE(d.ok()) << d.status();
  const auto tree = Tree(d->dir);
  // The same layout, less what only an emulated deployment has.
  for (const char* f : {"deployment.json", "campaign.json", "operator.env", "mux.json",
                        "holder-a.json", "holder-b.json", "orchestrator.json",
                        "pki/tls/ca.pem", "pki/tls/ca.key", "pki/tls/mux-mux.key",
                        "pki/tls/operator-operator.key", "pki/tls/scheduler-scheduler.key"}) {
    EXPECT_EQ(tree.count(f), 1u) << f;
  }
  for (const char* absent : {"device.json", "data", "pki/device-key.pem",
                             "pki/attestation-root.pem",
                             "pki/tls/orchestrator-orchestrator.key",
                             "pki/tls/holder-holder-a.key"}) {
    EXPECT_EQ(tree.count(absent), 0u) << absent << ": made inside its TD, or development only";
  }
  // Every value only the operator knows is marked; nothing development.
  auto orch = ReadFile(d->config_path("orchestrator"));
  auto holder = ReadFile(d->config_path("holder-a"));
  auto mux = ReadFile(d->config_path("mux"));
  ASSERT_TRUE(orch.ok() && holder.ok() && mux.ok());
  for (const std::string marked :
       {"\"serial\": \"REPLACE-WITH-GPU-SERIAL\"", "REPLACE-WITH-NVIDIA-DEVICE-CA.pem",
        "REPLACE-WITH-96-HEX-DIGITS-OF-THE-HOLDER-TD-IMAGE-MRTD",
        "REPLACE-WITH-96-HEX-DIGITS-OF-THE-HOLDER-CONFIG-EVENT",
        "\"mux_endpoint\": \"REPLACE-WITH-HOST-ADDRESS:7100\""}) {
    EXPECT_NE(orch->find(marked), std::string::npos) << marked << "\n" << *orch;
  }
  for (const std::string marked : {"REPLACE-WITH-PATH-OF-HOLDER-A-DATASET-FILE",
                                    "REPLACE-WITH-96-HEX-DIGITS-OF-THE-ORCHESTRATOR-PEER-PINS-EVENT",
                                    "REPLACE-WITH-GPU-ENDPOINT-IN-HOLDER-A-TD"}) {
    EXPECT_NE(holder->find(marked), std::string::npos) << marked << "\n" << *holder;
  }
  EXPECT_NE(mux->find("\"bdf\": \"REPLACE-WITH-GPU-PCI-ADDRESS"), std::string::npos) << *mux;
  for (const std::string* text : {&*orch, &*holder, &*mux}) {
    EXPECT_EQ(text->find("\"backend\": \"dev\""), std::string::npos) << *text;
    EXPECT_EQ(text->find("dev_key"), std::string::npos) << *text;
    EXPECT_EQ(text->find("dev_peer_binaries"), std::string::npos) << *text;
    EXPECT_EQ(text->find("allow_insecure"), std::string::npos) << *text;
    EXPECT_NE(text->find("/etc/gputravel/pki/"), std::string::npos);  // the units' paths
  }
  // Each holder's TD gets its bounce ring's directory at boot.
  auto tmpfiles = ReadFile(d->dir + "/holder-a.tmpfiles.conf");
  ASSERT_TRUE(tmpfiles.ok()) << tmpfiles.status();
  EXPECT_NE(tmpfiles->find("\nd /run/gputravel/shm/holder-a 0700 gputravel gputravel -\n"),
            std::string::npos)
      << *tmpfiles;
  EXPECT_NE(holder->find("\"bounce_dir\": \"/run/gputravel/shm/holder-a\""), std::string::npos);
  // The manifest says where each file is installed; `up` refuses it.
  EXPECT_EQ(d->daemons.back().config, "/etc/gputravel/orchestrator.json");
  EXPECT_EQ(d->daemons[1].config, "/etc/gputravel/holder-holder-a.json");
  auto read = ReadDeployment(d->dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->tdx);
}

TEST(DeploymentTest, RefusesADirectoryInUseAndATooLongOneAndLeavesNothingHalfWritten) {
  TempDir t;
  const std::string bin = FakeDaemons(t.path());
  // Not empty: nothing is written over another deployment or anything else.
  const std::string used = t.path() + "/used";
  ASSERT_EQ(::mkdir(used.c_str(), 0700), 0);
  ASSERT_TRUE(WriteFile(used + "/keep.txt", "mine", 0600).ok());
  auto d = WriteDeployment(used, Options(bin));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kAlreadyExists) << d.status();
  EXPECT_NE(d.status().message().find(used + " is not empty"), std::string::npos) << d.status();
  EXPECT_EQ(*ReadFile(used + "/keep.txt"), "mine");
  // Unix socket paths are limited: a directory too long for them is refused,
  // naming the socket, and what was made of it is gone.
  const std::string longer = t.path() + "/" + std::string(80, 'x');
  d = WriteDeployment(longer, Options(bin));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
  EXPECT_NE(d.status().message().find("too long for its Unix sockets"), std::string::npos)
      << d.status();
  EXPECT_NE(::access(longer.c_str(), F_OK), 0);
  // Daemons that are not there.
  DeploymentOptions o = Options(t.path() + "/nowhere");
  d = WriteDeployment(t.path() + "/fresh", o);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound) << d.status();
  EXPECT_NE(::access((t.path() + "/fresh").c_str(), F_OK), 0);
  // An existing empty directory is used, and made 0700.
  const std::string empty = t.path() + "/empty";
  ASSERT_EQ(::mkdir(empty.c_str(), 0755), 0);
  d = WriteDeployment(empty, Options(bin, 1));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(ModeOf(empty), 0700u);
}

// The TDX template carries the units whose paths its configurations use,
// byte for byte as deploy/systemd has them (an emulated deployment runs with
// `gputravel up` instead: its files are in DIR, not where the units look).
TEST(DeploymentTest, TdxTemplateCarriesEveryUnitOfDeploySystemd) {
  TempDir t;
  DeploymentOptions o;
  o.holders = 1;
  o.tdx = true;
  auto d = WriteDeployment(t.path() + "/tdx", o);
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string source = std::string(getenv("TEST_SRCDIR")) + "/gputravel/deploy/systemd";
  int units = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(source)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = e.path().string().substr(source.size() + 1);
    auto want = ReadFile(e.path().string());
    auto got = ReadFile(d->dir + "/systemd/" + rel);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << rel << ": " << got.status();
    EXPECT_EQ(*got, *want) << rel;
    EXPECT_EQ(ModeOf(d->dir + "/systemd/" + rel), 0644u) << rel;
    ++units;
  }
  EXPECT_EQ(units, static_cast<int>(SystemdUnits().size()));
  EXPECT_GE(units, 9);
  // The emulated deployment has none.
  TempDir t2;
  const std::string bin = FakeDaemons(t2.path());
  auto e = WriteDeployment(t2.path() + "/emu", Options(bin, 1));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_NE(::access((e->dir + "/systemd").c_str(), F_OK), 0);
}

// ATTACK (another local user): an existing empty directory others may write
// would let them put a directory (pki/, say) in the deployment between
// init's check and its writes; a symbolic link with a trailing slash would
// be followed. Both are refused, and nothing is written or changed.
TEST(DeploymentTest, RefusesAnExistingDirectoryOthersMayWriteAndASymbolicLinkWithASlash) {
  TempDir t;
  const std::string bin = FakeDaemons(t.path());
  const std::string shared = t.path() + "/shared";
  ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  auto d = WriteDeployment(shared, Options(bin));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kPermissionDenied) << d.status();
  EXPECT_NE(d.status().message().find(shared + " has mode 0777: others may write it"),
            std::string::npos)
      << d.status();
  EXPECT_EQ(ModeOf(shared), 0777u);
  EXPECT_TRUE(std::filesystem::is_empty(shared));

  const std::string target = t.path() + "/target";
  ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
  const std::string link = t.path() + "/link";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  for (const std::string& given : {link, link + "/", link + "//"}) {
    d = WriteDeployment(given, Options(bin));
    EXPECT_EQ(d.status().code(), absl::StatusCode::kAlreadyExists) << given << ": " << d.status();
    EXPECT_NE(d.status().message().find("a symbolic link is not followed"), std::string::npos)
        << d.status();
  }
  EXPECT_TRUE(std::filesystem::is_empty(target));
}

}  // namespace
}  // namespace gputravel
