#include "vfio_mux/backend_factory.h"

#include <map>

#include "util/files.h"
#include "vfio_mux/emulated_backend.h"

namespace gputravel {

absl::StatusOr<std::unique_ptr<RoutingBackend>> MakeRoutingBackend(
    const nlohmann::json& config, const std::string& where) {
  auto backend = JsonString(config, where, "backend");
  if (!backend.ok()) return backend.status();
  if (!config.contains("gpus") || !config["gpus"].is_array() || config["gpus"].empty()) {
    return absl::InvalidArgumentError(where + ": 'gpus' must be a non-empty array");
  }
  if (*backend == "emulated") {
    std::map<std::string, std::string> endpoints;
    for (const auto& g : config["gpus"]) {
      auto name = JsonString(g, where + ": gpus[]", "name");
      if (!name.ok()) return name.status();
      auto ep = JsonString(g, where + ": gpus[" + *name + "]", "admin_endpoint");
      if (!ep.ok()) return ep.status();
      endpoints[*name] = *ep;
    }
    return std::unique_ptr<RoutingBackend>(new EmulatedBackend(endpoints));
  }
  return absl::InvalidArgumentError(where + ": unknown MUX backend '" + *backend +
                                    "' (use emulated, sysfs or libvirt)");
}

}  // namespace gputravel
