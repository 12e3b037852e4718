#ifndef GPUTRAVEL_VFIO_MUX_REAL_KERNEL_LIBVIRT_GUEST_FIXTURE_H_
#define GPUTRAVEL_VFIO_MUX_REAL_KERNEL_LIBVIRT_GUEST_FIXTURE_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "vfio_mux/real_kernel/nested_vms.h"
#include "vfio_mux/real_kernel/stand_in_gpu.h"

namespace gputravel {

// The alias the MUX gives the hostdev of GPU "gpu0" (DefaultHostdevAlias).
inline constexpr char kGpuAlias[] = "ua-gputravel-gpu0";

// What the libvirt guest suites share: nested VMs launched once per suite
// (LaunchVms from SetUpTestSuite: each start costs seconds to tens of
// seconds under TCG), the stand-in GPU found afresh for each test, and the
// questions the tests ask the kernel and libvirt's events. Test-only.
class LibvirtGuestFixture : public ::testing::Test {
 protected:
  // Launches the suite's nested VMs; a failure fails every test of the
  // suite in SetUp, with the reason.
  static void LaunchVms(const std::vector<std::pair<std::string, PciHotplug>>& domains);
  static void TearDownTestSuite();

  void SetUp() override;

  // The pids holding the GPU's VFIO group, per the kernel.
  std::vector<int> VfioHolderPids();
  // The pid of a nested domain's QEMU.
  int QemuPid(const std::string& domain);
  // The first event of `kind` for the GPU's hostdev on `domain` recorded at
  // or after `since`, waiting for it up to 10 s.
  std::optional<DeviceEvent> AwaitEvent(const std::string& domain, const std::string& kind,
                                        absl::Time since);
  // Whether such an event has been recorded (no wait).
  bool EventSeen(const std::string& domain, const std::string& kind, absl::Time since);

  static std::unique_ptr<NestedVms>& vms();
  std::optional<StandInGpu> gpu_;
  std::string bdf_;

 private:
  static std::string& setup_error();
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_REAL_KERNEL_LIBVIRT_GUEST_FIXTURE_H_
