#ifndef GPUTRAVEL_VFIO_MUX_REAL_KERNEL_VFIO_CONSUMER_H_
#define GPUTRAVEL_VFIO_MUX_REAL_KERNEL_VFIO_CONSUMER_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gputravel {

// A VFIO consumer, the way a VMM takes a device: opens /dev/vfio/GROUP, asks
// the kernel whether the group is viable, and (Take) joins it to a container
// with the type-1 IOMMU and opens the device. Closing releases it the way a
// VMM that exits does. Test-only (the real-kernel guest tests): it is what
// the MUX's holder scan must find and what vfio-pci resets on release.
class VfioConsumer {
 public:
  // Opens the group node; the device's group must exist (bound to vfio-pci).
  static absl::StatusOr<VfioConsumer> OpenGroup(const std::string& group);
  VfioConsumer(VfioConsumer&& other) noexcept;
  VfioConsumer& operator=(VfioConsumer&&) = delete;
  ~VfioConsumer();

  // VFIO_GROUP_GET_STATUS: whether the kernel finds every device of the
  // group bound to vfio-pci or to no driver.
  absl::StatusOr<bool> Viable();
  // Container, VFIO_TYPE1v2_IOMMU, VFIO_GROUP_GET_DEVICE_FD for `bdf`.
  absl::Status Take(const std::string& bdf);
  // VFIO_DEVICE_RESET on the device Take opened.
  absl::Status ResetDevice();
  // Closes the device, the group and the container.
  void Close();

 private:
  explicit VfioConsumer(int group_fd) : group_fd_(group_fd) {}
  int group_fd_ = -1;
  int container_fd_ = -1;
  int device_fd_ = -1;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_REAL_KERNEL_VFIO_CONSUMER_H_
