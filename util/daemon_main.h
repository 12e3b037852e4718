#ifndef GPUTRAVEL_UTIL_DAEMON_MAIN_H_
#define GPUTRAVEL_UTIL_DAEMON_MAIN_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "util/server_limits.h"

namespace gputravel {

// What every daemon's command line carries.
struct DaemonArgs {
  std::string config;      // --config (required)
  std::string ready_file;  // --ready_file
  std::set<std::string> set_bools;  // the daemon's own boolean flags given
};

// A boolean flag of one daemon's own: name and help.
struct DaemonBoolFlag {
  std::string name;
  std::string help;
};

// Parses --config, --ready_file, --v, --log_format, `bools` and --help for
// `program`; --help prints `summary` with the flags and exits 0, bad usage
// (an unknown --log_format among it) exits 2 with a message. Sets the log
// level, format and prefix, turns off lock-order checks
// (TurnOffLockOrderChecks) and blocks SIGINT/SIGTERM (call before any thread
// starts).
DaemonArgs ParseDaemonArgsOrExit(int argc, char** argv, const std::string& program,
                                 const std::string& summary,
                                 const std::vector<DaemonBoolFlag>& bools = {});

// Turns off Abseil's lock-order (deadlock) detection for the whole process.
// Debian's Abseil is built with it on: every absl::Mutex lock and unlock,
// gRPC's own included, then also updates one process-wide graph of lock
// order under one global spin lock, which costs the data path's threads CPU
// and makes them wait on each other. Daemons and the benchmarks that measure
// their code run without it (ParseDaemonArgsOrExit calls this); unit tests
// keep it, so they still catch a lock taken in the wrong order. Call before
// any thread starts.
void TurnOffLockOrderChecks();

// Prints "program: message" (with --log_format=json, an ERROR line in JSON)
// and exits 2 (start-up errors).
[[noreturn]] void ExitStartupError(const std::string& program, const std::string& message);

// The configuration at `path` (--config), read by util/files.h ReadJsonFile
// (a JSON object, no key given twice); otherwise exits 2 with the error,
// which names the file.
nlohmann::json ReadConfigOrExit(const std::string& program, const std::string& path);

// One listening endpoint of a daemon.
struct ServedEndpoint {
  std::string address;                  // "unix:PATH" or "HOST:PORT"
  std::vector<grpc::Service*> services;
  // mTLS credentials (auth/tls_config.h). Null means plaintext, which only the
  // emulated device's sockets use: they stand for the PCIe bus, and every
  // byte that crosses them is sealed by the CC channel.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // What its callers may cost it (util/server_limits.h); the defaults are
  // the emulated device bus's.
  ServerLimits limits;
  // Services the standard health service (when enabled) answers SERVING
  // for by name ("gputravel.v1.Orchestrator"), besides "" (the server).
  std::vector<std::string> health_names;
};

// Serves each endpoint on its own server (tracing every call's entry and
// exit at --v=3, util/rpc_trace.h) until
// SIGINT/SIGTERM, announces readiness, then shuts every server down within
// one short deadline, runs `after_shutdown` and exits 0. Exits 2 if an
// endpoint cannot be served, or if a Unix socket path is served by another
// daemon (util/daemon.h PrepareUnixSocketPath; stale sockets are removed).
// A Unix socket is made 0660 with mTLS (the daemon's user and group may
// connect; the certificate decides what they may do) and 0600 plaintext
// (the emulated device's sockets, its admin socket among them). `before_shutdown` runs first on a signal (stop
// background work that holds streams open). `metrics_address` (the daemon's
// metrics exposer, if any) is announced in the ready file.
[[noreturn]] void ServeUntilSignal(const std::string& program,
                                   const std::vector<ServedEndpoint>& endpoints,
                                   const std::string& ready_file,
                                   const std::function<void()>& after_shutdown = nullptr,
                                   const std::function<void()>& before_shutdown = nullptr,
                                   const std::string& metrics_address = "");

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_DAEMON_MAIN_H_
