#ifndef GPUTRAVEL_UTIL_FAILPOINT_H_
#define GPUTRAVEL_UTIL_FAILPOINT_H_

#include <string>

#include "absl/status/status.h"

namespace gputravel {

// Crash injection for the recovery tests. When the environment variable
// GPUTRAVEL_FAILPOINT is "NAME" or "NAME#N", the N-th (default first) call of
// CrashPoint(NAME) logs and kills the process with SIGKILL, exactly as an
// operator's `kill -9` would (nothing is flushed or cleaned up by the
// process). Not as a power cut: the kernel keeps what the process wrote
// without an fsync (SQLite's synchronous=NORMAL commits), which a power cut
// may lose. Unset, it costs one comparison. It can only take a process down,
// never change what it does otherwise, so it carries no security weight.
//
// Holding, for the tests that kill ANOTHER daemon at a step of this one:
// when GPUTRAVEL_FAILPOINT is "hold:DIR", a call of CrashPoint(NAME) finds
// whether the test armed it, by creating the file DIR/NAME. If so, it
// renames that file DIR/NAME.held and waits, doing nothing else, until the
// test removes DIR/NAME.held (having killed a peer meanwhile), or at most
// 120 s; then the process goes on as if nothing happened. Unarmed, it costs
// one access(2). Like the crash, it can only delay the process, never change
// what it does.
void CrashPoint(const std::string& name);

// Error injection for the same tests: when GPUTRAVEL_FAILPOINT is
// "error:NAME" or "error:NAME#N", the N-th (default first) call of
// InjectedError(NAME) returns UNAVAILABLE, as a storage or RPC failure at
// that point would, and every other call returns OK. It stands for a failure
// the code must already handle (the caller treats it like the real one), so
// it can only make an operation fail, never let one through.
absl::Status InjectedError(const std::string& name);

// A fault that lasts, for the storage tests: when GPUTRAVEL_FAILPOINT is
// "while:NAME:PATH", FaultSwitchOn(NAME) is true while the file PATH exists
// (the test creates it, and removes it to end the fault), and false
// otherwise; unset, false at the cost of one comparison. The caller fails
// as the real fault would (orchestrator/sqlite_db.h: "disk_full"), so, like
// InjectedError, it can only make an operation fail.
bool FaultSwitchOn(const std::string& name);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_FAILPOINT_H_
