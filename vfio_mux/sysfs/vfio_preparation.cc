#include "vfio_mux/sysfs/vfio_preparation.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "util/status_macros.h"

namespace gputravel {
namespace {

std::string WouldWrite(absl::string_view data, absl::string_view path,
                       absl::string_view step) {
  return absl::StrCat("DRY-RUN: would write '", absl::CHexEscape(data), "' to ",
                      path, " (", step, ")");
}

}  // namespace

absl::StatusOr<VfioPreparation> PrepareGpuForVfio(
    PciSysfs& sysfs, absl::string_view bdf_in,
    const VfioPreparationOptions& options) {
  auto report = [&](const std::string& line) {
    if (options.report) options.report(line);
  };
  VfioPreparation out;
  GT_ASSIGN_OR_RETURN(out.found, sysfs.InspectNvidiaGpu(bdf_in));
  const std::string& bdf = out.found.bdf;
  report(absl::StrCat("found NVIDIA GPU ", bdf, " (device ", out.found.device,
                      "), driver: ",
                      out.found.driver.empty() ? "none" : out.found.driver));

  GT_RETURN_IF_ERROR(sysfs.CheckGroupViableOnceBound(bdf));
  if (options.dry_run) {
    report(absl::StrCat("IOMMU group ", out.found.iommu_group, " is viable"));
    GT_ASSIGN_OR_RETURN(std::vector<PciSysfsWrite> plan, sysfs.PlanBindToVfio(bdf));
    for (const PciSysfsWrite& w : plan) report(WouldWrite(w.data, w.path, w.step));
  } else {
    GT_RETURN_IF_ERROR(sysfs.BindToVfio(bdf));
    report(out.found.driver == "vfio-pci"
               ? absl::StrCat(bdf, " is already bound to vfio-pci")
               : absl::StrCat("bound ", bdf, " to vfio-pci"));
    GT_RETURN_IF_ERROR(sysfs.CheckGroupViable(bdf));
    report(absl::StrCat("IOMMU group ", out.found.iommu_group, " is viable"));
  }

  GT_ASSIGN_OR_RETURN(out.reset_methods, sysfs.ReadResetMethod(bdf));
  const std::string reset_path = sysfs.DevicePath(bdf) + "/reset_method";
  if (out.reset_methods.empty()) {
    report(absl::StrCat("reset is already disabled for ", bdf));
    return out;
  }
  report(absl::StrCat("reset methods of ", bdf, " were: ", out.reset_methods,
                      " (restore later with: echo '", out.reset_methods, "' > ",
                      reset_path, ", or echo default)"));
  if (options.dry_run) {
    report(WouldWrite("\n", reset_path, "disabling reset"));
    return out;
  }
  GT_ASSIGN_OR_RETURN(std::string disabled, sysfs.DisableReset(bdf));
  (void)disabled;
  report(absl::StrCat("disabled reset for ", bdf));
  return out;
}

}  // namespace gputravel
