#include "vfio_mux/sysfs/vfio_preparation.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vfio_mux/sysfs/fake_sysfs.h"

namespace gputravel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kGpu[] = "0000:98:00.0";

class VfioPreparationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::shared_ptr<FakeSysfs>> f = FakeSysfs::Create();
    ASSERT_TRUE(f.ok()) << f.status();
    fake_ = *f;
    for (const char* d : {"nvidia", "vfio-pci", "snd_hda_intel", "pcieport"}) {
      ASSERT_TRUE(fake_->AddDriver(d).ok());
    }
    FakePciDevice gpu;
    gpu.bdf = kGpu;
    gpu.driver = "nvidia";
    gpu.iommu_group = "42";
    ASSERT_TRUE(fake_->AddDevice(gpu).ok());
    PciSysfsOptions o;
    o.sysfs_root = fake_->root();
    o.proc_root = fake_->proc_root();
    o.driver_timeout = absl::Milliseconds(300);
    o.poll_interval = absl::Milliseconds(5);
    sysfs_ = std::make_unique<PciSysfs>(o, fake_);
  }

  VfioPreparationOptions Options(bool dry_run) {
    VfioPreparationOptions o;
    o.dry_run = dry_run;
    o.report = [this](const std::string& line) { lines_.push_back(line); };
    return o;
  }

  std::string Dev(const std::string& attr) { return fake_->DevicePath(kGpu) + "/" + attr; }

  std::shared_ptr<FakeSysfs> fake_;
  std::unique_ptr<PciSysfs> sysfs_;
  std::vector<std::string> lines_;
};

TEST_F(VfioPreparationTest, DryRunWritesNothingAndReportsTheWritesThePreparationMakes) {
  absl::StatusOr<VfioPreparation> dry = PrepareGpuForVfio(*sysfs_, kGpu, Options(true));
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_THAT(fake_->writes(), IsEmpty());
  EXPECT_EQ(fake_->driver(kGpu), "nvidia");
  EXPECT_EQ(fake_->reset_method(kGpu), "flr bus");
  EXPECT_EQ(dry->found.driver, "nvidia");
  EXPECT_EQ(dry->reset_methods, "flr bus");
  std::vector<std::string> planned;
  for (const std::string& l : lines_) {
    if (l.rfind("DRY-RUN: would write ", 0) == 0) planned.push_back(l);
  }
  const std::string probe = fake_->root() + "/bus/pci/drivers_probe";
  EXPECT_THAT(planned,
              ElementsAre(absl::StrCat("DRY-RUN: would write 'vfio-pci' to ", Dev("driver_override"),
                                       " (setting driver_override to vfio-pci)"),
                          absl::StrCat("DRY-RUN: would write '", kGpu, "' to ",
                                       Dev("driver/unbind"), " (unbinding from nvidia)"),
                          absl::StrCat("DRY-RUN: would write '", kGpu, "' to ", probe,
                                       " (probing for vfio-pci)"),
                          absl::StrCat("DRY-RUN: would write '\\n' to ", Dev("reset_method"),
                                       " (disabling reset)")));

  // The real run makes exactly those writes, in that order.
  lines_.clear();
  absl::StatusOr<VfioPreparation> done = PrepareGpuForVfio(*sysfs_, kGpu, Options(false));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_THAT(fake_->writes(),
              ElementsAre(Dev("driver_override") + " <- vfio-pci",
                          Dev("driver/unbind") + " <- " + kGpu, probe + " <- " + kGpu,
                          Dev("reset_method") + " <- \\n"));
  EXPECT_EQ(fake_->driver(kGpu), "vfio-pci");
  EXPECT_EQ(fake_->reset_method(kGpu), "");
  EXPECT_EQ(done->reset_methods, "flr bus");
  EXPECT_THAT(lines_, testing::Contains(absl::StrCat("bound ", kGpu, " to vfio-pci")));
  EXPECT_THAT(lines_, testing::Contains(absl::StrCat("disabled reset for ", kGpu)));
}

