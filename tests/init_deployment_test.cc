// A deployment run the way an operator runs one, with no hand-written file:
// `gputravel init`, `gputravel config check`, `gputravel up`, then, with the
// environment of DIR/operator.env, `holders check`, `create --start` and
// `watch` until the campaign completes. And a rebuild of the daemons needs
// a restart, not an edited file: the development pins name the binaries.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/deployment.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/operator_cli.h"
#include "util/files.h"
#include "util/subprocess.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

// A directory for the deployment: under TEST_TMPDIR when its Unix sockets
// fit there, else under /tmp (sun_path is 108 bytes).
class DeploymentDir {
 public:
  DeploymentDir() {
    path_ = MakeSocketTestDir("gt-init-");
  }
  ~DeploymentDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The exports of DIR/operator.env, set in this process (the CLI runs
// inherit them), as `. operator.env` sets them in a shell.
void SourceOperatorEnv(const std::string& file) {
  auto text = ReadFile(file);
  ASSERT_TRUE(text.ok()) << text.status();
  int n = 0;
  size_t from = 0;
  while (from < text->size()) {
    size_t nl = text->find('\n', from);
    if (nl == std::string::npos) nl = text->size();
    const std::string line = text->substr(from, nl - from);
    from = nl + 1;
    if (line.rfind("export ", 0) != 0) continue;
    const size_t eq = line.find('=');
    ASSERT_NE(eq, std::string::npos) << line;
    std::string value = line.substr(eq + 1);
    ASSERT_GE(value.size(), 2u);
    ASSERT_EQ(value.front(), '\'') << line;
    ASSERT_EQ(value.back(), '\'') << line;
    ::setenv(line.substr(7, eq - 7).c_str(), value.substr(1, value.size() - 2).c_str(), 1);
    ++n;
  }
  EXPECT_EQ(n, 5);  // endpoint, CA, certificate, key, CRL
}

class InitDeploymentTest : public ::testing::Test {
 protected:
  std::string Log(const std::string& what) { return work_.path() + "/" + what + ".log"; }

  int Cli(const std::vector<std::string>& args, const std::string& what, std::string* out,
          double seconds = 60) {
    return RunCli(args, Log(what), seconds, out);
  }

  // `gputravel up DIR` in the background, until it says every daemon serves.
  void Up(const std::string& dir) {
    auto bin_dir = FindDaemonDir("");
    ASSERT_TRUE(bin_dir.ok()) << bin_dir.status();
    const std::string ready = work_.path() + "/up.ready";
    ::unlink(ready.c_str());
    up_ = std::make_unique<Subprocess>();
    ASSERT_TRUE(up_->Start({*bin_dir + "/cli/gputravel", "up", dir, "--ready_file", ready},
                           Log("up"))
                    .ok());
    absl::Status s = WaitForFile(ready, up_.get(), "gputravel up", 60000);
    ASSERT_TRUE(s.ok()) << s << "\n" << ReadFile(Log("up")).value_or("");
  }

  // SIGTERM: every daemon stops, and `up` exits 0.
  void Down() {
    ASSERT_NE(up_, nullptr);
    const int st = up_->Terminate(30000);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "status " << st << "\n" << ReadFile(Log("up")).value_or("");
    up_.reset();
  }

  // A campaign from `spec` to its end, as an operator drives it.
  void RunCampaign(const std::string& spec, const std::string& name) {
    std::string out;
    ASSERT_EQ(Cli({"create", spec, "--start"}, "create-" + name, &out), 0) << out;
    EXPECT_NE(out.find("Started campaign '" + name + "'"), std::string::npos) << out;
    ASSERT_EQ(Cli({"watch", name, "--no_progress"}, "watch-" + name, &out, 300), 0) << out;
    EXPECT_NE(out.find("Campaign '" + name + "' COMPLETED"), std::string::npos) << out;
    EXPECT_NE(out.find("0 failed"), std::string::npos) << out;
  }

  // The MRTD a holder attested with (`holders check --json`).
  std::string HolderMrtd(const StackHolder& h, const std::string& what) {
    std::string out;
    EXPECT_EQ(Cli({"holders", "check", "--holder_endpoint", h.endpoint, "--name", h.name,
                   "--domain", h.domain, "--dataset", h.dataset, "--json"},
                  what, &out),
              0)
        << out;
    auto j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << out;
    return j.is_discarded() ? "" : j["attestation"].value("mrtd", "");
  }

  void TearDown() override {
    if (up_ != nullptr) up_->Terminate(30000);
  }

  DeploymentDir work_;
  std::unique_ptr<Subprocess> up_;
};

TEST_F(InitDeploymentTest, InitUpHoldersCheckCreateWatchWithNoHandWrittenFile) {
  ASSERT_FALSE(work_.path().empty());
  const std::string dir = work_.path() + "/deploy";
  std::string out;
  ASSERT_EQ(Cli({"init", dir, "--holders", "2"}, "init", &out), 0) << out;
  EXPECT_NE(out.find("gputravel up " + dir), std::string::npos) << out;
  EXPECT_NE(out.find(". " + dir + "/operator.env"), std::string::npos) << out;
  ASSERT_EQ(Cli({"config", "check", dir}, "check", &out), 0) << out;
  EXPECT_NE(out.find(dir + "/orchestrator.json: ok (orchestrator 'orchestrator', attestation "
                           "dev)"),
            std::string::npos)
      << out;

  Up(dir);
  SourceOperatorEnv(dir + "/operator.env");
  auto d = ReadDeployment(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->holders.size(), 2u);
  // The commands init printed, as printed.
  for (const StackHolder& h : d->holders) {
    const std::string line = "gputravel holders check --holder_endpoint " + h.endpoint +
                             " --name " + h.name + " --domain " + h.domain + " --dataset " +
                             h.dataset;
    EXPECT_NE(ReadFile(Log("init")).value_or("").find(line), std::string::npos) << line;
    ASSERT_EQ(Cli({"holders", "check", "--holder_endpoint", h.endpoint, "--name", h.name,
                   "--domain", h.domain, "--dataset", h.dataset},
                  "holders-check-" + h.name, &out),
              0)
        << out;
    EXPECT_NE(out.find("holder " + h.name + " answers in TD " + h.domain), std::string::npos)
        << out;
    EXPECT_NE(out.find("and attests"), std::string::npos) << out;
  }
  RunCampaign(dir + "/campaign.json", "demo");
  Down();
  // Nothing serves any more.
  EXPECT_EQ(Cli({"list", "--timeout", "2"}, "list-after", &out), 5) << out;
}

// A rebuild (new bytes in the holder agent's and the orchestrator's
// binaries) is taken by a restart: no file of the deployment changes, the
// holder attests with its new MRTD, and a campaign completes.
TEST_F(InitDeploymentTest, ARebuiltDaemonNeedsARestartNotAnEditedFile) {
  ASSERT_FALSE(work_.path().empty());
  auto runfiles = FindDaemonDir("");
  ASSERT_TRUE(runfiles.ok()) << runfiles.status();
  // The daemons as an installation holds them, side by side.
  const std::string bin = work_.path() + "/bin";
  ASSERT_EQ(::mkdir(bin.c_str(), 0700), 0);
  for (const char* d : {"device/emulated_gpu_daemon", "vfio_mux/vfio_mux",
                        "holder_agent/holder_agent", "orchestrator/orchestrator"}) {
    const std::string name = std::string(d).substr(std::string(d).find('/') + 1);
    std::error_code ec;
    std::filesystem::copy_file(*runfiles + "/" + d, bin + "/" + name, ec);
    ASSERT_FALSE(ec) << d << ": " << ec.message();
    ASSERT_EQ(::chmod((bin + "/" + name).c_str(), 0755), 0);
  }
  const std::string dir = work_.path() + "/deploy";
  std::string out;
  ASSERT_EQ(Cli({"init", dir, "--holders", "1", "--bin_dir", bin}, "init", &out), 0) << out;
  auto d = ReadDeployment(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[e.path().string()] = ReadFile(e.path().string()).value_or("");
  }
  SourceOperatorEnv(d->operator_env_path());
  Up(dir);
  const std::string before = HolderMrtd(d->holders[0], "mrtd-before");
  RunCampaign(d->campaign_spec_path(), "demo");
  Down();

  // "Rebuild": bytes appended to an ELF file change its hash, not its code.
  for (const char* b : {"holder_agent", "orchestrator"}) {
    auto bytes = ReadFile(bin + "/" + b);
    ASSERT_TRUE(bytes.ok());
    ASSERT_TRUE(WriteFile(bin + "/" + b, *bytes + "rebuilt", 0755).ok());
  }
  for (const auto& [path, bytes] : files) {
    EXPECT_EQ(ReadFile(path).value_or(""), bytes) << path << " changed";
  }
  Up(dir);
  const std::string after = HolderMrtd(d->holders[0], "mrtd-after");
  EXPECT_EQ(before.size(), 96u);
  EXPECT_EQ(after.size(), 96u);
  EXPECT_NE(before, after) << "the holder agent's binary did not change";
  // A second campaign, from a spec of its own (the deployment's files stay
  // as init wrote them).
  nlohmann::json spec = d->campaign_spec;
  spec["name"] = "after-rebuild";
  const std::string again = work_.path() + "/after-rebuild.json";
  ASSERT_TRUE(WriteFile(again, spec.dump(2), 0600).ok());
  RunCampaign(again, "after-rebuild");
  Down();
}

// `up` refuses a TDX template (its daemons run in their TDs, under the
// units) and a directory init did not write.
TEST_F(InitDeploymentTest, UpRefusesATemplateAndAnythingElse) {
  ASSERT_FALSE(work_.path().empty());
  const std::string dir = work_.path() + "/tdx";
  std::string out;
  ASSERT_EQ(Cli({"init", dir, "--tdx"}, "init-tdx", &out), 0) << out;
  EXPECT_NE(out.find("REPLACE-WITH-"), std::string::npos) << out;
  EXPECT_EQ(Cli({"up", dir}, "up-tdx", &out), 1) << out;
  EXPECT_NE(out.find("holds a template for TDX hardware"), std::string::npos) << out;
  // Every placeholder is refused by config check, which names it.
  EXPECT_EQ(Cli({"config", "check", dir}, "check-tdx", &out), 1) << out;
  EXPECT_NE(out.find(dir + "/orchestrator.json: /gpus/0/serial: still the placeholder "
                           "'REPLACE-WITH-GPU-SERIAL'"),
            std::string::npos)
      << out;
  EXPECT_EQ(Cli({"up", work_.path()}, "up-nothing", &out), 1) << out;
  EXPECT_NE(out.find("deployment.json"), std::string::npos) << out;
  EXPECT_EQ(Cli({"init", dir}, "init-again", &out), 1) << out;
  EXPECT_NE(out.find("is not empty"), std::string::npos) << out;
  EXPECT_EQ(Cli({"init"}, "init-usage", &out), 2) << out;
}

}  // namespace
}  // namespace gputravel
