// orchestrator: the daemon inside the orchestrator TD.
#include <sys/stat.h>

#include <cstdio>

#include "grpcpp/grpcpp.h"
#include "keyxfer/attestation_config.h"
#include "orchestrator/campaign_config.h"
#include "orchestrator/campaign_runner.h"
#include "orchestrator/orchestrator_service.h"
#include "util/daemon.h"
#include "util/files.h"
#include "util/flags.h"
#include "util/log.h"

namespace gputravel {
namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "orchestrator: %s\n", msg.c_str());
  return 2;
}

int Run(int argc, char** argv) {
  Flags flags("orchestrator",
              "GPU Travelling orchestrator: owns the GPU's CC session, attests the\n"
              "holders, routes the GPU through the MUX and runs campaigns of trips.\n"
              "Config JSON: {\"listen\", \"domain\", \"state_dir\", \"mux_endpoint\",\n"
              "\"gpu\": {...}, \"attestation\": {...}, \"campaigns\": [...]}\n"
              "(docs/operations.md).");
  flags.String("config", "", "Path of the orchestrator configuration (JSON).");
  flags.String("ready_file", "", "File written once the daemon serves.");
  flags.String("v", "1", "Log verbosity: 0 errors, 1 info, 2 debug, 3 trace.");
  absl::Status ps = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!ps.ok()) return Fail(std::string(ps.message()));
  if (flags.Get("config").empty()) return Fail("--config is required (see --help)");
  SetLogLevel(flags.GetInt("v"));
  SetLogPrefix("orchestrator");
  BlockTerminationSignals();
  const std::string where = flags.Get("config");
  auto json = ReadJsonFile(where);
  if (!json.ok()) return Fail(std::string(json.status().message()));
  auto cfg = ParseOrchestratorConfig(*json, where);
  if (!cfg.ok()) return Fail(std::string(cfg.status().message()));
  ::mkdir(cfg->state_dir.c_str(), 0700);
  auto att = MakeAttestationFromConfig(cfg->attestation, where + ": attestation", cfg->domain);
  if (!att.ok()) return Fail(std::string(att.status().message()));
  CampaignRunner runner(&*cfg, att->attester.get(), att->verifier.get());
  OrchestratorService service(&runner);
  if (cfg->listen.rfind("unix:", 0) == 0) {
    absl::Status s = PrepareUnixSocketPath(cfg->listen.substr(5));
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  grpc::ServerBuilder b;
  b.AddListeningPort(cfg->listen, grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  if (!server) return Fail("cannot listen on " + cfg->listen);
  GT_LOG(1, "serving on ", cfg->listen, ", attestation backend ", att->backend);
  AnnounceReady(flags.Get("ready_file"));
  int sig = WaitForTerminationSignal();
  GT_LOG(1, "signal ", sig, ": shutting down");
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  ExitAfterShutdown(0);
}

}  // namespace
}  // namespace gputravel

int main(int argc, char** argv) { return gputravel::Run(argc, argv); }
