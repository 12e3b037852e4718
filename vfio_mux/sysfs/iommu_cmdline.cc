#include "vfio_mux/sysfs/iommu_cmdline.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gputravel {

absl::StatusOr<IommuFindings> CheckIntelIommu(const IommuEvidence& e) {
  constexpr absl::string_view kGrubHint =
      "add 'intel_iommu=on iommu=pt' to GRUB_CMDLINE_LINUX in /etc/default/grub, "
      "run update-grub, enable VT-d in the firmware, and reboot";
  std::vector<absl::string_view> words =
      absl::StrSplit(e.cmdline, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  // intel_iommu= takes a comma list (on,sm_on,...); the last one given wins.
  bool given = false;
  std::vector<absl::string_view> options;
  bool passthrough = false;
  for (absl::string_view w : words) {
    if (absl::ConsumePrefix(&w, "intel_iommu=")) {
      given = true;
      options = absl::StrSplit(w, ',');
    } else if (w == "iommu=pt") {
      passthrough = true;
    }
  }
  auto has = [&](absl::string_view o) {
    for (absl::string_view x : options) {
      if (x == o) return true;
    }
    return false;
  };
  IommuFindings f;
  if (given && has("off")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "intel_iommu=off is on the kernel command line (", e.cmdline_file,
        "): remove it; ", kGrubHint));
  }
  if (!given || !has("on")) {
    // Kernels built with CONFIG_INTEL_IOMMU_DEFAULT_ON need no option.
    if (!e.dmar_active) {
      return absl::FailedPreconditionError(absl::StrCat(
          "intel_iommu=on is not on the kernel command line (", e.cmdline_file,
          ") and no Intel IOMMU is active (", e.iommu_class_dir,
          " has no dmar unit): ", kGrubHint));
    }
    f.notes.push_back(absl::StrCat(
        "intel_iommu=on is not on the kernel command line, but the kernel "
        "enabled the Intel IOMMU by default (",
        e.iommu_class_dir, " has dmar units)"));
  }
  if (!passthrough) {
    f.warnings.push_back(
        "iommu=pt is not on the kernel command line: host devices will use DMA "
        "translation (slower); add it next to intel_iommu=on");
  }
  f.notes.push_back("kernel command line: IOMMU enabled");
  return f;
}

}  // namespace gputravel
