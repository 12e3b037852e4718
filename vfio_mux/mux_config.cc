#include "vfio_mux/mux_config.h"

#include "auth/identity.h"
#include "metrics/metrics_exposer.h"
#include "util/files.h"
#include "util/status_macros.h"
#include "vfio_mux/mux_policy.h"

namespace gputravel {

absl::StatusOr<MuxConfig> ParseMuxConfig(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return absl::InvalidArgumentError(where + ": must be a JSON object");
  MuxConfig cfg;
  GT_ASSIGN_OR_RETURN(cfg.listen, JsonString(j, where, "listen"));
  if (j.contains("metrics_listen")) {
    GT_ASSIGN_OR_RETURN(cfg.metrics_listen, JsonString(j, where, "metrics_listen"));
    GT_RETURN_IF_ERROR(CheckMetricsListen(cfg.metrics_listen, where + ": metrics_listen"));
  }
  GT_ASSIGN_OR_RETURN(cfg.state_file, JsonString(j, where, "state_file"));
  GT_ASSIGN_OR_RETURN(cfg.audit_log, JsonString(j, where, "audit_log"));
  // Who this MUX is, before it touches a GPU or its journal: a certificate
  // of another role is a configuration error, refused with no side effect.
  if (!j.contains("tls")) {
    return absl::InvalidArgumentError(where + ": missing object 'tls' ({\"ca\", \"cert\", "
                                      "\"key\"}): every connection is mTLS");
  }
  GT_ASSIGN_OR_RETURN(cfg.tls, ParseTlsConfig(j["tls"], where + ": tls"));
  auto me = LocalIdentity(cfg.tls);
  if (!me.ok()) return me.status();
  if (me->role != kRoleMux) {
    return absl::InvalidArgumentError(where + ": tls.cert is for " + DescribeIdentity(*me) +
                                      "; the MUX needs a certificate of role mux");
  }
  // What the administrator allows, before any GPU is touched.
  GT_ASSIGN_OR_RETURN(cfg.domains, ParseMuxDomains(j, where));
  GT_ASSIGN_OR_RETURN(cfg.callers, MuxCallers::FromConfig(j, where));
  GT_ASSIGN_OR_RETURN(cfg.backend, ParseRoutingBackendConfig(j, where));
  return cfg;
}

}  // namespace gputravel
