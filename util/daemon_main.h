#ifndef GPUTRAVEL_UTIL_DAEMON_MAIN_H_
#define GPUTRAVEL_UTIL_DAEMON_MAIN_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/grpcpp.h"

namespace gputravel {

// What every daemon's command line carries.
struct DaemonArgs {
  std::string config;      // --config (required)
  std::string ready_file;  // --ready_file
};

// Parses --config, --ready_file, --v and --help for `program`; --help prints
// `summary` with the flags and exits 0, bad usage exits 2 with a message.
// Sets the log level and prefix and blocks SIGINT/SIGTERM (call before any
// thread starts).
DaemonArgs ParseDaemonArgsOrExit(int argc, char** argv, const std::string& program,
                                 const std::string& summary);

// Prints "program: message" and exits 2 (start-up errors).
[[noreturn]] void ExitStartupError(const std::string& program, const std::string& message);

// Serves each (endpoint, service) on its own server ("unix:PATH" or
// "HOST:PORT"; stale sockets removed) until SIGINT/SIGTERM, announces
// readiness, then shuts every server down within one short deadline, runs
// `after_shutdown` and exits 0. Exits 2 if an endpoint cannot be served.
[[noreturn]] void ServeUntilSignal(
    const std::string& program,
    const std::vector<std::pair<std::string, grpc::Service*>>& endpoints,
    const std::string& ready_file, const std::function<void()>& after_shutdown = nullptr);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_DAEMON_MAIN_H_
