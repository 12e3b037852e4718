#ifndef GPUTRAVEL_VFIO_MUX_SYSFS_VFIO_PREPARATION_H_
#define GPUTRAVEL_VFIO_MUX_SYSFS_VFIO_PREPARATION_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "vfio_mux/sysfs/pci_sysfs.h"

namespace gputravel {

struct VfioPreparationOptions {
  // Read everything and report each write instead of making it.
  bool dry_run = false;
  // Receives one line per finding or step ("IOMMU group 42 is viable",
  // "would write 'vfio-pci' to PATH (setting driver_override to vfio-pci)").
  // Null: silent.
  std::function<void(const std::string&)> report;
};

// What PrepareGpuForVfio found.
struct VfioPreparation {
  PciDeviceInfo found;        // the device before any write
  std::string reset_methods;  // reset_method as found; "" when already disabled
};

// The one sequence that readies a GPU for the MUX, used by
// `vfio_mux prepare` (deploy/host/prepare_host.sh), by the sysfs backend's
// Prepare and prepare_on_start:
//   1. the device is an NVIDIA GPU (vendor 0x10de, class 0x03xxxx);
//   2. its IOMMU group will be viable once it is on vfio-pci (checked before
//      anything is written);
//   3. BindToVfio: driver_override, unbind, drivers_probe, each verified;
//   4. the group is viable (now as bound);
//   5. reset disabled (reset_method emptied), the earlier list returned.
// Idempotent. With dry_run, steps 3 and 5 report PciSysfs's planned writes
// and nothing is written; step 4 is then the check of step 2.
absl::StatusOr<VfioPreparation> PrepareGpuForVfio(
    PciSysfs& sysfs, absl::string_view bdf,
    const VfioPreparationOptions& options = {});

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_SYSFS_VFIO_PREPARATION_H_
