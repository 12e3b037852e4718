#ifndef GPUTRAVEL_VFIO_MUX_REAL_KERNEL_STAND_IN_SYSFS_H_
#define GPUTRAVEL_VFIO_MUX_REAL_KERNEL_STAND_IN_SYSFS_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "vfio_mux/sysfs/sysfs_fs.h"

namespace gputravel {

// The real kernel's sysfs, with named PCI functions standing in for H100s.
//
// QEMU cannot give an emulated device NVIDIA's vendor ID, and the sysfs
// backend routes only NVIDIA GPUs. This SysfsFs passes every operation to the
// real file system unchanged, except reads of a stand-in's `vendor`,
// `device` and `class` under SYSFS_ROOT/bus/pci/devices/BDF/, which answer
// those of an H100 PCIe (0x10de, 0x2331, 0x030200). Binding, unbinding,
// probing, IOMMU groups, reset_method, reset and the VFIO nodes are the
// kernel's own. Test-only: linked only into the real-kernel guest tests.
class StandInSysfsFs : public SysfsFs {
 public:
  StandInSysfsFs(std::string sysfs_root, std::set<std::string> stand_in_bdfs);

  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::Status WriteFile(const std::string& path, absl::string_view data) override;
  absl::StatusOr<std::string> ReadLink(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  bool Exists(const std::string& path) override;
  absl::StatusOr<uint64_t> CharDeviceNumber(const std::string& path) override;

 private:
  const std::string devices_dir_;  // SYSFS_ROOT/bus/pci/devices/
  const std::set<std::string> stand_ins_;
  const std::shared_ptr<SysfsFs> real_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_REAL_KERNEL_STAND_IN_SYSFS_H_
