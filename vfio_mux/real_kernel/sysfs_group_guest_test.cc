// Runs inside the real-kernel guest (run_scenario.sh SysfsGroup): the IOMMU
// group viability rule and resets for a device that shares its group (and
// its bus) with another device behind a PCIe-to-PCI bridge.
#include <unistd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vfio_mux/real_kernel/guest_machine.h"
#include "vfio_mux/real_kernel/stand_in_sysfs.h"
#include "vfio_mux/real_kernel/vfio_consumer.h"
#include "vfio_mux/sysfs/sysfs_backend.h"
#include "vfio_mux/sysfs/sysfs_fs.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class SysfsGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto [out, vendor, device] :
         {std::make_tuple(&gpu_, kEduVendor, kEduDevice),
          std::make_tuple(&sibling_, kSiblingVendor, kSiblingDevice),
          std::make_tuple(&bridge_, kBridgeVendor, kBridgeDevice)}) {
      absl::StatusOr<std::string> bdf = FindPciFunction(vendor, device);
      ASSERT_TRUE(bdf.ok()) << bdf.status();
      *out = *bdf;
    }
    group_ = PciIommuGroup(gpu_);
    ASSERT_FALSE(group_.empty());
    ASSERT_EQ(PciIommuGroup(sibling_), group_) << "the bridge should put both in one group";
    ASSERT_EQ(PciIommuGroup(bridge_), group_);
    ASSERT_EQ(PciDriver(gpu_), "");
    ASSERT_EQ(PciDriver(sibling_), "virtio-pci");
    SysfsBackendOptions o;
    o.sysfs.driver_timeout = absl::Seconds(20);
    o.gpus = {{"gpu1", gpu_}};
    o.domains = {"td-a"};
    auto b = SysfsBackend::Create(o, std::make_shared<StandInSysfsFs>("/sys", std::set<std::string>{gpu_}));
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }

  void TearDown() override {
    if (backend_ == nullptr) return;
    EXPECT_TRUE(backend_->Release("gpu1").ok());
    EXPECT_EQ(PciDriver(gpu_), "");
    if (PciDriver(sibling_).empty()) {
      EXPECT_TRUE(SysfsWrite("/sys/bus/pci/drivers_probe", sibling_).ok());
    }
    EXPECT_EQ(PciDriver(sibling_), "virtio-pci");
  }

  std::string gpu_, sibling_, bridge_, group_;
  std::unique_ptr<SysfsBackend> backend_;
};

TEST_F(SysfsGroup, ASiblingOnAHostDriverMakesTheGroupNotViableAndIsNamed) {
  absl::Status s = backend_->Prepare("gpu1");
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  const std::string msg(s.message());
  EXPECT_THAT(msg, HasSubstr(absl::StrCat(sibling_, " (class 0x020000) is bound to virtio-pci")));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat("IOMMU group ", group_)));
  EXPECT_THAT(msg, Not(HasSubstr(bridge_))) << "a bridge may keep its driver";
  // Refused before any write: the GPU and the sibling were left alone.
  EXPECT_EQ(PciDriver(gpu_), "");
  EXPECT_EQ(PciAttr(gpu_, "driver_override"), "(null)");
  EXPECT_EQ(PciDriver(sibling_), "virtio-pci");

  // Bound by hand, the group is still not viable, for the MUX and the kernel.
  ASSERT_TRUE(backend_->sysfs().BindToVfio(gpu_).ok());
  EXPECT_EQ(PciDriver(gpu_), "vfio-pci");
  s = backend_->sysfs().CheckGroupViable(gpu_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat(sibling_, " (class 0x020000) is bound to virtio-pci")));
  s = backend_->Move("gpu1", "", "td-a");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(sibling_));

  // The kernel agrees: the group is not viable and cannot join a container.
  auto consumer = VfioConsumer::OpenGroup(group_);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  auto viable = consumer->Viable();
  ASSERT_TRUE(viable.ok()) << viable.status();
  EXPECT_FALSE(*viable);
  absl::Status took = consumer->Take(gpu_);
  EXPECT_FALSE(took.ok());
}

