#include "vfio_mux/real_kernel/stand_in_sysfs.h"

#include <utility>

#include "absl/strings/match.h"

namespace gputravel {

StandInSysfsFs::StandInSysfsFs(std::string sysfs_root,
                               std::set<std::string> stand_in_bdfs)
    : devices_dir_(std::move(sysfs_root) + "/bus/pci/devices/"),
      stand_ins_(std::move(stand_in_bdfs)),
      real_(RealSysfsFs()) {}

absl::StatusOr<std::string> StandInSysfsFs::ReadFile(const std::string& path) {
  if (absl::StartsWith(path, devices_dir_)) {
    const std::string rest = path.substr(devices_dir_.size());
    const size_t slash = rest.find('/');
    if (slash != std::string::npos && stand_ins_.count(rest.substr(0, slash)) != 0) {
      const std::string attr = rest.substr(slash + 1);
      if (attr == "vendor") return std::string("0x10de\n");
      if (attr == "device") return std::string("0x2331\n");
      if (attr == "class") return std::string("0x030200\n");
    }
  }
  return real_->ReadFile(path);
}

absl::Status StandInSysfsFs::WriteFile(const std::string& path, absl::string_view data) {
  return real_->WriteFile(path, data);
}

absl::StatusOr<std::string> StandInSysfsFs::ReadLink(const std::string& path) {
  return real_->ReadLink(path);
}

absl::StatusOr<std::vector<std::string>> StandInSysfsFs::ListDir(const std::string& path) {
  return real_->ListDir(path);
}

bool StandInSysfsFs::Exists(const std::string& path) { return real_->Exists(path); }

absl::StatusOr<uint64_t> StandInSysfsFs::CharDeviceNumber(const std::string& path) {
  return real_->CharDeviceNumber(path);
}

}  // namespace gputravel
