#include "holder_agent/holder_config.h"

#include "auth/caller_names.h"
#include "auth/identity.h"
#include "trainer/training_policy.h"
#include "metrics/metrics_exposer.h"
#include "util/files.h"
#include "util/json_fields.h"
#include "util/status_macros.h"

namespace gputravel {
namespace {

// A misspelt optional field would otherwise be a default silently taken.
const std::set<std::string> kFields = {
    "name",         "domain",     "listen",  "device_endpoint", "threads",
    "bounce_slots", "bounce_dir", "dataset", "attestation",     "tls",
    "training_policy", "state_dir", "orchestrator_names", "metrics_listen"};
const std::set<std::string> kDatasetFields = {"name", "path", "format"};

}  // namespace

absl::StatusOr<HolderConfig> ParseHolderConfig(const nlohmann::json& j,
                                               const std::string& where) {
  if (!j.is_object()) return absl::InvalidArgumentError(where + ": must be a JSON object");
  GT_RETURN_IF_ERROR(RefuseUnknownFields(j, kFields, where));
  HolderConfig cfg;
  cfg.training_policy = DefaultTrainingPolicy();
  GT_ASSIGN_OR_RETURN(cfg.name, JsonString(j, where, "name"));
  GT_ASSIGN_OR_RETURN(cfg.domain, JsonString(j, where, "domain"));
  GT_ASSIGN_OR_RETURN(cfg.listen, JsonString(j, where, "listen"));
  GT_ASSIGN_OR_RETURN(cfg.device_endpoint, JsonString(j, where, "device_endpoint"));
  GT_ASSIGN_OR_RETURN(cfg.state_dir, JsonString(j, where, "state_dir"));
  if (j.contains("metrics_listen")) {
    GT_ASSIGN_OR_RETURN(cfg.metrics_listen, JsonString(j, where, "metrics_listen"));
    GT_RETURN_IF_ERROR(CheckMetricsListen(cfg.metrics_listen, where + ": metrics_listen"));
  }
  if (!j.contains("orchestrator_names")) {
    return absl::InvalidArgumentError(
        where + ": missing 'orchestrator_names': the names of the orchestrator identities "
        "this holder answers, e.g. [\"orchestrator\"] (any other certificate of role "
        "orchestrator from the campaign CA is refused)");
  }
  GT_ASSIGN_OR_RETURN(cfg.orchestrator_names,
                      ParseCallerNames(j["orchestrator_names"], where + ": orchestrator_names"));
  if (j.contains("threads")) {
    auto t = JsonUint(j, where, "threads");
    if (!t.ok() || *t == 0 || *t > kMaxWriterThreads) {
      return absl::InvalidArgumentError(where + ": 'threads' must be 1.." +
                                        std::to_string(kMaxWriterThreads));
    }
    cfg.writer.threads = static_cast<int>(*t);
  }
  if (j.contains("bounce_slots")) {
    auto t = JsonUint(j, where, "bounce_slots");
    if (!t.ok() || *t == 0 || *t > 64) {
      return absl::InvalidArgumentError(where + ": 'bounce_slots' must be 1..64");
    }
    cfg.writer.slots = static_cast<uint32_t>(*t);
  }
  if (j.contains("bounce_dir")) {
    GT_ASSIGN_OR_RETURN(cfg.writer.bounce_dir, JsonString(j, where, "bounce_dir"));
  }
  if (!j.contains("dataset") || !j["dataset"].is_object()) {
    return absl::InvalidArgumentError(
        where + ": missing object 'dataset' ({\"name\", \"path\", \"format\"}: format "
        "optional, auto|llmc-tokens|raw)");
  }
  const auto& ds = j["dataset"];
  const std::string ds_where = where + ": dataset";
  GT_RETURN_IF_ERROR(RefuseUnknownFields(ds, kDatasetFields, ds_where));
  GT_ASSIGN_OR_RETURN(cfg.dataset_path, JsonString(ds, ds_where, "path"));
  GT_ASSIGN_OR_RETURN(cfg.dataset_name, JsonString(ds, ds_where, "name"));
  if (ds.contains("format")) {
    auto f = JsonString(ds, ds_where, "format");
    if (!f.ok()) {
      return absl::Status(f.status().code(),
                          std::string(f.status().message()) + " (auto, llmc-tokens or raw)");
    }
    cfg.dataset_format = *f;
  }
  if (j.contains("training_policy")) {
    GT_ASSIGN_OR_RETURN(cfg.training_policy,
                        ParseTrainingPolicy(j["training_policy"], where + ": training_policy"));
  }
  if (!j.contains("attestation") || !j["attestation"].is_object()) {
    return absl::InvalidArgumentError(where + ": missing object 'attestation'");
  }
  cfg.attestation = j["attestation"];
  if (!j.contains("tls")) {
    return absl::InvalidArgumentError(
        where + ": missing object 'tls' ({\"ca\", \"cert\", \"key\"}): every connection is mTLS");
  }
  GT_ASSIGN_OR_RETURN(cfg.tls, ParseTlsConfig(j["tls"], where + ": tls"));
  // The certificate must name this holder: the orchestrator checks it, so a
  // mismatch would only fail later and less clearly.
  auto me = LocalIdentity(cfg.tls);
  if (!me.ok()) {
    return absl::InvalidArgumentError(where + ": tls.cert: " + std::string(me.status().message()));
  }
  if (*me != Identity{kRoleHolder, cfg.name}) {
    return absl::InvalidArgumentError(where + ": tls.cert is for " + DescribeIdentity(*me) +
                                      ", this agent is holder '" + cfg.name + "'");
  }
  return cfg;
}

}  // namespace gputravel
