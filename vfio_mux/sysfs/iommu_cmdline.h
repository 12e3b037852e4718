#ifndef GPUTRAVEL_VFIO_MUX_SYSFS_IOMMU_CMDLINE_H_
#define GPUTRAVEL_VFIO_MUX_SYSFS_IOMMU_CMDLINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gputravel {

// Where the IOMMU evidence comes from, for messages.
struct IommuEvidence {
  std::string cmdline;          // the kernel command line's text
  std::string cmdline_file;     // "/proc/cmdline"
  bool dmar_active = false;     // SYSFS/class/iommu has a dmar* unit
  std::string iommu_class_dir;  // "/sys/class/iommu"
};

// What the IOMMU check found: lines to show, and warnings.
struct IommuFindings {
  std::vector<std::string> notes;
  std::vector<std::string> warnings;
};

// The Intel IOMMU is on: intel_iommu= on the command line (a comma list,
// the last one given wins) includes "on", or, without it, the kernel enabled
// it by default (a dmar unit is active). FailedPrecondition naming the file
// and the GRUB fix for intel_iommu=off, or for neither; a missing iommu=pt is
// a warning (host devices then use DMA translation).
absl::StatusOr<IommuFindings> CheckIntelIommu(const IommuEvidence& e);

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_SYSFS_IOMMU_CMDLINE_H_
