// orchestrator: the daemon inside the orchestrator TD.
#include <sys/stat.h>

#include "keyxfer/attestation_config.h"
#include "orchestrator/campaign_config.h"
#include "orchestrator/campaign_runner.h"
#include "orchestrator/orchestrator_service.h"
#include "util/daemon_main.h"
#include "util/files.h"
#include "util/log.h"

int main(int argc, char** argv) {
  using namespace gputravel;
  const std::string kProgram = "orchestrator";
  DaemonArgs args = ParseDaemonArgsOrExit(
      argc, argv, kProgram,
      "GPU Travelling orchestrator: owns the GPU's CC session, attests the\n"
      "holders, routes the GPU through the MUX and runs campaigns of trips.\n"
      "Config JSON: {\"listen\", \"domain\", \"state_dir\", \"mux_endpoint\",\n"
      "\"gpu\": {...}, \"attestation\": {...}, \"campaigns\": [...]}\n"
      "(docs/operations.md).");
  auto json = ReadJsonFile(args.config);
  if (!json.ok()) ExitStartupError(kProgram, std::string(json.status().message()));
  auto cfg = ParseOrchestratorConfig(*json, args.config);
  if (!cfg.ok()) ExitStartupError(kProgram, std::string(cfg.status().message()));
  if (::mkdir(cfg->state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    ExitStartupError(kProgram, "cannot create state_dir " + cfg->state_dir);
  }
  auto att = MakeAttestationFromConfig(cfg->attestation, args.config + ": attestation",
                                       cfg->domain);
  if (!att.ok()) ExitStartupError(kProgram, std::string(att.status().message()));
  GT_LOG(1, "attestation backend ", att->backend);
  CampaignRunner runner(&*cfg, att->attester.get(), att->verifier.get());
  OrchestratorService service(&runner);
  ServeUntilSignal(kProgram, {{cfg->listen, &service}}, args.ready_file);
}