TEST_F(SysfsGroup, UnbindingTheSiblingMakesItViableForBothTheMuxAndTheKernel) {
  ASSERT_TRUE(SysfsWrite(absl::StrCat("/sys/bus/pci/devices/", sibling_, "/driver/unbind"), sibling_).ok());
  ASSERT_EQ(PciDriver(sibling_), "");
  absl::Status s = backend_->Prepare("gpu1");
  ASSERT_TRUE(s.ok()) << s;
  s = backend_->Move("gpu1", "", "td-a");
  ASSERT_TRUE(s.ok()) << s;
  auto consumer = VfioConsumer::OpenGroup(group_);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  auto viable = consumer->Viable();
  ASSERT_TRUE(viable.ok()) << viable.status();
  EXPECT_TRUE(*viable);
  absl::Status took = consumer->Take(gpu_);
  EXPECT_TRUE(took.ok()) << took;
  consumer->Close();
  s = backend_->Move("gpu1", "td-a", "");
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(SysfsGroup, ABusResetWorksOnlyWhileTheDeviceIsAloneOnItsBus) {
  const std::string sibling_dir = absl::StrCat("/sys/bus/pci/devices/", sibling_);
  // With the sibling on the bus, "default" finds no method that works.
  ASSERT_TRUE(backend_->sysfs().WriteResetMethod(gpu_, "default").ok());
  EXPECT_EQ(PciAttr(gpu_, "reset_method"), "");

  // Alone on the bus (the sibling hot-removed): the bus reset works.
  ASSERT_TRUE(SysfsWrite(sibling_dir + "/remove", "1").ok());
  ASSERT_FALSE(RealSysfsFs()->Exists(sibling_dir));
  ASSERT_TRUE(backend_->sysfs().WriteResetMethod(gpu_, "default").ok());
  EXPECT_EQ(PciAttr(gpu_, "reset_method"), "bus");
  absl::Status s = backend_->Prepare("gpu1");
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(PciAttr(gpu_, "reset_method"), "");
  s = backend_->Reset("gpu1");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(PciAttr(gpu_, "reset_method"), "");
  // An administrator enables "bus" while it works...
  ASSERT_TRUE(backend_->sysfs().WriteResetMethod(gpu_, "bus").ok());

  // ...and the sibling comes back (rescan), bound to its host driver.
  ASSERT_TRUE(SysfsWrite("/sys/bus/pci/rescan", "1").ok());
  ASSERT_EQ(PciDriver(sibling_), "virtio-pci");
  ASSERT_TRUE(SysfsWrite(sibling_dir + "/driver/unbind", sibling_).ok());
  // The listed method no longer works: the kernel answers ENOTTY.
  EXPECT_EQ(PciAttr(gpu_, "reset_method"), "bus");
  s = backend_->sysfs().FunctionReset(gpu_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("none of the enabled reset methods (bus)"));

  // The kernel probes a method again when it is written: the backend's
  // Reset re-enables the saved "bus", is refused (EINVAL), finds with
  // "default" that nothing works, and says so...
  ASSERT_TRUE(backend_->sysfs().WriteResetMethod(gpu_, "").ok());
  s = backend_->Reset("gpu1");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("writing 'bus' to reset_method"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("probes each method"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("found no reset method that works now"));
  // ...and reset stays disabled for the next release.
  EXPECT_EQ(PciAttr(gpu_, "reset_method"), "");
  // "default" probes every method: none is left, and that is the answer.
  s = backend_->sysfs().WriteResetMethod(gpu_, "default");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(PciAttr(gpu_, "reset_method"), "");
  // Release still gives the device back (the saved list cannot be restored;
  // the kernel's current list, empty, is what the host gets).
}

}  // namespace
}  // namespace gputravel
