#ifndef GPUTRAVEL_UTIL_PROC_STATS_H_
#define GPUTRAVEL_UTIL_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace gputravel {

// What /proc says about a process (0: this one). Each returns -1 when the
// process or the field cannot be read (it exited, say).

// A field of /proc/PID/status in KiB: "VmRSS", "VmHWM", ...
int64_t ProcStatusKib(pid_t pid, const std::string& field);

// How many file descriptors the process has open (entries of /proc/PID/fd).
int64_t ProcOpenFiles(pid_t pid);

// User plus system CPU time the process has used, in seconds (/proc/PID/stat).
double ProcCpuSeconds(pid_t pid);

// Whether this binary, and so the daemons built with it, runs under
// AddressSanitizer (tools/checks.sh asan). Resident memory is then ASan's:
// freed blocks wait in its quarantine (256 MiB) and every block carries
// redzones and shadow, so a bound on VmRSS or VmHWM says nothing there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAddressSanitizer = true;
#else
constexpr bool kUnderAddressSanitizer = false;
#endif
#else
constexpr bool kUnderAddressSanitizer = false;
#endif

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_PROC_STATS_H_
