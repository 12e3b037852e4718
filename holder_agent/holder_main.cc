// holder_agent: the data holder's agent inside its TD.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include "holder_agent/api_limits.h"
#include "holder_agent/dataset.h"
#include "holder_agent/holder_metrics.h"
#include "holder_agent/holder_service.h"
#include "auth/caller_names.h"
#include "holder_agent/trip_freshness.h"
#include "auth/identity.h"
#include "auth/role_gate.h"
#include "auth/tls_config.h"
#include "device/bounce_pool.h"
#include "keyxfer/attestation_config.h"
#include "keyxfer/runtime_measurement.h"
#include "metrics/daemon_metrics.h"
#include "trainer/training_policy.h"
#include "util/daemon_main.h"
#include "util/exclusive_lock.h"
#include "util/files.h"
#include "util/hex.h"
#include "util/json_fields.h"
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
  nlohmann::json cfg = ReadConfigOrExit(kProgram, where);
  // A misspelt optional field would otherwise be a default silently taken.
  // (Every configuration cli/emulated_stack.cc writes, and
  // deploy/examples/holder-tdx.json, use only these.)
  const std::set<std::string> kFields = {
      "name",         "domain",     "listen",  "device_endpoint", "threads",
      "bounce_slots", "bounce_dir", "dataset", "attestation",     "tls",
      "training_policy", "state_dir", "orchestrator_names", "metrics_listen"};
  const std::set<std::string> kDatasetFields = {"name", "path", "format"};
  absl::Status known = RefuseUnknownFields(cfg, kFields, where);
  if (!known.ok()) Fail(std::string(known.message()));
  HolderOptions opts;
  auto name = JsonString(cfg, where, "name");
  auto domain = JsonString(cfg, where, "domain");
  auto listen = JsonString(cfg, where, "listen");
  auto device = JsonString(cfg, where, "device_endpoint");
  auto state_dir = JsonString(cfg, where, "state_dir");
  for (const absl::Status& s : {name.status(), domain.status(), listen.status(), device.status(),
                                state_dir.status()}) {
    if (!s.ok()) Fail(std::string(s.message()));
  }
  opts.name = *name;
  opts.domain = *domain;
  opts.device_endpoint = *device;
  if (!cfg.contains("orchestrator_names")) {
    Fail(where + ": missing 'orchestrator_names': the names of the orchestrator identities "
         "this holder answers, e.g. [\"orchestrator\"] (any other certificate of role "
         "orchestrator from the campaign CA is refused)");
  }
  auto orchestrators = ParseCallerNames(cfg["orchestrator_names"], where + ": orchestrator_names");
  if (!orchestrators.ok()) Fail(std::string(orchestrators.status().message()));
  opts.orchestrator_names = *orchestrators;
  if (cfg.contains("threads")) {
    auto t = JsonUint(cfg, where, "threads");
    if (!t.ok() || *t == 0 || *t > kMaxWriterThreads) {
      Fail(where + ": 'threads' must be 1.." + std::to_string(kMaxWriterThreads));
    }
    opts.writer.threads = static_cast<int>(*t);
  }
  if (cfg.contains("bounce_slots")) {
    auto t = JsonUint(cfg, where, "bounce_slots");
    if (!t.ok() || *t == 0 || *t > 64) Fail(where + ": 'bounce_slots' must be 1..64");
    opts.writer.slots = static_cast<uint32_t>(*t);
  }
  if (cfg.contains("bounce_dir")) {
    auto d = JsonString(cfg, where, "bounce_dir");
    if (!d.ok()) Fail(std::string(d.status().message()));
    opts.writer.bounce_dir = *d;
  }
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
  if (!cfg.contains("dataset") || !cfg["dataset"].is_object()) {
    Fail(where + ": missing object 'dataset' ({\"name\", \"path\", \"format\"}: format "
         "optional, auto|llmc-tokens|raw)");
  }
  const auto& ds = cfg["dataset"];
  known = RefuseUnknownFields(ds, kDatasetFields, where + ": dataset");
  if (!known.ok()) Fail(std::string(known.message()));
  auto ds_path = JsonString(ds, where + ": dataset", "path");
  if (!ds_path.ok()) Fail(std::string(ds_path.status().message()));
  auto ds_name = JsonString(ds, where + ": dataset", "name");
  if (!ds_name.ok()) Fail(std::string(ds_name.status().message()));
  opts.dataset_name = *ds_name;
  std::string fmt = "auto";
  if (ds.contains("format")) {
    auto f = JsonString(ds, where + ": dataset", "format");
    if (!f.ok()) {
      Fail(std::string(f.status().message()) + " (auto, llmc-tokens or raw)");
    }
    fmt = *f;
  }
  if (cfg.contains("training_policy")) {
    auto policy = ParseTrainingPolicy(cfg["training_policy"], where + ": training_policy");
    if (!policy.ok()) Fail(std::string(policy.status().message()));
    opts.training_policy = *policy;
  }
  auto dataset = Dataset::Open(*ds_path, fmt);
  if (!dataset.ok()) Fail(std::string(dataset.status().message()));
  if (!cfg.contains("attestation")) Fail(where + ": missing object 'attestation'");
  // What this agent trusts (its binary, this configuration, the CA files it
  // names), measured into RTMR3 by the TDX backend before anything is served.
  auto measurement = MeasureDaemon(kProgram, "/proc/self/exe", cfg, where);
  if (!measurement.ok()) Fail(std::string(measurement.status().message()));
  auto att = MakeAttestationFromConfig(cfg["attestation"], where + ": attestation",
                                       opts.domain, *measurement);
  if (!att.ok()) Fail(std::string(att.status().message()));
  SetLogPrefix("holder " + opts.name);
  GT_LOG(1, "dataset ", *ds_path, " (", (*dataset)->format(), ", ",
         (*dataset)->payload_bytes(), " bytes), attestation backend ", att->backend,
         ", RTMR3 ", HexEncode(measurement->rtmr3));

  if (!cfg.contains("tls")) {
    Fail(where + ": missing object 'tls' ({\"ca\", \"cert\", \"key\"}): every connection is mTLS");
  }
  auto tls = ParseTlsConfig(cfg["tls"], where + ": tls");
  if (!tls.ok()) Fail(std::string(tls.status().message()));
  // The campaign CA this agent trusts is the one it measured.
  {
    auto ca = measurement->File("/tls/ca", where + ": tls.ca");
    absl::Status same = ca.ok() ? RequireTlsCaBytes(*tls, *ca) : ca.status();
    if (!same.ok()) Fail(std::string(same.message()));
  }
  // The certificate must name this holder: the orchestrator checks it, so a
  // mismatch would only fail later and less clearly.
  auto cert_pem = ReadFile(tls->cert);
  if (!cert_pem.ok()) Fail(std::string(cert_pem.status().message()));
  auto me = IdentityFromCertificate(*cert_pem);
  if (!me.ok()) Fail(tls->cert + ": " + std::string(me.status().message()));
  if (*me != Identity{kRoleHolder, opts.name}) {
    Fail(where + ": tls.cert is for " + DescribeIdentity(*me) + ", this agent is holder '" +
         opts.name + "'");
  }
  auto creds = MakeServerCredentials(*tls);
  if (!creds.ok()) Fail(std::string(creds.status().message()));
  // Only the named orchestrators get as far as a request body (api_limits.h).
  InstallRoleGate(creds->get(), HolderApiRoles(), {{kRoleOrchestrator, opts.orchestrator_names}},
                  RevocationListOf(*tls));

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
  if (::mkdir(state_dir->c_str(), 0700) != 0 && errno != EEXIST) {
    Fail("cannot create state_dir " + *state_dir + ": " + std::strerror(errno));
  }
  absl::Status private_dir = RequirePrivateDirectory(*state_dir, "state_dir");
  if (!private_dir.ok()) Fail(std::string(private_dir.message()));
  auto state_lock = ExclusiveLock::Acquire(*state_dir + "/holder.lock",
                                           "holder agent '" + opts.name + "' with state_dir " +
                                               *state_dir);
  if (!state_lock.ok()) Fail(std::string(state_lock.status().message()));
  auto freshness = TripFreshness::Open(*state_dir + "/freshness.json");
  if (!freshness.ok()) Fail(std::string(freshness.status().message()));
  opts.freshness = std::move(*freshness);
  // Metrics (metrics_listen; off without it): Provision outcomes, and the
  // orchestrator's evidence refused, counted around the verifier.
  std::unique_ptr<DaemonMetrics> metrics;
  std::unique_ptr<HolderMetrics> holder_metrics;
  Verifier* verifier = att->verifier.get();
  if (cfg.contains("metrics_listen")) {
    auto metrics_listen = JsonString(cfg, where, "metrics_listen");
    if (!metrics_listen.ok()) Fail(std::string(metrics_listen.status().message()));
    auto m = DaemonMetrics::Start(*metrics_listen, where + ": metrics_listen", verifier);
    if (!m.ok()) Fail(std::string(m.status().message()));
    metrics = *std::move(m);
    holder_metrics = std::make_unique<HolderMetrics>(metrics->registry());
    opts.metrics = holder_metrics.get();
    verifier = metrics->verifier();
    GT_LOG(1, "metrics on http://", metrics->address(), kMetricsPath);
  }
  HolderService service(opts, std::move(*dataset), att->attester.get(), verifier);
  ServeUntilSignal(kProgram, {{*listen, {&service}, *creds, HolderApiLimits()}}, args.ready_file,
                   [&service] { service.RemoveBounceRing(); }, nullptr,
                   metrics ? metrics->address() : "");
}
