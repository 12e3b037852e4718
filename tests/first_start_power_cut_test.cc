// Power cut at the orchestrator's first start (P7): in an empty state_dir a
// new orchestrator creates its state database (SQLite: WAL mode, then the
// schema and every migration in one transaction) and its checkpoint key,
// then serves. The power is cut at each sync it asks for before it serves
// (a first run counts them; tests/power_cut_image.h says what a cut drops).
// Nothing was promised to anyone yet, so whatever the disk kept must be a
// state it starts from: restarted on it, the orchestrator serves, and a
// campaign then completes with every invariant of tests/crash_fixture.h.
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/crash_fixture.h"
#include "tests/power_cut_daemon.h"
#include "tests/power_cut_image.h"
#include "tests/stack_campaign.h"
#include "util/files.h"

namespace gputravel {
namespace {

constexpr char kOrchestrator[] = "orchestrator";
// Cut runs at most (each one is a campaign).
constexpr size_t kMostCuts = 12;

// One stack whose orchestrator starts for the first time under the power
// cut.
struct FirstStart {
  CrashFixture f;
  power_cut::Config config;
  std::string state_dir;
};

// Names in `dir`.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  ::closedir(d);
  return out;
}

bool Tracked(const power_cut::Config& config, const std::string& path) {
  for (const auto& p : config.prefixes) {
    if (path.compare(0, p.size(), p) == 0) return true;
  }
  return false;
}

// The tracked files now, with their sizes: "name (N B), ...".
std::string Kept(const FirstStart& r) {
  std::string out;
  for (const std::string& name : Entries(r.state_dir)) {
    const std::string path = r.state_dir + "/" + name;
    struct stat st;
    if (!Tracked(r.config, path) || ::stat(path.c_str(), &st) != 0) continue;
    out += (out.empty() ? "" : ", ") + name + " (" + std::to_string(st.st_size) + " B)";
  }
  return out.empty() ? "nothing" : out;
}

// Starts the fixture (trips a, b, keeper), stops its orchestrator, removes
// everything the orchestrator keeps in its state_dir (as before its first
// start), and starts it there under the preload with the power cut at sync
// `cut_at` (0: never). The status of that start: an error when the power
// was cut before it served.
absl::Status StartFirstUnderPowerCut(FirstStart* r, const std::string& name, long cut_at) {
  absl::Status s = StartCrashFixture(&r->f, {}, {1u << 20, 1u << 20});
  if (!s.ok()) return s;
  const Deployment& d = r->f.stack->deployment();
  auto orch = ReadJsonFile(d.config_path(kOrchestrator));
  if (!orch.ok()) return orch.status();
  r->state_dir = orch->value("state_dir", "");
  const std::string key = orch->value("checkpoint_key_file", r->state_dir + "/checkpoint.key");
  auto mux = ReadJsonFile(d.config_path("mux"));
  if (!mux.ok()) return mux.status();
  const std::string mux_state = mux->value("state_file", "");
  s = StopDaemon(&r->f, kOrchestrator);
  if (!s.ok()) return s;
  auto config = PowerCutConfig("first-start-" + name, {r->state_dir + "/orchestrator.", key},
                               cut_at);
  if (!config.ok()) return config.status();
  r->config = *config;
  for (const std::string& entry : Entries(r->state_dir)) {
    const std::string path = r->state_dir + "/" + entry;
    if (Tracked(r->config, path)) {
      if (::unlink(path.c_str()) != 0) return absl::InternalError("cannot remove " + path);
    } else if (mux_state.empty() || path.compare(0, mux_state.size(), mux_state) != 0) {
      // The MUX keeps its route table there too; anything else would be a
      // file of the orchestrator's that the tracking misses.
      return absl::InternalError(path + " is neither the orchestrator's (tracked) nor the MUX's");
    }
  }
  return StartUnderPowerCut(&r->f, kOrchestrator, r->config);
}

// A campaign on the (restarted) orchestrator completes with every invariant.
void RunCampaignAndCheck(FirstStart* r) {
  absl::Status s = CreateAndStartCampaign(r->f.stack.get(), "first-start");
  ASSERT_TRUE(s.ok()) << s;
  auto c = r->f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckCrashInvariants(&r->f, *c, 0);
}

TEST(FirstStartPowerCutTest, AtEverySyncOfAFirstStartTheOrchestratorStartsAndCompletes) {
  std::vector<SyncPoint> points;
  {
    FirstStart count;
    absl::Status s = StartFirstUnderPowerCut(&count, "count", 0);
    ASSERT_TRUE(s.ok()) << s;
    // Serving: every sync so far was the first start's.
    points = LoggedSyncs(count.f, count.config, "first start");
    std::printf("%zu syncs before the orchestrator served; it kept %s\n", points.size(),
                Kept(count).c_str());
    RunCampaignAndCheck(&count);
    StopCrashFixture(&count.f);
  }
  // The schema's commit and the checkpoint key's creation, at least.
  ASSERT_GE(points.size(), 2u);
  const std::vector<SyncPoint> chosen = ChooseSyncPoints(points, kMostCuts);
  for (const SyncPoint& p : chosen) {
    SCOPED_TRACE("power cut at first-start sync " + p.Describe());
    FirstStart r;
    absl::Status s = StartFirstUnderPowerCut(&r, "sync-" + std::to_string(p.n), p.n);
    // Its GPU worker's first commit (the fencing token of the idle GPU's
    // first contact) runs beside the start: the last sync counted may come
    // after it served, and is then cut there. Any earlier one comes first.
    if (s.ok()) {
      ASSERT_EQ(p.n, points.back().n) << "the orchestrator served before its sync " << p.n;
      std::printf("the orchestrator served before its sync %ld (its first commit beside the "
                  "start); cut there\n",
                  p.n);
    }
    RestoreAfterCut(&r.f, kOrchestrator, r.config);
    if (HasFatalFailure()) return;
    ExpectCutAt(r.f, r.config, p);
    const std::string kept = Kept(r);
    s = r.f.stack->Restart(kOrchestrator);
    ASSERT_TRUE(s.ok()) << "nothing was promised before the first start served, yet the "
                        << "orchestrator does not start on what the disk kept (" << kept
                        << "): " << s;
    RunCampaignAndCheck(&r);
    std::printf("first start cut at sync %s: the disk kept %s; restarted and completed\n",
                p.Describe().c_str(), kept.c_str());
    StopCrashFixture(&r.f);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace gputravel
