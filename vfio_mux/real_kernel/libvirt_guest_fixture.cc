#include "vfio_mux/real_kernel/libvirt_guest_fixture.h"

#include <iostream>

#include "absl/time/clock.h"

namespace gputravel {

std::unique_ptr<NestedVms>& LibvirtGuestFixture::vms() {
  static std::unique_ptr<NestedVms>* vms = new std::unique_ptr<NestedVms>();
  return *vms;
}

std::string& LibvirtGuestFixture::setup_error() {
  static std::string* error = new std::string();
  return *error;
}

void LibvirtGuestFixture::LaunchVms(
    const std::vector<std::pair<std::string, PciHotplug>>& domains) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<NestedVms>> launched = NestedVms::Launch("qemu:///system", domains);
  std::cout << "starting " << domains.size() << " nested VM(s) took "
            << absl::FormatDuration(absl::Now() - start) << std::endl;
  if (!launched.ok()) {
    setup_error() = launched.status().ToString();
    return;
  }
  vms() = *std::move(launched);
}

void LibvirtGuestFixture::TearDownTestSuite() { vms().reset(); }

void LibvirtGuestFixture::SetUp() {
  ASSERT_NE(vms(), nullptr) << "nested VMs: " << setup_error();
  absl::StatusOr<StandInGpu> gpu = StandInGpu::Find();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  gpu_.emplace(*std::move(gpu));
  bdf_ = gpu_->bdf();
}

std::vector<int> LibvirtGuestFixture::VfioHolderPids() {
  absl::StatusOr<std::vector<int>> pids = gpu_->VfioHolderPids();
  EXPECT_TRUE(pids.ok()) << pids.status();
  return pids.ok() ? *pids : std::vector<int>{};
}

int LibvirtGuestFixture::QemuPid(const std::string& domain) {
  absl::StatusOr<int> pid = vms()->QemuPid(domain);
  EXPECT_TRUE(pid.ok()) << pid.status();
  return pid.ok() ? *pid : -1;
}

std::optional<DeviceEvent> LibvirtGuestFixture::AwaitEvent(const std::string& domain,
                                                           const std::string& kind,
                                                           absl::Time since) {
  vms()->WaitForEvent(domain, kind, kGpuAlias, since, absl::Seconds(10));
  for (const DeviceEvent& e : vms()->Events()) {
    if (e.domain == domain && e.kind == kind && e.alias == kGpuAlias && e.time >= since) {
      return e;
    }
  }
  return std::nullopt;
}

bool LibvirtGuestFixture::EventSeen(const std::string& domain, const std::string& kind,
                                    absl::Time since) {
  for (const DeviceEvent& e : vms()->Events()) {
    if (e.domain == domain && e.kind == kind && e.alias == kGpuAlias && e.time >= since) {
      return true;
    }
  }
  return false;
}

}  // namespace gputravel
