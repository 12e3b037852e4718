#ifndef GPUTRAVEL_VFIO_MUX_MUX_CONFIG_H_
#define GPUTRAVEL_VFIO_MUX_MUX_CONFIG_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "auth/tls_config.h"
#include "nlohmann/json.hpp"
#include "vfio_mux/backend_factory.h"
#include "vfio_mux/mux_callers.h"

namespace gputravel {

// The MUX's configuration (docs/operations-host.md), parsed and checked
// before the MUX touches a GPU or its journal.
struct MuxConfig {
  std::string listen;
  std::string state_file;  // the route table
  std::string audit_log;   // the route journal
  TlsFiles tls;            // checked; the certificate's role is mux
  std::set<std::string> domains;  // the only domains routed to
  MuxCallers callers;             // the pinned caller certificates
  RoutingBackendConfig backend;   // parsed, not made
  // Prometheus metrics over HTTP on 127.0.0.1:PORT (metrics/); empty: off.
  std::string metrics_listen;
};

// Parses `j` (read from `where`); errors name `where` and the field.
absl::StatusOr<MuxConfig> ParseMuxConfig(const nlohmann::json& j, const std::string& where);

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_MUX_CONFIG_H_
