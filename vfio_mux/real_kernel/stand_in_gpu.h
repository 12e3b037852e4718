#ifndef GPUTRAVEL_VFIO_MUX_REAL_KERNEL_STAND_IN_GPU_H_
#define GPUTRAVEL_VFIO_MUX_REAL_KERNEL_STAND_IN_GPU_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "vfio_mux/libvirt/libvirt_backend.h"
#include "vfio_mux/sysfs/pci_sysfs.h"
#include "vfio_mux/sysfs/sysfs_fs.h"

namespace gputravel {

// The GPU of the libvirt guest tests: the guest's virtio-net function that
// is alone in its IOMMU group (guest_machine.h), seen through
// StandInSysfsFs so that the MUX's sysfs checks take it for an H100, with
// what the tests ask the kernel about it. Test-only.
class StandInGpu {
 public:
  static absl::StatusOr<StandInGpu> Find();

  const std::string& bdf() const { return bdf_; }
  const std::shared_ptr<SysfsFs>& fs() const { return fs_; }
  PciSysfs& sysfs() { return *sysfs_; }

  // What `vfio_mux prepare` does on a host: bound to vfio-pci, reset
  // disabled; each checked in sysfs directly.
  absl::Status Prepare();
  // The MUX configuration's libvirt backend for this GPU, named "gpu0", and
  // `domains`: qemu:///system, sysfs checks on (through the stand-in's
  // sysfs), TDX required unless `require_tdx` is false.
  LibvirtBackendOptions BackendOptions(std::set<std::string> domains,
                                       bool require_tdx) const;
  // The pids of the processes holding its VFIO group, per the kernel (the
  // MUX's holder scan over /proc).
  absl::StatusOr<std::vector<int>> VfioHolderPids();

 private:
  StandInGpu(std::string bdf, std::shared_ptr<SysfsFs> fs);

  std::string bdf_;
  std::shared_ptr<SysfsFs> fs_;
  std::unique_ptr<PciSysfs> sysfs_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_REAL_KERNEL_STAND_IN_GPU_H_
