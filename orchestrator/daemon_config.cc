#include "orchestrator/daemon_config.h"

#include <set>

#include "metrics/metrics_exposer.h"
#include "util/files.h"
#include "util/json_fields.h"
#include "util/status_macros.h"

namespace gputravel {
namespace {

const std::set<std::string> kKnownFields = {"listen",      "domain",     "state_dir",
                                            "mux_endpoint", "mux_name",   "gpus",
                                            "attestation",  "tls",        "eval_tokens",
                                            "checkpoint_key_file", "trainer_listen",
                                            "metrics_listen"};
const std::set<std::string> kKnownGpuFields = {"name", "device_endpoint", "device_ca",
                                               "serial", "heartbeat_period_seconds"};

}  // namespace

absl::Status CheckTrainerListen(const std::string& endpoint, const std::string& where) {
  if (endpoint.rfind("unix:/", 0) != 0 || endpoint.size() <= 6) {
    return absl::InvalidArgumentError(
        where + ": '" + endpoint + "' is not \"unix:/absolute/path\": the trainer listener "
        "serves plaintext windows and is a Unix socket inside the orchestrator's TD only, "
        "never a TCP port");
  }
  return absl::OkStatus();
}

absl::StatusOr<OrchestratorConfig> ParseOrchestratorConfig(const nlohmann::json& j,
                                                           const std::string& where) {
  if (!j.is_object()) return absl::InvalidArgumentError(where + ": must be a JSON object");
  absl::Status s = RefuseUnknownFields(j, kKnownFields, where);
  if (!s.ok()) return s;
  OrchestratorConfig cfg;
  GT_ASSIGN_OR_RETURN(cfg.listen, JsonString(j, where, "listen"));
  GT_ASSIGN_OR_RETURN(cfg.domain, JsonString(j, where, "domain"));
  GT_ASSIGN_OR_RETURN(cfg.state_dir, JsonString(j, where, "state_dir"));
  GT_ASSIGN_OR_RETURN(cfg.mux_endpoint, JsonString(j, where, "mux_endpoint"));
  if (j.contains("mux_name")) {
    GT_ASSIGN_OR_RETURN(cfg.mux_name, JsonString(j, where, "mux_name"));
  }
  if (j.contains("trainer_listen")) {
    GT_ASSIGN_OR_RETURN(cfg.trainer_listen, JsonString(j, where, "trainer_listen"));
    GT_RETURN_IF_ERROR(CheckTrainerListen(cfg.trainer_listen, where + ": trainer_listen"));
  }
  if (j.contains("metrics_listen")) {
    GT_ASSIGN_OR_RETURN(cfg.metrics_listen, JsonString(j, where, "metrics_listen"));
    GT_RETURN_IF_ERROR(CheckMetricsListen(cfg.metrics_listen, where + ": metrics_listen"));
  }
  if (j.contains("eval_tokens")) {
    GT_ASSIGN_OR_RETURN(cfg.eval_tokens, JsonString(j, where, "eval_tokens"));
  }
  cfg.checkpoint_key_file = cfg.state_dir + "/checkpoint.key";
  if (j.contains("checkpoint_key_file")) {
    GT_ASSIGN_OR_RETURN(cfg.checkpoint_key_file, JsonString(j, where, "checkpoint_key_file"));
  }
  if (!j.contains("gpus") || !j["gpus"].is_array() || j["gpus"].empty()) {
    return absl::InvalidArgumentError(where + ": gpus: must be a non-empty array");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < j["gpus"].size(); ++i) {
    const auto& g = j["gpus"][i];
    const std::string gat = where + ": gpus[" + std::to_string(i) + "]";
    if (!g.is_object()) return absl::InvalidArgumentError(gat + ": must be an object");
    s = RefuseUnknownFields(g, kKnownGpuFields, gat);
    if (!s.ok()) return s;
    GpuConfig gc;
    GT_ASSIGN_OR_RETURN(gc.name, JsonString(g, gat, "name"));
    GT_ASSIGN_OR_RETURN(gc.device_endpoint, JsonString(g, gat, "device_endpoint"));
    GT_ASSIGN_OR_RETURN(gc.device_ca, JsonString(g, gat, "device_ca"));
    if (g.contains("serial")) {
      GT_ASSIGN_OR_RETURN(gc.serial, JsonString(g, gat, "serial"));
    }
    if (g.contains("heartbeat_period_seconds")) {
      uint64_t hb = 0;
      GT_ASSIGN_OR_RETURN(hb, JsonUint(g, gat, "heartbeat_period_seconds"));
      if (hb != 0 && (hb < 4 || hb > 255)) {
        return absl::InvalidArgumentError(
            gat + ".heartbeat_period_seconds: " + std::to_string(hb) +
            " is not 0 (off) or 4..255 (the device's RmConfComputeHeartbeatPeriod)");
      }
      gc.heartbeat_period_seconds = static_cast<uint32_t>(hb);
    }
    if (gc.name.empty()) return absl::InvalidArgumentError(gat + ".name: must not be empty");
    if (!names.insert(gc.name).second) {
      return absl::InvalidArgumentError(gat + ".name: GPU '" + gc.name + "' appears twice");
    }
    cfg.gpus.push_back(std::move(gc));
  }
  if (!j.contains("attestation") || !j["attestation"].is_object()) {
    return absl::InvalidArgumentError(where + ": attestation: missing object");
  }
  cfg.attestation = j["attestation"];
  // P5: the GPU is part of what the orchestrator trusts. A GPU without a
  // pinned serial would be whichever device of the CA the host shows first,
  // and two entries could name one device; only a development configuration
  // (which also says so for attestation) may leave the serial out.
  const bool development = cfg.attestation.contains("allow_insecure_dev_attestation") &&
                            cfg.attestation["allow_insecure_dev_attestation"] == true;
  std::set<std::string> serials, endpoints;
  for (size_t i = 0; i < cfg.gpus.size(); ++i) {
    const GpuConfig& gc = cfg.gpus[i];
    const std::string gat = where + ": gpus[" + std::to_string(i) + "]";
    if (gc.serial.empty() && !development) {
      return absl::InvalidArgumentError(
          gat + ".serial: required: pin the serial of GPU '" + gc.name +
          "' (the common name of its device certificate), so that no other device of the "
          "CA, and no device twice, is accepted in its place; only a development "
          "configuration (attestation.allow_insecure_dev_attestation) may omit it");
    }
    if (!gc.serial.empty() && !serials.insert(gc.serial).second) {
      return absl::InvalidArgumentError(gat + ".serial: GPU serial '" + gc.serial +
                                        "' is pinned by two entries: one device, one entry");
    }
    if (!endpoints.insert(gc.device_endpoint).second) {
      return absl::InvalidArgumentError(gat + ".device_endpoint: '" + gc.device_endpoint +
                                        "' is used by two entries: one device, one entry");
    }
  }
  if (!j.contains("tls")) {
    return absl::InvalidArgumentError(
        where + ": tls: missing object ({\"ca\", \"cert\", \"key\"}); every connection is mTLS");
  }
  GT_ASSIGN_OR_RETURN(cfg.tls, ParseTlsConfig(j["tls"], where + ": tls"));
  // Our own certificate must say we are the orchestrator: holders and the
  // MUX accept only that role, so anything else would fail later, obscurely.
  auto me = LocalIdentity(cfg.tls);
  if (!me.ok()) return absl::InvalidArgumentError(where + ": tls.cert: " + std::string(me.status().message()));
  if (me->role != kRoleOrchestrator) {
    return absl::InvalidArgumentError(where + ": tls.cert: is for " + DescribeIdentity(*me) +
                                      "; the orchestrator needs a certificate of role orchestrator");
  }
  return cfg;
}

}  // namespace gputravel
