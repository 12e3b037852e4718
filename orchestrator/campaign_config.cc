#include "orchestrator/campaign_config.h"

#include <set>

#include "util/files.h"

namespace gputravel {
namespace {

#define ASSIGN_OR_RETURN_CFG(lhs, expr) \
  {                                     \
    auto _r = (expr);                   \
    if (!_r.ok()) return _r.status();   \
    lhs = *_r;                          \
  }

absl::Status ParseCampaign(const nlohmann::json& c, const std::string& at,
                           CampaignConfig* out) {
  ASSIGN_OR_RETURN_CFG(out->name, JsonString(c, at, "name"));
  ASSIGN_OR_RETURN_CFG(out->buffer_bytes, JsonUint(c, at, "buffer_bytes"));
  if (out->buffer_bytes == 0 || out->buffer_bytes % 32 != 0) {
    return absl::InvalidArgumentError(at + ".buffer_bytes: must be a positive multiple of 32");
  }
  if (c.contains("chunk_bytes")) {
    uint64_t v;
    ASSIGN_OR_RETURN_CFG(v, JsonUint(c, at, "chunk_bytes"));
    if (v == 0 || v % 32 != 0 || v > (64u << 20)) {
      return absl::InvalidArgumentError(at + ".chunk_bytes: must be a multiple of 32 up to 64 MiB");
    }
    out->chunk_bytes = static_cast<uint32_t>(v);
  }
  if (c.contains("rounds")) {
    uint64_t v;
    ASSIGN_OR_RETURN_CFG(v, JsonUint(c, at, "rounds"));
    if (v == 0 || v > 1000000) return absl::InvalidArgumentError(at + ".rounds: must be 1..1000000");
    out->rounds = static_cast<uint32_t>(v);
  }
  if (c.contains("trip_timeout_seconds")) {
    if (!c["trip_timeout_seconds"].is_number() || c["trip_timeout_seconds"].get<double>() <= 0) {
      return absl::InvalidArgumentError(at + ".trip_timeout_seconds: must be a positive number");
    }
    out->trip_timeout_seconds = c["trip_timeout_seconds"].get<double>();
  }
  if (!c.contains("holders") || !c["holders"].is_array() || c["holders"].empty()) {
    return absl::InvalidArgumentError(at + ".holders: must be a non-empty array");
  }
  std::set<std::string> names, domains;
  for (size_t i = 0; i < c["holders"].size(); ++i) {
    const auto& h = c["holders"][i];
    std::string hat = at + ".holders[" + std::to_string(i) + "]";
    HolderConfig hc;
    ASSIGN_OR_RETURN_CFG(hc.name, JsonString(h, hat, "name"));
    ASSIGN_OR_RETURN_CFG(hc.endpoint, JsonString(h, hat, "endpoint"));
    ASSIGN_OR_RETURN_CFG(hc.domain, JsonString(h, hat, "domain"));
    if (hc.name.empty()) return absl::InvalidArgumentError(hat + ".name: must not be empty");
    if (!names.insert(hc.name).second) {
      return absl::InvalidArgumentError(hat + ".name: holder '" + hc.name + "' appears twice");
    }
    if (!domains.insert(hc.domain).second) {
      return absl::InvalidArgumentError(hat + ".domain: domain '" + hc.domain +
                                        "' is used by two holders");
    }
    out->holders.push_back(hc);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OrchestratorConfig> ParseOrchestratorConfig(const nlohmann::json& j,
                                                           const std::string& where) {
  OrchestratorConfig cfg;
  ASSIGN_OR_RETURN_CFG(cfg.listen, JsonString(j, where, "listen"));
  ASSIGN_OR_RETURN_CFG(cfg.domain, JsonString(j, where, "domain"));
  ASSIGN_OR_RETURN_CFG(cfg.state_dir, JsonString(j, where, "state_dir"));
  ASSIGN_OR_RETURN_CFG(cfg.mux_endpoint, JsonString(j, where, "mux_endpoint"));
  if (!j.contains("gpu") || !j["gpu"].is_object()) {
    return absl::InvalidArgumentError(where + ": missing object 'gpu'");
  }
  const std::string gat = where + ": gpu";
  ASSIGN_OR_RETURN_CFG(cfg.gpu.name, JsonString(j["gpu"], gat, "name"));
  ASSIGN_OR_RETURN_CFG(cfg.gpu.device_endpoint, JsonString(j["gpu"], gat, "device_endpoint"));
  ASSIGN_OR_RETURN_CFG(cfg.gpu.device_ca, JsonString(j["gpu"], gat, "device_ca"));
  if (j["gpu"].contains("serial")) {
    ASSIGN_OR_RETURN_CFG(cfg.gpu.serial, JsonString(j["gpu"], gat, "serial"));
  }
  if (!j.contains("attestation") || !j["attestation"].is_object()) {
    return absl::InvalidArgumentError(where + ": missing object 'attestation'");
  }
  cfg.attestation = j["attestation"];
  if (!j.contains("campaigns") || !j["campaigns"].is_array() || j["campaigns"].empty()) {
    return absl::InvalidArgumentError(where + ": 'campaigns' must be a non-empty array");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < j["campaigns"].size(); ++i) {
    CampaignConfig c;
    absl::Status s = ParseCampaign(j["campaigns"][i],
                                   where + ": campaigns[" + std::to_string(i) + "]", &c);
    if (!s.ok()) return s;
    if (!names.insert(c.name).second) {
      return absl::InvalidArgumentError(where + ": campaign '" + c.name + "' appears twice");
    }
    cfg.campaigns.push_back(std::move(c));
  }
  return cfg;
}

}  // namespace gputravel
