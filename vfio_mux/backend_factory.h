#ifndef GPUTRAVEL_VFIO_MUX_BACKEND_FACTORY_H_
#define GPUTRAVEL_VFIO_MUX_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "vfio_mux/routing_backend.h"

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

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_BACKEND_FACTORY_H_
