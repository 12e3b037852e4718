#ifndef GPUTRAVEL_VFIO_MUX_REAL_KERNEL_GUEST_MACHINE_H_
#define GPUTRAVEL_VFIO_MUX_REAL_KERNEL_GUEST_MACHINE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gputravel {

// The PCI functions of the machine run_scenario.sh boots, by vendor:device,
// and direct sysfs access for the guest tests to check what the MUX did
// (never through the code under test). Test-only.
//
// Layout (qemu q35 with intel-iommu):
//   root port -> virtio-net (modern, 1af4:1041): alone in its IOMMU group,
//                bound to virtio-pci; stands in for GPU "gpu0".
//   root port -> PCIe-to-PCI bridge (1b36:000e) -> edu (1234:11e8, no driver)
//                and virtio-net (legacy, 1af4:1000, virtio-pci): one IOMMU
//                group of three; edu stands in for GPU "gpu1".
//   virtio-blk on the root bus: the ext4 file system mounted at /data.
//   The libvirt scenarios only: a second virtio-blk, the root file system
//   (/dev/vdb), 2 GiB and two vCPUs.
inline constexpr char kStandInVendor[] = "0x1af4";
inline constexpr char kStandInDevice[] = "0x1041";
inline constexpr char kEduVendor[] = "0x1234";
inline constexpr char kEduDevice[] = "0x11e8";
inline constexpr char kSiblingVendor[] = "0x1af4";
inline constexpr char kSiblingDevice[] = "0x1000";
inline constexpr char kBridgeVendor[] = "0x1b36";
inline constexpr char kBridgeDevice[] = "0x000e";
// Where the guest's init mounts the test disk (ext4).
inline constexpr char kDataDir[] = "/data";

// The BDF of the one function with this vendor and device ID.
absl::StatusOr<std::string> FindPciFunction(const std::string& vendor,
                                            const std::string& device);
// /sys/bus/pci/devices/BDF/ATTR, whitespace-trimmed; "<error>" if unreadable.
std::string PciAttr(const std::string& bdf, const std::string& attr);
// The bound driver's name, "" when none.
std::string PciDriver(const std::string& bdf);
// One write(2) to a sysfs file.
absl::Status SysfsWrite(const std::string& path, const std::string& data);
// The IOMMU group number, "" when none.
std::string PciIommuGroup(const std::string& bdf);

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_REAL_KERNEL_GUEST_MACHINE_H_
