#ifndef GPUTRAVEL_TESTS_POWER_CUT_DAEMON_H_
#define GPUTRAVEL_TESTS_POWER_CUT_DAEMON_H_

// One daemon of the crash fixture's stack (tests/crash_fixture.h) under a
// power cut: the power-cut tests stop a daemon, start it again under
// tests/power_cut_preload.so with the files it keeps durable tracked (a
// first run counts its syncs, each later run cuts the power at one of them),
// put back what the disk kept once it died (tests/power_cut_image.h says what
// the model drops) and start it again as it is deployed, then check the
// invariants of P7 on the campaign.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/crash_fixture.h"
#include "tests/power_cut_image.h"

namespace gputravel {

// Stops `daemon` of the fixture's stack cleanly (SIGTERM), so that what it
// keeps is durable when the model starts.
absl::Status StopDaemon(CrashFixture* f, const std::string& daemon);

// A power-cut configuration for run `name`: its shadow directory (under
// TEST_TMPDIR, made afresh), `prefixes` tracked, the power cut at sync
// `cut_at` (0: never).
absl::StatusOr<power_cut::Config> PowerCutConfig(const std::string& name,
                                                 std::vector<std::string> prefixes,
                                                 long cut_at);

// Starts the stopped `daemon` under the preload with `config`, and `env`
// set for it alone; a restart of it later runs without either. An error
// when it did not come up (e.g. the power was cut before it served).
absl::Status StartUnderPowerCut(CrashFixture* f, const std::string& daemon,
                                const power_cut::Config& config,
                                const std::map<std::string, std::string>& env = {});

// StopDaemon, then StartUnderPowerCut with PowerCutConfig(`name`,
// `prefixes`, `cut_at`), which it stores in `*config`, and
// GPUTRAVEL_FAILPOINT=`failpoint` (empty: none) for this start alone.
absl::Status RestartUnderPowerCut(CrashFixture* f, const std::string& daemon,
                                  const std::string& name, std::vector<std::string> prefixes,
                                  long cut_at, const std::string& failpoint,
                                  power_cut::Config* config);

// Waits up to `seconds` for `daemon` to die of the power cut (SIGKILL) and
// puts back what the disk kept (gtest assertions); the caller starts it
// again (EmulatedStack::Restart: as deployed, without the preload).
void RestoreAfterCut(CrashFixture* f, const std::string& daemon,
                     const power_cut::Config& config, double seconds = 90);

// `path` without the stack's directory (each run has its own).
std::string InStack(const std::string& path, const CrashFixture& f);

// One sync a daemon asked for: its number, the step the keeper's trip had
// reached when it was asked for (or what the daemon was doing), and the file
// or directory synced (InStack).
struct SyncPoint {
  long n = 0;
  std::string after;
  std::string path;
  // "N (after STEP, PATH)".
  std::string Describe() const;
};

// Every sync the daemon under `config` asked for so far, each labelled as
// after `after`.
std::vector<SyncPoint> LoggedSyncs(const CrashFixture& f, const power_cut::Config& config,
                                   const std::string& after);

// Of the syncs `daemon` under `config` asked for in a campaign that is
// final and in which none was cut, those from the start of each of
// `holder`'s trips to the next trip's start (or the campaign's end), each
// labelled with the step the trip had reached ("STEP of trip N" when the
// holder has more than one trip); prints them. `trips`: only the holder's
// first so many.
std::vector<SyncPoint> HolderTripSyncs(const CrashFixture& f, const power_cut::Config& config,
                                       const std::string& daemon, const std::string& holder,
                                       size_t trips = SIZE_MAX);

// HolderTripSyncs of the keeper's first trip.
std::vector<SyncPoint> KeeperTripSyncs(const CrashFixture& f, const power_cut::Config& config,
                                       const std::string& daemon);

// At most `most` of `points`, in their order: every point while they are
// no more; else the first of each kind (the file synced and the step it
// follows), then others spread evenly over the rest, and prints the choice.
std::vector<SyncPoint> ChooseSyncPoints(const std::vector<SyncPoint>& points, size_t most);

// After the cut: expects that it came at sync `p` (gtest assertion); prints
// it when the file differs (a daemon asks for its syncs in the same order
// run after run; were it not to, this run cut a neighbouring sync, still a
// valid cut).
void ExpectCutAt(const CrashFixture& f, const power_cut::Config& config, const SyncPoint& p);

}  // namespace gputravel

#endif  // GPUTRAVEL_TESTS_POWER_CUT_DAEMON_H_
