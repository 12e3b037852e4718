// Power cut of the MUX's route table (P7, and P5's fencing): a child process
// (this binary again, under tests/power_cut_preload.so) opens a route table,
// with a journal small enough to be compacted on the way, and makes a fixed
// series of decisions; the power is cut at each of its syncs in turn (every
// write not synced is lost: tests/power_cut_image.h). The table reopened on
// what the disk kept must open (no DATA_LOSS), and remember every decision
// that was answered: the GPU's owner and fencing token are those of the last
// answered decision, or of the one in flight when the power went.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/power_cut_image.h"
#include "vfio_mux/route_table.h"
#include "vfio_mux/routing_backend.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

constexpr char kChildEnv[] = "MUX_POWER_CUT_TEST_CHILD";

// Moves nothing: only the table's durable state is under test.
class NullBackend : public RoutingBackend {
 public:
  std::string Name() const override { return "emulated"; }
  absl::StatusOr<std::vector<GpuDevice>> ListGpus() override {
    return std::vector<GpuDevice>{{"gpu0", "", "", ""}};
  }
  absl::Status Move(const std::string&, const std::string&, const std::string&) override {
    return absl::OkStatus();
  }
  absl::Status Reset(const std::string&) override { return absl::OkStatus(); }
};

// The series: decision i (1-based) routes gpu0 to Domain(i) with token i
// (every fourth is a reset with token i, which leaves the owner).
constexpr int kDecisions = 24;
std::string Domain(int i) { return i % 2 == 1 ? "holder-a" : "orch"; }
bool IsReset(int i) { return i % 4 == 0; }

RouteTableOptions Options() {
  RouteTableOptions o;  // sync unset: fdatasync(2), which the preload wraps
  o.domains = {"orch", "holder-a"};
  o.journal_max_bytes = 700;  // compacted a few times during the series
  return o;
}

// Child: makes the decisions, appending each answered one's number to
// `answered` (not tracked: the test's own record, not the MUX's).
[[noreturn]] void RunChild(const std::string& dir) {
  NullBackend backend;
  auto table = RouteTable::Open(&backend, dir + "/mux/state.json", dir + "/mux/audit.log",
                                Options());
  if (!table.ok()) _exit(3);
  int answered = ::open((dir + "/answered").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (answered < 0) _exit(3);
  for (int i = 1; i <= kDecisions; ++i) {
    absl::Status s = IsReset(i) ? (*table)->Reset("gpu0", i)
                                : (*table)->RouteTo("gpu0", Domain(i), i).status();
    if (!s.ok()) _exit(4);
    const std::string line = std::to_string(i) + "\n";
    if (::write(answered, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      _exit(3);
    }
  }
  ::kill(::getpid(), SIGKILL);  // no Close: a crash after the last decision
  _exit(5);
}

const bool kIsChild = [] {
  const char* v = getenv(kChildEnv);
  if (v != nullptr) RunChild(v);
  return false;
}();

// The last answered decision (0: none).
int LastAnswered(const std::string& dir) {
  FILE* f = std::fopen((dir + "/answered").c_str(), "r");
  if (f == nullptr) return 0;
  int last = 0, i = 0;
  while (std::fscanf(f, "%d", &i) == 1) last = i;
  std::fclose(f);
  return last;
}

// The owner after decisions 1..i.
std::string OwnerAfter(int i) {
  for (int j = i; j >= 1; --j) {
    if (!IsReset(j)) return Domain(j);
  }
  return "";
}

class MuxPowerCutTest : public ::testing::Test {
 protected:
  // A fresh directory; runs the child with the power cut at sync `cut_at`
  // (0: never); returns its wait status.
  int Run(long cut_at) {
    dir_ = TestTmpDir() + "/mux-cut-" + std::to_string(cut_at);
    EXPECT_EQ(::system(("rm -rf " + dir_ + " && mkdir -p " + dir_ + "/mux " + dir_ +
                        "/shadow").c_str()),
              0);
    config_.shadow = dir_ + "/shadow";
    config_.prefixes = {dir_ + "/mux/"};
    config_.cut_at = cut_at;
    return power_cut::RunSelfUnderPowerCut(config_, kChildEnv, dir_);
  }

  std::string dir_;
  power_cut::Config config_;
};

TEST_F(MuxPowerCutTest, EveryAnsweredDecisionSurvivesACutAtAnySync) {
  int status = Run(0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
  ASSERT_EQ(LastAnswered(dir_), kDecisions);
  const auto syncs = power_cut::ReadSyncLog(config_.shadow);
  // At least one sync per decision, and the compactions' renames.
  ASSERT_GT(syncs.size(), static_cast<size_t>(kDecisions));
  ASSERT_LE(syncs.size(), 200u);
  int rotated = 0;
  for (const auto& s : syncs) rotated += s.path == dir_ + "/mux";
  EXPECT_GT(rotated, 2) << "the journal was compacted during the series";

  const long total = static_cast<long>(syncs.size());
  for (long cut = 1; cut <= total; ++cut) {
    SCOPED_TRACE("power cut at MUX sync " + std::to_string(cut) + " of " +
                 std::to_string(total));
    status = Run(cut);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
    ASSERT_EQ(power_cut::CutAt(config_.shadow).n, cut);
    std::string error;
    ASSERT_TRUE(power_cut::Restore(config_, &error)) << error;
    const int last = LastAnswered(dir_);
    NullBackend backend;
    auto table = RouteTable::Open(&backend, dir_ + "/mux/state.json", dir_ + "/mux/audit.log",
                                  Options());
    ASSERT_TRUE(table.ok()) << table.status();
    auto route = (*table)->Get("gpu0");
    ASSERT_TRUE(route.ok()) << route.status();
    // The last answered decision is durable; the one in flight may be.
    if (route->fencing_token == static_cast<uint64_t>(last)) {
      EXPECT_EQ(route->domain, OwnerAfter(last));
    } else {
      EXPECT_EQ(route->fencing_token, static_cast<uint64_t>(last) + 1)
          << "answered decision " << last << " was lost";
      EXPECT_EQ(route->domain, OwnerAfter(last + 1));
    }
    // A token below the durable one is refused: fencing held.
    if (last > 0) {
      EXPECT_FALSE((*table)->RouteTo("gpu0", "holder-a", last - 1).ok());
    }
    (void)system(("rm -rf " + dir_).c_str());
  }
}

}  // namespace
}  // namespace gputravel
