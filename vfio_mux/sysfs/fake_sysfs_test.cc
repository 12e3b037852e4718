#include "vfio_mux/sysfs/fake_sysfs.h"

#include <errno.h>

#include <filesystem>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

constexpr char kGpu[] = "0000:98:00.0";

std::shared_ptr<FakeSysfs> MakeFake() {
  absl::StatusOr<std::shared_ptr<FakeSysfs>> f = FakeSysfs::Create();
  EXPECT_TRUE(f.ok()) << f.status();
  std::shared_ptr<FakeSysfs> fake = *f;
  EXPECT_TRUE(fake->AddDriver("nvidia").ok());
  EXPECT_TRUE(fake->AddDriver("vfio-pci").ok());
  FakePciDevice gpu;
  gpu.bdf = kGpu;
  gpu.driver = "nvidia";
  gpu.iommu_group = "42";
  EXPECT_TRUE(fake->AddDevice(gpu).ok());
  return fake;
}

TEST(FakeSysfsTest, LaysOutTreeLikeSysfs) {
  std::shared_ptr<FakeSysfs> fake = MakeFake();
  const std::string dev = fake->DevicePath(kGpu);
  EXPECT_EQ(*fake->ReadFile(dev + "/vendor"), "0x10de\n");
  EXPECT_EQ(*fake->ReadFile(dev + "/class"), "0x030200\n");
  EXPECT_EQ(*fake->ReadFile(dev + "/driver_override"), "(null)\n");
  EXPECT_EQ(*fake->ReadFile(dev + "/reset_method"), "flr bus\n");
  EXPECT_EQ(*fake->ReadLink(dev + "/driver"), "../../../bus/pci/drivers/nvidia");
  EXPECT_EQ(*fake->ReadLink(dev + "/iommu_group"),
            "../../../kernel/iommu_groups/42");
  EXPECT_EQ(*fake->ListDir(dev + "/iommu_group/devices"),
            std::vector<std::string>{kGpu});
  EXPECT_TRUE(fake->Exists(fake->root() + "/bus/pci/drivers/nvidia/" + kGpu));
}

TEST(FakeSysfsTest, UnbindProbeAndOverrideActLikeTheKernel) {
  std::shared_ptr<FakeSysfs> fake = MakeFake();
  const std::string dev = fake->DevicePath(kGpu);
  // Unbinding through the wrong driver is ENODEV.
  absl::Status s =
      fake->WriteFile(fake->root() + "/bus/pci/drivers/vfio-pci/unbind", kGpu);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);  // ENODEV
  ASSERT_TRUE(fake->WriteFile(dev + "/driver_override", "vfio-pci").ok());
  ASSERT_TRUE(fake->WriteFile(dev + "/driver/unbind", kGpu).ok());
  EXPECT_FALSE(fake->ReadLink(dev + "/driver").ok());
  ASSERT_TRUE(
      fake->WriteFile(fake->root() + "/bus/pci/drivers_probe", kGpu).ok());
  EXPECT_EQ(fake->driver(kGpu), "vfio-pci");
  EXPECT_TRUE(fake->Exists(dev + "/vfio-dev/vfio0"));
  // Clearing the override and reprobing returns it to the native driver.
  ASSERT_TRUE(fake->WriteFile(dev + "/driver_override", "\n").ok());
  EXPECT_EQ(*fake->ReadFile(dev + "/driver_override"), "(null)\n");
  ASSERT_TRUE(fake->WriteFile(dev + "/driver/unbind", kGpu).ok());
  ASSERT_TRUE(
      fake->WriteFile(fake->root() + "/bus/pci/drivers_probe", kGpu).ok());
  EXPECT_EQ(fake->driver(kGpu), "nvidia");
  EXPECT_FALSE(fake->Exists(dev + "/vfio-dev"));
}

