#include "vfio_mux/real_kernel/guest_machine.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "vfio_mux/sysfs/sysfs_fs.h"

namespace gputravel {
namespace {

constexpr char kDevices[] = "/sys/bus/pci/devices/";

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::StatusOr<std::string> FindPciFunction(const std::string& vendor,
                                            const std::string& device) {
  absl::StatusOr<std::vector<std::string>> names = RealSysfsFs()->ListDir(kDevices);
  if (!names.ok()) return names.status();
  std::vector<std::string> found;
  for (const std::string& n : *names) {
    if (PciAttr(n, "vendor") == vendor && PciAttr(n, "device") == device) found.push_back(n);
  }
  if (found.size() != 1) {
    return absl::NotFoundError(absl::StrCat(
        "expected one PCI function ", vendor, ":", device, " in the guest, found ",
        found.size(), " (", absl::StrJoin(found, ", "),
        "): the QEMU command line in run_scenario.sh and guest_machine.h disagree"));
  }
  return found[0];
}

std::string PciAttr(const std::string& bdf, const std::string& attr) {
  absl::StatusOr<std::string> v = RealSysfsFs()->ReadFile(absl::StrCat(kDevices, bdf, "/", attr));
  if (!v.ok()) return "<error>";
  return std::string(absl::StripAsciiWhitespace(*v));
}

std::string PciDriver(const std::string& bdf) {
  absl::StatusOr<std::string> link = RealSysfsFs()->ReadLink(absl::StrCat(kDevices, bdf, "/driver"));
  return link.ok() ? Basename(*link) : "";
}

std::string PciIommuGroup(const std::string& bdf) {
  absl::StatusOr<std::string> link =
      RealSysfsFs()->ReadLink(absl::StrCat(kDevices, bdf, "/iommu_group"));
  return link.ok() ? Basename(*link) : "";
}

absl::Status SysfsWrite(const std::string& path, const std::string& data) {
  return RealSysfsFs()->WriteFile(path, data);
}

}  // namespace gputravel
