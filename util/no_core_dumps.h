#ifndef GPUTRAVEL_UTIL_NO_CORE_DUMPS_H_
#define GPUTRAVEL_UTIL_NO_CORE_DUMPS_H_

#include "absl/status/status.h"

namespace gputravel {

// Keeps this process's memory out of core dumps and away from other users'
// debuggers: the soft and hard core size limits become 0 (so no core file,
// and no systemd-coredump or core_pattern pipe gets the memory either), and
// the process is marked not dumpable (PR_SET_DUMPABLE 0: its /proc/PID files
// belong to root, and only a process with CAP_SYS_PTRACE can attach). Every
// daemon calls it at start (util/daemon_main.h): they hold private keys, CC
// session and copy-engine keys and, in a holder or the emulated GPU, dataset
// plaintext, none of which may reach a dump on a disk the host can read (P1,
// P2). Irreversible for the process; children inherit the limit.
absl::Status DisableCoreDumps();

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_NO_CORE_DUMPS_H_