TEST(FakeSysfsTest, ResetMethodAndReset) {
  std::shared_ptr<FakeSysfs> fake = MakeFake();
  const std::string dev = fake->DevicePath(kGpu);
  ASSERT_TRUE(fake->WriteFile(dev + "/reset", "1").ok());
  EXPECT_EQ(fake->reset_count(kGpu), 1);
  ASSERT_TRUE(fake->WriteFile(dev + "/reset_method", "\n").ok());
  EXPECT_EQ(*fake->ReadFile(dev + "/reset_method"), "");
  absl::Status s = fake->WriteFile(dev + "/reset", "1");
  EXPECT_EQ(SysfsErrno(s), ENOTTY) << s;
  EXPECT_EQ(SysfsErrno(fake->WriteFile(dev + "/reset_method", "slot")), EINVAL);
  ASSERT_TRUE(fake->WriteFile(dev + "/reset_method", "bus").ok());
  EXPECT_EQ(fake->reset_method(kGpu), "bus");
  ASSERT_TRUE(fake->WriteFile(dev + "/reset_method", "default").ok());
  EXPECT_EQ(fake->reset_method(kGpu), "flr bus");
  EXPECT_EQ(SysfsErrno(fake->WriteFile(dev + "/vendor", "0x8086")), EACCES);
}

// As the kernel: methods are probed when written and at reset time, and a
// device found without any has neither file.
TEST(FakeSysfsTest, ResetMethodsAreProbedWhenUsed) {
  std::shared_ptr<FakeSysfs> fake = MakeFake();
  const std::string dev = fake->DevicePath(kGpu);
  ASSERT_TRUE(fake->WriteFile(dev + "/reset_method", "bus").ok());
  fake->BreakResetMethod(kGpu, "bus");
  EXPECT_EQ(fake->reset_method(kGpu), "bus");
  EXPECT_EQ(SysfsErrno(fake->WriteFile(dev + "/reset", "1")), ENOTTY);
  EXPECT_EQ(SysfsErrno(fake->WriteFile(dev + "/reset_method", "bus")), EINVAL);
  ASSERT_TRUE(fake->WriteFile(dev + "/reset_method", "default").ok());
  EXPECT_EQ(fake->reset_method(kGpu), "flr");
  fake->BreakResetMethod(kGpu, "flr");
  ASSERT_TRUE(fake->WriteFile(dev + "/reset_method", "default").ok());
  EXPECT_EQ(fake->reset_method(kGpu), "");

  FakePciDevice bare;
  bare.bdf = "0000:99:00.0";
  bare.driver = "";
  bare.reset_method = "";
  ASSERT_TRUE(fake->AddDevice(bare).ok());
  EXPECT_FALSE(fake->Exists(fake->DevicePath(bare.bdf) + "/reset_method"));
  EXPECT_FALSE(fake->Exists(fake->DevicePath(bare.bdf) + "/reset"));
}

TEST(FakeSysfsTest, InjectedFaults) {
  std::shared_ptr<FakeSysfs> fake = MakeFake();
  const std::string dev = fake->DevicePath(kGpu);
  fake->FailWrites(dev + "/driver_override", EIO);
  absl::Status s = fake->WriteFile(dev + "/driver_override", "vfio-pci");
  EXPECT_EQ(SysfsErrno(s), EIO);
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s;
  fake->ClearFaults();
  fake->NeverUnbind(kGpu);
  ASSERT_TRUE(fake->WriteFile(dev + "/driver/unbind", kGpu).ok());
  EXPECT_EQ(fake->driver(kGpu), "nvidia");
  EXPECT_EQ(fake->writes().size(), 2u);
}

TEST(FakeSysfsTest, RemovesItsTree) {
  std::string top;
  {
    std::shared_ptr<FakeSysfs> fake = MakeFake();
    top = std::filesystem::path(fake->root()).parent_path();
    EXPECT_TRUE(std::filesystem::exists(top));
  }
  EXPECT_FALSE(std::filesystem::exists(top));
}

}  // namespace
}  // namespace gputravel
