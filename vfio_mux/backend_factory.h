#ifndef GPUTRAVEL_VFIO_MUX_BACKEND_FACTORY_H_
#define GPUTRAVEL_VFIO_MUX_BACKEND_FACTORY_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "vfio_mux/libvirt/libvirt_backend.h"
#include "vfio_mux/routing_backend.h"
#include "vfio_mux/sysfs/sysfs_backend.h"

namespace gputravel {

// Builds the routing backend named by the MUX configuration's required
// "backend" field. There is no default: the emulated backend is reachable
// only when a configuration says "emulated". Every backend routes only to
// the required top-level "domains" (ParseMuxDomains) and only the GPUs
// listed for it (a non-empty list; nothing is discovered):
//   emulated: "gpus": [{"name", "admin_endpoint"}]
//   sysfs:    "sysfs": {"sysfs_root", "proc_root", "driver_timeout_ms",
//                       "prepare_on_start", "gpus": [{"name", "bdf"}]}
//   libvirt:  "libvirt": {"uri", "detach_timeout_ms", "check_sysfs", "require_tdx",
//                         "domain_names": {configured domain: libvirt name},
//                         "gpus": [{"name", "bdf", "alias"}]}
// (docs/operations-host.md).
absl::StatusOr<std::unique_ptr<RoutingBackend>> MakeRoutingBackend(
    const nlohmann::json& config, const std::string& where);

// The same in two steps: the configuration parsed and checked, touching
// nothing of the host (`gputravel config check` stops there), then the
// backend made from it (sysfs and libvirt inspect the host then).
struct RoutingBackendConfig {
  std::string backend;  // "emulated", "sysfs" or "libvirt"
  SysfsBackendOptions sysfs;
  LibvirtBackendOptions libvirt;
  std::map<std::string, std::string> emulated_admin_endpoints;  // GPU name -> endpoint
  std::set<std::string> emulated_domains;
};
absl::StatusOr<RoutingBackendConfig> ParseRoutingBackendConfig(const nlohmann::json& config,
                                                               const std::string& where);
absl::StatusOr<std::unique_ptr<RoutingBackend>> MakeRoutingBackend(
    const RoutingBackendConfig& config);

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_BACKEND_FACTORY_H_
