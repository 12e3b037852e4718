#ifndef GPUTRAVEL_VFIO_MUX_ROUTING_BACKEND_H_
#define GPUTRAVEL_VFIO_MUX_ROUTING_BACKEND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gputravel {

// One GPU a backend can route.
struct GpuDevice {
  std::string name;   // configuration name ("gpu0") or PCI BDF
  std::string bdf;    // PCI address, e.g. "0000:98:00.0"; empty when emulated
  std::string iommu_group;  // IOMMU group number; empty when emulated
  std::string driver;       // bound driver ("vfio-pci", "nvidia", ""), if known
};

// The mechanism that moves a GPU between trust domains. The MUX daemon owns
// ordering and fencing (vfio_mux/route_table.h); a backend only performs moves.
// Implementations: emulated (the emulated device's admin socket), sysfs
// (vfio-pci binding), libvirt (hostdev attach/detach). Nothing above this
// interface knows which one it has. Errors name the device and the step.
class RoutingBackend {
 public:
  virtual ~RoutingBackend() = default;
  // "emulated", "sysfs" or "libvirt".
  virtual std::string Name() const = 0;
  // GPUs the backend controls.
  virtual absl::StatusOr<std::vector<GpuDevice>> ListGpus() = 0;
  // Detaches `gpu` from `from_domain` (may be empty: unrouted) and attaches it
  // to `to_domain` (may be empty: leave unrouted). Must not return OK until the
  // move is confirmed (read back from the kernel/libvirt/device). The route
  // table calls it even when `from_domain == to_domain` (it may be behind the
  // device after a failed or unjournaled move): then it confirms that the GPU
  // is with `to_domain` and puts it there if it can, or says where it is; for
  // an empty `to_domain` that nothing holds the GPU (an unroute's checks).
  virtual absl::Status Move(const std::string& gpu, const std::string& from_domain,
                            const std::string& to_domain) = 0;
  // Function-level reset (wipes the CC session and device memory).
  virtual absl::Status Reset(const std::string& gpu) = 0;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_ROUTING_BACKEND_H_
