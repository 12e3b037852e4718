#ifndef GPUTRAVEL_UTIL_DAEMON_H_
#define GPUTRAVEL_UTIL_DAEMON_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gputravel {

// Call first in main(), before any thread starts: blocks SIGINT/SIGTERM so
// that WaitForTerminationSignal can take them synchronously.
void BlockTerminationSignals();
// Returns the signal number once SIGINT or SIGTERM arrives.
int WaitForTerminationSignal();

// Removes a stale Unix socket file before binding. Refuses a path that is
// not a socket, and a socket something answers on (FAILED_PRECONDITION
// "another daemon is serving PATH"): only a socket whose connect is refused
// is stale.
absl::Status PrepareUnixSocketPath(const std::string& path);

// INVALID_ARGUMENT, naming the path, when it is longer than a Unix socket
// path may be (107 bytes).
absl::Status CheckUnixSocketPathLength(const std::string& path);

// Sets who may connect to a bound Unix socket (connecting needs write
// permission on it): 0600 the daemon's own user, 0660 also its group.
absl::Status SetUnixSocketMode(const std::string& path, mode_t mode);

// Ends the process at once after a clean shutdown. gRPC 1.51's library
// teardown (in ~Server) can block for ~10 s joining an idle executor thread
// that sleeps in epoll_wait; once the servers are shut down and state is
// wiped there is nothing left for destructors to do.
[[noreturn]] void ExitAfterShutdown(int code);

// Writes "ready\n" to `path` (if non-empty) once the daemon serves, so a
// supervisor can wait for readiness without polling the socket, then one
// line "listen ADDRESS" per address served, as bound: a TCP address given
// with port 0 carries the port the kernel chose; then, if not empty,
// "metrics ADDRESS": where its metrics are served (metrics/metrics_exposer.h).
void AnnounceReady(const std::string& path, const std::vector<std::string>& served = {},
                   const std::string& metrics = "");

// The first address `ready_text` (a ready file's content) announces under
// `key` ("listen", "metrics"); NotFound when there is none.
absl::StatusOr<std::string> AnnouncedAddress(const std::string& ready_text,
                                             const std::string& key);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_DAEMON_H_
