// A TDX daemon refuses to start with LD_PRELOAD set (docs/tdx-attestation.md),
// also when the preloaded library, whose constructor runs before main,
// removed its own variable from what getenv() sees: the check also reads the
// environment the process was started with (/proc/self/environ).
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "keyxfer/attestation_config.h"
#include "keyxfer/example_sections.h"
#include "keyxfer/runtime_measurement.h"
#include "keyxfer/tdx/fake_rtmr_fs.h"
#include "util/files.h"

extern char** environ;

namespace gputravel {
namespace {

constexpr char kChildEnv[] = "GT_ATTESTATION_ENV_CHILD";
constexpr int kChildStarted = 0;  // the TDX backend was set up
constexpr int kChildRefused = 3;  // refused, naming LD_PRELOAD
constexpr int kChildOther = 4;    // anything else (a broken test)

// The holder's example TDX section with its placeholders filled, as
// attestation_config_test sets it up.
nlohmann::json HolderTdxSection() {
  auto j = ReadJsonFile("deploy/examples/holder-tdx.json");
  if (!j.ok()) return nlohmann::json();
  return WithPlaceholdersFilled((*j)["attestation"]);
}

// What a TDX holder agent does at start, in a process of its own: exits
// kChildStarted if the backend is set up, kChildRefused if it is refused
// for its environment.
int StartTdxBackend() {
  const nlohmann::json section = HolderTdxSection();
  if (section.is_null()) return kChildOther;
  RuntimeMeasurement m;
  for (int i = 0; i < kRtmr3EventCount; ++i) m.events[i] = std::string(48, 'm' + i);
  m.rtmr3 = ReplayRtmr(m.EventList());
  if (section["tdx"].contains("root_ca") && section["tdx"]["root_ca"].is_string()) {
    auto root = ReadFile(section["tdx"]["root_ca"].get<std::string>());
    if (root.ok()) m.trusted_files["/attestation/tdx/root_ca"] = *root;
  }
  auto st = MakeAttestationFromConfig(
      section, "h.json: attestation", "d", m,
      std::make_shared<tdx::testing::FakeTdxMeasurements>(
          "/sys/class/misc/tdx_guest/measurements"));
  if (st.ok()) return kChildStarted;
  if (st.status().code() == absl::StatusCode::kFailedPrecondition &&
      st.status().message().find("LD_PRELOAD") != std::string::npos) {
    return kChildRefused;
  }
  return kChildOther;
}

// The child's side: runs only in the process RunUnderPreload starts.
TEST(AttestationEnvironmentTest, ChildStartsTdxBackend) {
  if (::getenv(kChildEnv) == nullptr) GTEST_SKIP() << "the child of RunUnderPreload only";
  ::_exit(StartTdxBackend());
}

// This test binary again, under keyxfer/self_hiding_preload.so (hiding
// itself when `hide`): the child's exit code.
int RunUnderPreload(bool hide) {
  const char* srcdir = ::getenv("TEST_SRCDIR");
  const std::string preload =
      std::string(srcdir ? srcdir : ".") + "/gputravel/keyxfer/self_hiding_preload.so";
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string v = *e;
    // Only what this test sets of the variables the check refuses.
    if (v.rfind("LD_", 0) == 0 || v.rfind("OPENSSL_", 0) == 0 ||
        v.rfind("GPUTRAVEL_FAILPOINT=", 0) == 0) {
      continue;
    }
    env.push_back(v);
  }
  env.push_back("LD_PRELOAD=" + preload);
  env.push_back(std::string(kChildEnv) + "=1");
  if (hide) env.push_back("GT_PRELOAD_HIDE=1");
  std::vector<char*> envp;
  for (std::string& v : env) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  std::string filter = "--gtest_filter=AttestationEnvironmentTest.ChildStartsTdxBackend";
  char* argv[] = {self.data(), filter.data(), nullptr};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execve("/proc/self/exe", argv, envp.data());
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Control: a preload that leaves LD_PRELOAD in place is refused (holds).
TEST(AttestationEnvironmentTest, TdxRefusesAVisiblePreload) {
  EXPECT_EQ(RunUnderPreload(/*hide=*/false), kChildRefused);
}

// RED: the same library, unsetting LD_PRELOAD in its constructor (before
// main), runs inside a TDX daemon that then starts as if the environment
// were clean. An in-process check of getenv() cannot see code that ran
// before it; what could: the kernel's record of the initial environment
// (/proc/self/environ, which unsetenv does not change) or the loaded
// objects, though code already running in the process can tamper with
// either; only an integrity-protected root file system (the unit file that
// sets the environment) really closes it.
TEST(AttestationEnvironmentTest, TdxRefusesAPreloadThatUnsetsItsOwnVariable) {
  EXPECT_EQ(RunUnderPreload(/*hide=*/true), kChildRefused)
      << "a TDX backend was set up in a process whose LD_PRELOAD library hid itself";
}

}  // namespace
}  // namespace gputravel
