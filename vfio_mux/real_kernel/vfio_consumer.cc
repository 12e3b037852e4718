#include "vfio_mux/real_kernel/vfio_consumer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "vfio_mux/sysfs/sysfs_fs.h"

namespace gputravel {

absl::StatusOr<VfioConsumer> VfioConsumer::OpenGroup(const std::string& group) {
  const std::string path = "/dev/vfio/" + group;
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return SysfsErrnoError(errno, "opening", path);
  return VfioConsumer(fd);
}

VfioConsumer::VfioConsumer(VfioConsumer&& other) noexcept
    : group_fd_(other.group_fd_),
      container_fd_(other.container_fd_),
      device_fd_(other.device_fd_) {
  other.group_fd_ = other.container_fd_ = other.device_fd_ = -1;
}

VfioConsumer::~VfioConsumer() { Close(); }

void VfioConsumer::Close() {
  for (int* fd : {&device_fd_, &group_fd_, &container_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

absl::StatusOr<bool> VfioConsumer::Viable() {
  struct vfio_group_status status = {};
  status.argsz = sizeof(status);
  if (ioctl(group_fd_, VFIO_GROUP_GET_STATUS, &status) != 0) {
    return SysfsErrnoError(errno, "VFIO_GROUP_GET_STATUS on", "the group");
  }
  return (status.flags & VFIO_GROUP_FLAGS_VIABLE) != 0;
}

absl::Status VfioConsumer::Take(const std::string& bdf) {
  container_fd_ = open("/dev/vfio/vfio", O_RDWR | O_CLOEXEC);
  if (container_fd_ < 0) return SysfsErrnoError(errno, "opening", "/dev/vfio/vfio");
  if (ioctl(container_fd_, VFIO_GET_API_VERSION) != VFIO_API_VERSION) {
    return absl::InternalError("VFIO_GET_API_VERSION: unexpected version");
  }
  if (ioctl(group_fd_, VFIO_GROUP_SET_CONTAINER, &container_fd_) != 0) {
    return SysfsErrnoError(errno, "VFIO_GROUP_SET_CONTAINER on", "the group");
  }
  if (ioctl(container_fd_, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) != 0) {
    return SysfsErrnoError(errno, "VFIO_SET_IOMMU (type1v2) on", "/dev/vfio/vfio");
  }
  device_fd_ = ioctl(group_fd_, VFIO_GROUP_GET_DEVICE_FD, bdf.c_str());
  if (device_fd_ < 0) {
    return SysfsErrnoError(errno, "VFIO_GROUP_GET_DEVICE_FD for", bdf);
  }
  return absl::OkStatus();
}

absl::Status VfioConsumer::ResetDevice() {
  if (ioctl(device_fd_, VFIO_DEVICE_RESET) != 0) {
    return SysfsErrnoError(errno, "VFIO_DEVICE_RESET on", "the device");
  }
  return absl::OkStatus();
}

}  // namespace gputravel
