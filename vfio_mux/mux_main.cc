// vfio_mux: the host daemon that routes GPUs between trust domains.
#include <cstdio>
#include <map>

#include "grpcpp/grpcpp.h"
#include "util/daemon.h"
#include "util/files.h"
#include "util/flags.h"
#include "util/log.h"
#include "vfio_mux/backend_factory.h"
#include "vfio_mux/mux_service.h"
#include "vfio_mux/route_table.h"

namespace gputravel {
namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "vfio_mux: %s\n", msg.c_str());
  return 2;
}

int Run(int argc, char** argv) {
  Flags flags("vfio_mux",
              "Host PCIe MUX: routes each GPU to one trust domain at a time, with\n"
              "fencing tokens, a durable route table and an audit log. Untrusted by\n"
              "design: no security property depends on it.\n"
              "Config JSON: {\"listen\", \"backend\": emulated|sysfs|libvirt,\n"
              "\"state_file\", \"audit_log\", \"gpus\": [...]} (docs/operations.md).");
  flags.String("config", "", "Path of the MUX configuration (JSON).");
  flags.String("ready_file", "", "File written once the MUX serves.");
  flags.String("v", "1", "Log verbosity: 0 errors, 1 info, 2 debug, 3 trace.");
  absl::Status ps = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!ps.ok()) return Fail(std::string(ps.message()));
  if (flags.Get("config").empty()) return Fail("--config is required (see --help)");
  SetLogLevel(flags.GetInt("v"));
  SetLogPrefix("vfio_mux");
  BlockTerminationSignals();
  const std::string where = flags.Get("config");
  auto cfg = ReadJsonFile(where);
  if (!cfg.ok()) return Fail(std::string(cfg.status().message()));
  auto listen = JsonString(*cfg, where, "listen");
  auto state = JsonString(*cfg, where, "state_file");
  auto audit = JsonString(*cfg, where, "audit_log");
  for (const absl::Status& s : {listen.status(), state.status(), audit.status()}) {
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  auto backend = MakeRoutingBackend(*cfg, where);
  if (!backend.ok()) return Fail(std::string(backend.status().message()));
  auto table = RouteTable::Open(backend->get(), *state, *audit);
  if (!table.ok()) return Fail(std::string(table.status().message()));
  MuxService service(table->get(), (*backend)->Name());
  if (listen->rfind("unix:", 0) == 0) {
    absl::Status s = PrepareUnixSocketPath(listen->substr(5));
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  grpc::ServerBuilder b;
  b.AddListeningPort(*listen, grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  if (!server) return Fail("cannot listen on " + *listen);
  GT_LOG(1, "serving on ", *listen, " with the ", (*backend)->Name(), " backend");
  AnnounceReady(flags.Get("ready_file"));
  int sig = WaitForTerminationSignal();
  GT_LOG(1, "signal ", sig, ": shutting down");
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  ExitAfterShutdown(0);
}

}  // namespace
}  // namespace gputravel

int main(int argc, char** argv) { return gputravel::Run(argc, argv); }
