#include "tests/power_cut_daemon.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "gtest/gtest.h"
#include "util/test_dir.h"

namespace gputravel {

absl::Status StopDaemon(CrashFixture* f, const std::string& daemon) {
  Subprocess* p = f->stack->process(daemon);
  if (p == nullptr) return absl::NotFoundError("no daemon named " + daemon);
  p->Terminate();
  if (!WaitForExit(p, 30)) return absl::InternalError(daemon + " did not stop on SIGTERM");
  return absl::OkStatus();
}

absl::StatusOr<power_cut::Config> PowerCutConfig(const std::string& name,
                                                 std::vector<std::string> prefixes,
                                                 long cut_at) {
  power_cut::Config c;
  c.shadow = TestTmpDir() + "/power-cut-" + name;
  (void)system(("rm -rf '" + c.shadow + "'").c_str());
  if (::mkdir(c.shadow.c_str(), 0700) != 0) {
    return absl::InternalError("cannot create " + c.shadow);
  }
  c.prefixes = std::move(prefixes);
  c.cut_at = cut_at;
  return c;
}

absl::Status StartUnderPowerCut(CrashFixture* f, const std::string& daemon,
                                const power_cut::Config& config,
                                const std::map<std::string, std::string>& env) {
  // The daemon inherits the environment when it starts: only this start
  // carries the preload.
  setenv("LD_PRELOAD", power_cut::PreloadLibrary().c_str(), 1);
  setenv(power_cut::kEnv, power_cut::FormatConfig(config).c_str(), 1);
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  absl::Status s = f->stack->Restart(daemon);
  unsetenv("LD_PRELOAD");
  unsetenv(power_cut::kEnv);
  for (const auto& [name, value] : env) unsetenv(name.c_str());
  return s;
}

absl::Status RestartUnderPowerCut(CrashFixture* f, const std::string& daemon,
                                  const std::string& name, std::vector<std::string> prefixes,
                                  long cut_at, const std::string& failpoint,
                                  power_cut::Config* config) {
  absl::Status s = StopDaemon(f, daemon);
  if (!s.ok()) return s;
  auto c = PowerCutConfig(name, std::move(prefixes), cut_at);
  if (!c.ok()) return c.status();
  *config = *c;
  std::map<std::string, std::string> env;
  if (!failpoint.empty()) env["GPUTRAVEL_FAILPOINT"] = failpoint;
  return StartUnderPowerCut(f, daemon, *config, env);
}

void RestoreAfterCut(CrashFixture* f, const std::string& daemon,
                     const power_cut::Config& config, double seconds) {
  Subprocess* p = f->stack->process(daemon);
  ASSERT_NE(p, nullptr) << daemon;
  ASSERT_TRUE(WaitForExit(p, seconds)) << "the power of " << daemon << " was never cut";
  ASSERT_TRUE(WIFSIGNALED(p->exit_status())) << daemon << " exited " << p->exit_status();
  EXPECT_EQ(WTERMSIG(p->exit_status()), SIGKILL);
  std::string error;
  ASSERT_TRUE(power_cut::Restore(config, &error)) << error;
}

std::string InStack(const std::string& path, const CrashFixture& f) {
  const std::string& dir = f.stack->dir();
  return path.compare(0, dir.size(), dir) == 0 ? path.substr(dir.size()) : path;
}

std::string SyncPoint::Describe() const {
  return std::to_string(n) + " (after " + after + ", " + path + ")";
}

std::vector<SyncPoint> LoggedSyncs(const CrashFixture& f, const power_cut::Config& config,
                                   const std::string& after) {
  std::vector<SyncPoint> out;
  for (const auto& s : power_cut::ReadSyncLog(config.shadow)) {
    out.push_back({s.n, after, InStack(s.path, f)});
  }
  return out;
}

std::vector<SyncPoint> HolderTripSyncs(const CrashFixture& f, const power_cut::Config& config,
                                       const std::string& daemon, const std::string& holder,
                                       size_t trips) {
  // The holder's trips: each one's start, the next trip's start (0: none),
  // and its steps by time.
  struct Span {
    uint64_t trip = 0;
    int64_t from = 0, to = 0;
    std::map<int64_t, std::string> steps;
  };
  std::vector<Span> spans;
  for (const auto& e : AllEvents(f.stack.get())) {
    if (e.kind() == v1::TRIP_STARTED) {
      if (!spans.empty() && spans.back().to == 0) spans.back().to = e.time_unix_ms();
      if (e.holder() == holder && spans.size() < trips) {
        spans.push_back({e.trip(), e.time_unix_ms(), 0, {}});
      }
    }
    for (Span& s : spans) {
      if (e.trip() == s.trip && e.kind() == v1::STEP) {
        s.steps[e.time_unix_ms()] = v1::TripStep_Name(e.step());
      }
    }
  }
  const auto syncs = power_cut::ReadSyncLog(config.shadow);
  std::vector<SyncPoint> out;
  std::string list;
  for (const auto& s : syncs) {
    for (const Span& span : spans) {
      if (s.realtime_ms < span.from || (span.to != 0 && s.realtime_ms > span.to)) continue;
      auto it = span.steps.upper_bound(s.realtime_ms);
      std::string after = it == span.steps.begin() ? "planned" : std::prev(it)->second;
      if (spans.size() > 1) after += " of trip " + std::to_string(span.trip);
      out.push_back({s.n, after, InStack(s.path, f)});
      list += " " + out.back().Describe();
      break;
    }
  }
  std::printf("%zu %s syncs in the campaign, %zu in %s's %s:%s\n", syncs.size(),
              daemon.c_str(), out.size(), holder.c_str(),
              spans.size() == 1 ? "trip" : (std::to_string(spans.size()) + " trips").c_str(),
              list.c_str());
  return out;
}

std::vector<SyncPoint> KeeperTripSyncs(const CrashFixture& f, const power_cut::Config& config,
                                       const std::string& daemon) {
  return HolderTripSyncs(f, config, daemon, "keeper", 1);
}

std::vector<SyncPoint> ChooseSyncPoints(const std::vector<SyncPoint>& points, size_t most) {
  if (points.size() <= most) return points;
  std::vector<bool> chosen(points.size(), false);
  size_t n = 0;
  std::set<std::pair<std::string, std::string>> kinds;
  for (size_t i = 0; i < points.size() && n < most; ++i) {
    if (kinds.insert({points[i].path, points[i].after}).second) {
      chosen[i] = true;
      ++n;
    }
  }
  // The rest spread evenly over the points not chosen yet.
  std::vector<size_t> rest;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!chosen[i]) rest.push_back(i);
  }
  const size_t more = std::min(most - n, rest.size());
  for (size_t k = 0; k < more; ++k) chosen[rest[k * rest.size() / more]] = true;
  std::vector<SyncPoint> out;
  std::string list;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!chosen[i]) continue;
    out.push_back(points[i]);
    list += " " + points[i].Describe();
  }
  std::printf("cutting at %zu of the %zu syncs (the first of each file and step, then spread "
              "evenly):%s\n",
              out.size(), points.size(), list.c_str());
  return out;
}

void ExpectCutAt(const CrashFixture& f, const power_cut::Config& config, const SyncPoint& p) {
  const power_cut::SyncRecord cut = power_cut::CutAt(config.shadow);
  EXPECT_EQ(cut.n, p.n);
  if (InStack(cut.path, f) != p.path) {
    std::printf("sync %ld was %s here, %s in the counting run\n", p.n,
                InStack(cut.path, f).c_str(), p.path.c_str());
  }
}

}  // namespace gputravel
