#include "util/daemon_main.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "util/daemon.h"
#include "util/files.h"
#include "util/flags.h"
#include "util/grpc_status.h"
#include "util/log.h"
#include "util/no_core_dumps.h"
#include "util/rpc_trace.h"

namespace gputravel {

namespace {
// Whether --log_format=json was given: start-up errors then are JSON lines too.
bool g_json_log = false;
}  // namespace

void TurnOffLockOrderChecks() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

void ExitStartupError(const std::string& program, const std::string& message) {
  if (g_json_log) {
    GT_LOG(0, message);
  } else {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), message.c_str());
  }
  std::exit(2);
}

nlohmann::json ReadConfigOrExit(const std::string& program, const std::string& path) {
  absl::StatusOr<nlohmann::json> config = ReadJsonFile(path);
  if (!config.ok()) ExitStartupError(program, std::string(config.status().message()));
  return *std::move(config);
}

DaemonArgs ParseDaemonArgsOrExit(int argc, char** argv, const std::string& program,
                                 const std::string& summary,
                                 const std::vector<DaemonBoolFlag>& bools) {
  Flags flags(program, summary);
  flags.String("config", "", "Path of the configuration (JSON). Required.");
  flags.String("ready_file", "", "File written once the daemon serves.");
  flags.Int("v", 1, 0, 3,
            "Log verbosity: 0 errors, 1 info, 2 debug, 3 trace (every RPC's entry and exit, "
            "each trip step, each MUX route step).");
  flags.String("log_format", "text",
               "Log lines on stderr: text (TIME LEVEL PARTY FILE:LINE: MESSAGE) or json (one "
               "object per line: time, level, party, source, message). Times are ISO-8601 "
               "UTC with milliseconds.");
  for (const DaemonBoolFlag& b : bools) flags.Bool(b.name, b.help);
  absl::Status ps = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    std::exit(0);
  }
  if (!ps.ok()) ExitStartupError(program, std::string(ps.message()));
  if (flags.Get("config").empty()) {
    ExitStartupError(program, "--config is required (see --help)");
  }
  if (!flags.positional().empty()) {
    ExitStartupError(program, "unexpected argument '" + flags.positional()[0] + "'");
  }
  absl::StatusOr<LogFormat> log_format = ParseLogFormat(flags.Get("log_format"));
  if (!log_format.ok()) ExitStartupError(program, std::string(log_format.status().message()));
  absl::Status no_dumps = DisableCoreDumps();
  if (!no_dumps.ok()) ExitStartupError(program, std::string(no_dumps.message()));
  SetLogLevel(flags.GetInt("v"));
  SetLogFormat(*log_format);
  g_json_log = *log_format == LogFormat::kJson;
  SetLogPrefix(program);
  TurnOffLockOrderChecks();
  BlockTerminationSignals();
  DaemonArgs args{flags.Get("config"), flags.Get("ready_file"), {}};
  for (const DaemonBoolFlag& b : bools) {
    if (flags.IsSet(b.name)) args.set_bools.insert(b.name);
  }
  return args;
}

void ServeUntilSignal(const std::string& program,
                      const std::vector<ServedEndpoint>& endpoints,
                      const std::string& ready_file,
                      const std::function<void()>& after_shutdown,
                      const std::function<void()>& before_shutdown,
                      const std::string& metrics_address) {
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<std::string> served;
  // Every socket path is checked before any is served: a daemon that finds
  // one of its paths served by another instance touches none of them.
  for (const auto& e : endpoints) {
    if (e.address.rfind("unix:", 0) == 0) {
      absl::Status s = PrepareUnixSocketPath(e.address.substr(5));
      if (!s.ok()) ExitStartupError(program, std::string(s.message()));
    }
  }
  for (const auto& e : endpoints) {
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort(e.address,
                       e.credentials ? e.credentials : grpc::InsecureServerCredentials(), &port);
    // Clients' keepalive pings (auth/tls_config.h) on an otherwise quiet
    // stream, such as a watch with no new event, are welcome: without this
    // gRPC answers the third with GOAWAY.
    b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
    ApplyServerLimits(e.limits, program + " " + e.address, &b);
    for (grpc::Service* service : e.services) b.RegisterService(service);
    if (LogLevel() >= 3) {
      std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> trace;
      trace.push_back(MakeRpcTraceInterceptorFactory());
      b.experimental().SetInterceptorCreators(std::move(trace));
    }
    auto server = b.BuildAndStart();
    if (!server) ExitStartupError(program, "cannot listen on " + e.address);
    if (grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService()) {
      for (const std::string& name : e.health_names) health->SetServingStatus(name, true);
    }
    if (e.address.rfind("unix:", 0) == 0) {
      absl::Status s =
          SetUnixSocketMode(e.address.substr(5), e.credentials ? 0660 : 0600);
      if (!s.ok()) ExitStartupError(program, std::string(s.message()));
    }
    servers.push_back(std::move(server));
    // host:0 asks the kernel for a port: say which one it gave.
    std::string address = e.address;
    const size_t colon = address.rfind(':');
    if (address.rfind("unix:", 0) != 0 && colon != std::string::npos &&
        address.substr(colon + 1) == "0" && port > 0) {
      address = address.substr(0, colon + 1) + std::to_string(port);
    }
    served.push_back(address);
  }
  GT_LOG(1, "serving on ", served.size(), " endpoint(s), first ",
         served.empty() ? "" : served[0]);
  AnnounceReady(ready_file, served, metrics_address);
  int sig = WaitForTerminationSignal();
  GT_LOG(1, "signal ", sig, ": shutting down");
  if (before_shutdown) before_shutdown();
  // One deadline for all servers: connected clients must not stretch it.
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
  for (auto& s : servers) s->Shutdown(deadline);
  if (after_shutdown) after_shutdown();
  ExitAfterShutdown(0);
}

}  // namespace gputravel
