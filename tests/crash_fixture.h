#ifndef GPUTRAVEL_TESTS_CRASH_FIXTURE_H_
#define GPUTRAVEL_TESTS_CRASH_FIXTURE_H_

// The stack the crash tests break, and the invariants every crash must leave
// intact (P7): the campaign completes, every trip is counted exactly once
// (each holder's dataset is covered by successful windows exactly once), no
// key a holder was handed still works, and every buffer is scrubbed and
// verified before the next holder.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/emulated_stack.h"
#include "proto/device.grpc.pb.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/key_keeping_holder.h"
#include "util/subprocess.h"

namespace gputravel {

struct CrashFixture {
  std::string dir;
  std::unique_ptr<EmulatedStack> stack;
  std::unique_ptr<KeyKeepingHolder> keeper;
};

// Two real holders (3 MiB and 5.5 MiB) and the key keeper (1 MiB), a 2 MiB
// buffer, two copy engines: round-robin trips a, b, keeper, a, b, b.
// `dataset_bytes`, if given, replaces the two real holders' sizes (the
// keeper's trip stays the third while each has at least one window). The
// daemons start with `env` set (e.g. GPUTRAVEL_FAILPOINT), unset again once
// they serve, so a restarted daemon runs without it.
absl::Status StartCrashFixture(CrashFixture* f,
                               const std::map<std::string, std::string>& env = {},
                               const std::vector<uint64_t>& dataset_bytes = {});
// Stops the stack and removes the fixture's directory.
void StopCrashFixture(CrashFixture* f);

// Waits up to `seconds` for `p` to exit.
bool WaitForExit(Subprocess* p, double seconds);

// Every recorded event of campaign "demo" (progress left out).
std::vector<v1::Event> AllEvents(EmulatedStack* stack);

// What a crash test expects of its final campaign besides the invariants.
struct CrashExpectation {
  // Trips aborted, and trips failed: exactly so many (-1: any number).
  int aborted = 0;
  int failed = 0;
  // Holders the operator skipped: "skipped", each round of their datasets
  // covered by a prefix of windows (still each byte once); every other
  // holder is "done", each round covered whole.
  std::set<std::string> skipped;
  // Every trip ends scrubbed and re-keyed (an orchestrator's recovery makes
  // even a trip safe whose GPU never left); false: only the trips whose GPU
  // left the orchestrator (their route_out committed).
  bool every_trip_scrubbed = true;
};

// Checks the invariants on the final campaign `c` of `stack` (gtest
// assertions): it completed; every trip is finished, once; every trip whose
// GPU left (with every_trip_scrubbed, every trip) was scrubbed and re-keyed;
// an ok trip's digest matched; each holder's dataset is covered by ok
// windows exactly once per round; every trip finished before the next was
// planned (its buffer scrubbed before the next holder); no key `keeper` was
// handed still works (and some were tried).
void CheckCrashInvariants(EmulatedStack* stack, KeyKeepingHolder* keeper, const v1::Campaign& c,
                          const CrashExpectation& expected);
// The fixture's: exactly `expected_aborted` trips aborted, none failed,
// none skipped, every one scrubbed.
void CheckCrashInvariants(CrashFixture* f, const v1::Campaign& c, int expected_aborted);

// The emulated GPU as the host sees it (DeviceAdmin; a failed call is a
// test failure).
v1::DeviceStatus DeviceStatusNow(EmulatedStack* stack);

}  // namespace gputravel

#endif  // GPUTRAVEL_TESTS_CRASH_FIXTURE_H_