TEST_F(VfioPreparationTest, ASecondRunOnlyConfirms) {
  ASSERT_TRUE(PrepareGpuForVfio(*sysfs_, kGpu).ok());
  const size_t writes = fake_->writes().size();
  absl::StatusOr<VfioPreparation> again = PrepareGpuForVfio(*sysfs_, kGpu, Options(false));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->reset_methods, "");
  // Only driver_override is written again (and read back).
  std::vector<std::string> all = fake_->writes();
  ASSERT_EQ(all.size(), writes + 1);
  EXPECT_EQ(all.back(), Dev("driver_override") + " <- vfio-pci");
  EXPECT_THAT(lines_, testing::Contains(absl::StrCat(kGpu, " is already bound to vfio-pci")));
  EXPECT_THAT(lines_, testing::Contains(absl::StrCat("reset is already disabled for ", kGpu)));
}

TEST_F(VfioPreparationTest, AGroupThatCannotBeViableIsRefusedBeforeAnyWrite) {
  FakePciDevice audio;
  audio.bdf = "0000:98:00.1";
  audio.class_code = "0x040300";
  audio.driver = "snd_hda_intel";
  audio.native_driver = "snd_hda_intel";
  audio.iommu_group = "42";
  ASSERT_TRUE(fake_->AddDevice(audio).ok());
  for (bool dry_run : {true, false}) {
    absl::StatusOr<VfioPreparation> p = PrepareGpuForVfio(*sysfs_, kGpu, Options(dry_run));
    ASSERT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition) << p.status();
    EXPECT_THAT(std::string(p.status().message()),
                HasSubstr("IOMMU group 42 of GPU 0000:98:00.0 is not viable: 0000:98:00.1 "
                          "(class 0x040300) is bound to snd_hda_intel"));
    EXPECT_THAT(fake_->writes(), IsEmpty());
    EXPECT_EQ(fake_->driver(kGpu), "nvidia");
  }
}

TEST_F(VfioPreparationTest, BridgesAndUnboundMembersAreFine) {
  FakePciDevice bridge;
  bridge.bdf = "0000:97:00.0";
  bridge.vendor = "0x8086";
  bridge.class_code = "0x060400";
  bridge.driver = "pcieport";
  bridge.native_driver = "pcieport";
  bridge.iommu_group = "42";
  ASSERT_TRUE(fake_->AddDevice(bridge).ok());
  FakePciDevice unbound;
  unbound.bdf = "0000:98:00.2";
  unbound.class_code = "0x0c8000";
  unbound.iommu_group = "42";
  ASSERT_TRUE(fake_->AddDevice(unbound).ok());
  absl::StatusOr<VfioPreparation> p = PrepareGpuForVfio(*sysfs_, kGpu, Options(false));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(lines_, testing::Contains("IOMMU group 42 is viable"));
  EXPECT_EQ(fake_->driver(kGpu), "vfio-pci");
}

TEST_F(VfioPreparationTest, NotAnNvidiaGpuIsRefusedUntouched) {
  FakePciDevice nic;
  nic.bdf = "0000:17:00.0";
  nic.vendor = "0x8086";
  nic.class_code = "0x020000";
  nic.iommu_group = "7";
  ASSERT_TRUE(fake_->AddDevice(nic).ok());
  absl::StatusOr<VfioPreparation> p = PrepareGpuForVfio(*sysfs_, "0000:17:00.0", Options(false));
  ASSERT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition) << p.status();
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("is not an NVIDIA GPU (vendor 0x8086, class 0x020000"));
  EXPECT_THAT(fake_->writes(), IsEmpty());
}

TEST_F(VfioPreparationTest, ADriverThatWillNotLetGoStopsBeforeReset) {
  fake_->NeverUnbind(kGpu);
  absl::StatusOr<VfioPreparation> p = PrepareGpuForVfio(*sysfs_, kGpu, Options(false));
  ASSERT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition) << p.status();
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("will not let go"));
  EXPECT_EQ(fake_->reset_method(kGpu), "flr bus");
  for (const std::string& l : lines_) EXPECT_THAT(l, testing::Not(HasSubstr("disabled reset")));
}

}  // namespace
}  // namespace gputravel
