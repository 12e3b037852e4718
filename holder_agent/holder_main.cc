// holder_agent: the data holder's agent inside its TD.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "holder_agent/api_limits.h"
#include "holder_agent/dataset.h"
#include "holder_agent/holder_config.h"
#include "holder_agent/holder_metrics.h"
#include "holder_agent/holder_service.h"
#include "holder_agent/trip_freshness.h"
#include "auth/role_gate.h"
#include "auth/tls_config.h"
#include "device/bounce_pool.h"
#include "keyxfer/attestation_config.h"
#include "keyxfer/runtime_measurement.h"
#include "metrics/daemon_metrics.h"
#include "util/daemon_main.h"
#include "util/exclusive_lock.h"
#include "util/files.h"
#include "util/hex.h"
#include "util/log.h"
#include "util/private_files.h"

int main(int argc, char** argv) {
  using namespace gputravel;
  const std::string kProgram = "holder_agent";
  DaemonArgs args = ParseDaemonArgsOrExit(
      argc, argv, kProgram,
      "Data-holder agent: attests its TD to the orchestrator, accepts one\n"
      "hand-off per trip and provisions its dataset window onto the GPU\n"
      "over the encrypted copy-engine path.\n"
      "Config JSON: {\"name\", \"domain\", \"listen\" (unix:PATH or\n"
      "HOST:PORT), \"dataset\": {\"name\", \"path\", \"format\":\n"
      "auto|llmc-tokens|raw}, \"tls\": {\"ca\", \"cert\", \"key\"} (certificate of\n"
      "role holder for this name; \"crl\": the campaign's CRL),\n"
      "\"orchestrator_names\": [names] (required: the only orchestrator\n"
      "certificates answered; any other of the campaign CA is refused),\n"
      "\"device_endpoint\", \"threads\", \"bounce_slots\", \"bounce_dir\",\n"
      "\"state_dir\" (private directory: the last trip accepted per\n"
      "orchestrator and GPU), "
      "\"training_policy\": {...} (what campaigns may do with this holder's\n"
      "windows and report about them; defaults are strict), \"attestation\":\n"
      "{...}, \"metrics_listen\" (127.0.0.1:PORT: Prometheus metrics over\n"
      "HTTP; off without it)} (see docs/operations.md).");
  auto Fail = [&kProgram](const std::string& m) { ExitStartupError(kProgram, m); };
  const std::string where = args.config;
  nlohmann::json json = ReadConfigOrExit(kProgram, where);
  auto parsed = ParseHolderConfig(json, where);
  if (!parsed.ok()) Fail(std::string(parsed.status().message()));
  HolderConfig& cfg = *parsed;
  HolderOptions opts;
  opts.name = cfg.name;
  opts.domain = cfg.domain;
  opts.device_endpoint = cfg.device_endpoint;
  opts.orchestrator_names = cfg.orchestrator_names;
  opts.writer = cfg.writer;
  opts.dataset_name = cfg.dataset_name;
  opts.training_policy = cfg.training_policy;
  // The domain's shared memory, which exists before the agent does: a
  // directory created here would be one the GPU never maps rings from.
  {
    struct stat st;
    const std::string& dir = opts.writer.bounce_dir;
    if (::stat(dir.c_str(), &st) != 0) {
      Fail(where + ": bounce_dir " + dir + ": " + std::strerror(errno) +
           " (it must be this holder domain's shared-memory directory, where its bounce "
           "rings go and the GPU maps them from)");
    }
    if (!S_ISDIR(st.st_mode)) {
      Fail(where + ": bounce_dir " + dir + " is not a directory (it must be this holder "
           "domain's shared-memory directory)");
    }
  }
  auto dataset = Dataset::Open(cfg.dataset_path, cfg.dataset_format);
  if (!dataset.ok()) Fail(std::string(dataset.status().message()));
  // What this agent trusts (its binary, this configuration, the CA files it
  // names), measured into RTMR3 by the TDX backend before anything is served.
  auto measurement = MeasureDaemon(kProgram, "/proc/self/exe", json, where);
  if (!measurement.ok()) Fail(std::string(measurement.status().message()));
  auto att = MakeAttestationFromConfig(cfg.attestation, where + ": attestation",
                                       opts.domain, *measurement);
  if (!att.ok()) Fail(std::string(att.status().message()));
  SetLogPrefix("holder " + opts.name);
  GT_LOG(1, "dataset ", cfg.dataset_path, " (", (*dataset)->format(), ", ",
         (*dataset)->payload_bytes(), " bytes), attestation backend ", att->backend,
         ", RTMR3 ", HexEncode(measurement->rtmr3));
  // The campaign CA this agent trusts is the one it measured.
  {
    auto ca = measurement->File("/tls/ca", where + ": tls.ca");
    absl::Status same = ca.ok() ? RequireTlsCaBytes(cfg.tls, *ca) : ca.status();
    if (!same.ok()) Fail(std::string(same.message()));
  }
  auto creds = MakeServerCredentials(cfg.tls);
  if (!creds.ok()) Fail(std::string(creds.status().message()));
  // Only the named orchestrators get as far as a request body (api_limits.h).
  InstallRoleGate(creds->get(), HolderApiRoles(), {{kRoleOrchestrator, opts.orchestrator_names}},
                  RevocationListOf(cfg.tls));

  // One agent per holder and ring directory: a second one would share (and
  // on exit remove) the first's bounce ring. Held until exit.
  auto ring_lock = ExclusiveLock::Acquire(
      opts.writer.bounce_dir + "/gputravel-holder-" + opts.name + ".lock",
      "holder agent '" + opts.name + "' with bounce_dir " + opts.writer.bounce_dir);
  if (!ring_lock.ok()) Fail(std::string(ring_lock.status().message()));
  // With the lock held, any ring of this holder in the directory was left by
  // an earlier agent that was killed before it could remove it.
  auto orphans = BouncePool(opts.writer.bounce_dir, opts.name).RemoveOrphanedRings();
  if (!orphans.ok()) Fail(std::string(orphans.status().message()));
  if (*orphans > 0) {
    GT_LOG(0, "removed ", *orphans, " bounce ring(s) an earlier agent of holder '", opts.name,
           "' left in ", opts.writer.bounce_dir);
  }
  // Hand-off freshness across restarts: the last trip accepted per
  // orchestrator and GPU, in a private directory only this agent uses.
  absl::Status private_dir = MakePrivateStateDirectory(cfg.state_dir, "state_dir");
  if (!private_dir.ok()) Fail(std::string(private_dir.message()));
  auto state_lock = ExclusiveLock::Acquire(cfg.state_dir + "/holder.lock",
                                           "holder agent '" + opts.name + "' with state_dir " +
                                               cfg.state_dir);
  if (!state_lock.ok()) Fail(std::string(state_lock.status().message()));
  auto freshness = TripFreshness::Open(cfg.state_dir + "/freshness.json");
  if (!freshness.ok()) Fail(std::string(freshness.status().message()));
  opts.freshness = std::move(*freshness);
  // Metrics (metrics_listen; off without it): Provision outcomes, and the
  // orchestrator's evidence refused, counted around the verifier.
  std::unique_ptr<DaemonMetrics> metrics;
  std::unique_ptr<HolderMetrics> holder_metrics;
  Verifier* verifier = att->verifier.get();
  if (!cfg.metrics_listen.empty()) {
    auto m = DaemonMetrics::Start(cfg.metrics_listen, where + ": metrics_listen", verifier);
    if (!m.ok()) Fail(std::string(m.status().message()));
    metrics = *std::move(m);
    holder_metrics = std::make_unique<HolderMetrics>(metrics->registry());
    opts.metrics = holder_metrics.get();
    verifier = metrics->verifier();
    GT_LOG(1, "metrics on http://", metrics->address(), kMetricsPath);
  }
  HolderService service(opts, std::move(*dataset), att->attester.get(), verifier);
  ServeUntilSignal(kProgram, {{cfg.listen, {&service}, *creds, HolderApiLimits()}}, args.ready_file,
                   [&service] { service.RemoveBounceRing(); }, nullptr,
                   metrics ? metrics->address() : "");
}
