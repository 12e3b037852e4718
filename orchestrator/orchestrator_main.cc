// orchestrator: the daemon inside the orchestrator TD.
#include "auth/role_gate.h"
#include "auth/tls_config.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "keyxfer/attestation_config.h"
#include "keyxfer/runtime_measurement.h"
#include "orchestrator/api_limits.h"
#include "orchestrator/campaign_engine.h"
#include "metrics/daemon_metrics.h"
#include "orchestrator/daemon_config.h"
#include "orchestrator/orchestrator_metrics.h"
#include "orchestrator/orchestrator_service.h"
#include "orchestrator/state_store.h"
#include "orchestrator/trainer_service.h"
#include "util/daemon_main.h"
#include "util/exclusive_lock.h"
#include "util/files.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/private_files.h"

int main(int argc, char** argv) {
  using namespace gputravel;
  const std::string kProgram = "orchestrator";
  DaemonArgs args = ParseDaemonArgsOrExit(
      argc, argv, kProgram,
      "GPU Travelling orchestrator: owns the GPUs' CC sessions, attests the\n"
      "holders, routes the GPU through the MUX and runs campaigns of trips,\n"
      "with durable state (SQLite, WAL) in state_dir and crash recovery at\n"
      "start-up. Serves the scheduler API (proto/orchestrator.proto), the\n"
      "standard gRPC health service and reflection (to operators and\n"
      "schedulers only), all over mTLS.\n"
      "Config JSON: {\"listen\", \"domain\", \"state_dir\",\n"
      "\"checkpoint_key_file\" (default <state_dir>/checkpoint.key), \"mux_endpoint\",\n"
      "\"mux_name\", \"trainer_listen\" (unix:/path; the Trainer service),\n"
      "\"gpus\": [{\"name\", \"device_endpoint\", \"device_ca\",\n"
      "\"serial\", \"heartbeat_period_seconds\"}], \"attestation\": {...},\n"
      "\"tls\": {\"ca\", \"cert\", \"key\", \"crl\"}} (crl: the campaign's CRL,\n"
      "checked at every handshake and reread when it changes),\n"
      "\"metrics_listen\" (127.0.0.1:PORT: Prometheus metrics over HTTP; off\n"
      "without it)\n"
      "(docs/operations.md). Campaigns are created through the API\n"
      "(`gputravel create`).",
      {{"seal_clear_checkpoints",
        "Seal, once, model checkpoints the database holds in the clear (written before "
        "checkpoints were sealed). Only for a database known to be this orchestrator's "
        "own: otherwise a clear checkpoint is refused, as it may have been planted."}});
  const nlohmann::json json = ReadConfigOrExit(kProgram, args.config);
  auto cfg = ParseOrchestratorConfig(json, args.config);
  if (!cfg.ok()) ExitStartupError(kProgram, std::string(cfg.status().message()));
  absl::Status private_dir = MakePrivateStateDirectory(cfg->state_dir, "state_dir");
  if (!private_dir.ok()) ExitStartupError(kProgram, std::string(private_dir.message()));
  // One orchestrator per state_dir, before anything reads it: a second
  // one's recovery would abort the first's live trip. Held until exit.
  auto state_lock = ExclusiveLock::Acquire(cfg->state_dir + "/orchestrator.lock",
                                           "orchestrator on state_dir " + cfg->state_dir);
  if (!state_lock.ok()) ExitStartupError(kProgram, std::string(state_lock.status().message()));
  // What this orchestrator trusts (its binary, this configuration, the CA
  // files it names), measured into RTMR3 by the TDX backend before anything
  // is served.
  auto measurement = MeasureDaemon(kProgram, "/proc/self/exe", json, args.config);
  if (!measurement.ok()) ExitStartupError(kProgram, std::string(measurement.status().message()));
  // The device CAs trusted from now on are the bytes just measured.
  for (size_t i = 0; i < cfg->gpus.size(); ++i) {
    const std::string n = std::to_string(i);
    auto ca = measurement->File("/gpus/" + n + "/device_ca",
                                args.config + ": gpus[" + n + "].device_ca");
    if (!ca.ok()) ExitStartupError(kProgram, std::string(ca.status().message()));
    cfg->gpus[i].device_ca_pem = *std::move(ca);
  }
  // So is the campaign CA it trusts for every connection.
  {
    auto ca = measurement->File("/tls/ca", args.config + ": tls.ca");
    absl::Status same = ca.ok() ? RequireTlsCaBytes(cfg->tls, *ca) : ca.status();
    if (!same.ok()) ExitStartupError(kProgram, std::string(same.message()));
  }
  auto att = MakeAttestationFromConfig(cfg->attestation, args.config + ": attestation",
                                       cfg->domain, *measurement);
  if (!att.ok()) ExitStartupError(kProgram, std::string(att.status().message()));
  GT_LOG(1, "attestation backend ", att->backend, ", RTMR3 ", HexEncode(measurement->rtmr3));
  // The database holds model checkpoints: 0600 whatever mode a restored
  // copy has, before SQLite opens it (its -wal and -shm files take the
  // database's mode when created).
  const std::string db_path = cfg->state_dir + "/orchestrator.db";
  for (const std::string& path : {db_path, db_path + "-wal", db_path + "-shm"}) {
    absl::Status s = MakeFilePrivate(path, /*create=*/path == db_path);
    if (!s.ok()) ExitStartupError(kProgram, std::string(s.message()));
  }
  // Checkpoints in the database are sealed under a key kept outside it.
  auto store = StateStore::Open(db_path, cfg->checkpoint_key_file,
                                args.set_bools.count("seal_clear_checkpoints") > 0);
  if (!store.ok()) ExitStartupError(kProgram, std::string(store.status().message()));
  auto creds = MakeServerCredentials(cfg->tls);
  if (!creds.ok()) ExitStartupError(kProgram, std::string(creds.status().message()));
  // A caller whose role may not call a method is refused before its request
  // is read; requests, streams, memory and threads are bounded (api_limits.h).
  InstallRoleGate(creds->get(), OrchestratorApiRoles(), {}, RevocationListOf(cfg->tls));

  // Metrics (metrics_listen; off without it): counted from the store's
  // commits and around the verifier of holders' evidence, served on the
  // loopback before anything is recovered, so recovery counts too.
  std::unique_ptr<DaemonMetrics> metrics;
  std::unique_ptr<OrchestratorMetrics> orchestrator_metrics;
  Verifier* verifier = att->verifier.get();
  if (!cfg->metrics_listen.empty()) {
    auto m = DaemonMetrics::Start(cfg->metrics_listen, args.config + ": metrics_listen", verifier);
    if (!m.ok()) ExitStartupError(kProgram, std::string(m.status().message()));
    metrics = *std::move(m);
    orchestrator_metrics = std::make_unique<OrchestratorMetrics>(metrics->registry(), store->get());
    verifier = metrics->verifier();
    GT_LOG(1, "metrics on http://", metrics->address(), kMetricsPath);
  }

  CampaignEngine engine(&*cfg, store->get(), att->attester.get(), verifier);
  // The GPU workers make interrupted trips safe before they run anything
  // else; the API serves meanwhile.
  absl::Status s = engine.Start();
  if (!s.ok()) ExitStartupError(kProgram, std::string(s.message()));
  OrchestratorService service(&engine);
  std::vector<ServedEndpoint> endpoints = {{cfg->listen,
                                            {&service},
                                            *creds,
                                            OrchestratorApiLimits(),
                                            {v1::Orchestrator::service_full_name()}}};
  // The Trainer service, on its own Unix socket (daemon_config.h refuses
  // anything else): role trainer only, before a request is read; the
  // service admits only a campaign's trainer.identity.
  TrainerServiceImpl trainer_service(
      [&engine](const std::string& c) { return engine.TrainerInfo(c); }, engine.trainers());
  if (!cfg->trainer_listen.empty()) {
    auto trainer_creds = MakeServerCredentials(cfg->tls);
    if (!trainer_creds.ok()) {
      ExitStartupError(kProgram, std::string(trainer_creds.status().message()));
    }
    InstallRoleGate(trainer_creds->get(), TrainerServiceRoles(), {}, RevocationListOf(cfg->tls));
    endpoints.push_back(
        {cfg->trainer_listen, {&trainer_service}, *trainer_creds, TrainerServiceLimits()});
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // On SIGTERM the engine stops first: a trip in flight is cancelled and made
  // safe, and open watch and trainer streams end.
  ServeUntilSignal(kProgram, endpoints, args.ready_file, nullptr,
                   [&engine, &trainer_service] {
                     trainer_service.Shutdown();
                     engine.Shutdown();
                   },
                   metrics ? metrics->address() : "");
}
