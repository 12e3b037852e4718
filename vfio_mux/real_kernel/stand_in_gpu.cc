#include "vfio_mux/real_kernel/stand_in_gpu.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "vfio_mux/real_kernel/guest_machine.h"
#include "vfio_mux/real_kernel/stand_in_sysfs.h"
#include "vfio_mux/sysfs/vfio_preparation.h"

namespace gputravel {
namespace {

PciSysfsOptions SysfsOptions() {
  PciSysfsOptions o;
  o.driver_timeout = absl::Seconds(20);
  return o;
}

}  // namespace

StandInGpu::StandInGpu(std::string bdf, std::shared_ptr<SysfsFs> fs)
    : bdf_(std::move(bdf)),
      fs_(std::move(fs)),
      sysfs_(std::make_unique<PciSysfs>(SysfsOptions(), fs_)) {}

absl::StatusOr<StandInGpu> StandInGpu::Find() {
  absl::StatusOr<std::string> bdf = FindPciFunction(kStandInVendor, kStandInDevice);
  if (!bdf.ok()) return bdf.status();
  return StandInGpu(*bdf, std::make_shared<StandInSysfsFs>("/sys", std::set<std::string>{*bdf}));
}

absl::Status StandInGpu::Prepare() {
  absl::StatusOr<VfioPreparation> p = PrepareGpuForVfio(*sysfs_, bdf_);
  if (!p.ok()) return p.status();
  if (PciDriver(bdf_) != "vfio-pci" || !PciAttr(bdf_, "reset_method").empty()) {
    return absl::InternalError(absl::StrCat("after PrepareGpuForVfio, ", bdf_, " has driver '",
                                            PciDriver(bdf_), "' and reset_method '",
                                            PciAttr(bdf_, "reset_method"), "'"));
  }
  return absl::OkStatus();
}

LibvirtBackendOptions StandInGpu::BackendOptions(std::set<std::string> domains,
                                                 bool require_tdx) const {
  LibvirtBackendOptions o;
  o.uri = "qemu:///system";
  o.gpus = {{"gpu0", bdf_, ""}};
  o.domains = std::move(domains);
  o.require_tdx = require_tdx;
  o.sysfs = SysfsOptions();
  return o;
}

absl::StatusOr<std::vector<int>> StandInGpu::VfioHolderPids() {
  absl::StatusOr<std::vector<VfioHolder>> holders = sysfs_->FindVfioHolders(bdf_);
  if (!holders.ok()) return holders.status();
  std::vector<int> pids;
  for (const VfioHolder& h : *holders) pids.push_back(h.pid);
  return pids;
}

}  // namespace gputravel
