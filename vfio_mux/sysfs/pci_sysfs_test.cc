#include "vfio_mux/sysfs/pci_sysfs.h"

#include <errno.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "vfio_mux/sysfs/fake_sysfs.h"

namespace gputravel {
namespace {

constexpr char kGpu[] = "0000:98:00.0";
constexpr char kGpu2[] = "0000:b8:00.0";
constexpr char kNic[] = "0000:17:00.0";

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

class PciSysfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::shared_ptr<FakeSysfs>> f = FakeSysfs::Create();
    ASSERT_TRUE(f.ok()) << f.status();
    fake_ = *f;
    for (const char* d : {"nvidia", "vfio-pci", "snd_hda_intel", "pcieport",
                          "e1000e"}) {
      ASSERT_TRUE(fake_->AddDriver(d).ok());
    }
    FakePciDevice gpu;
    gpu.bdf = kGpu;
    gpu.driver = "nvidia";
    gpu.iommu_group = "42";
    ASSERT_TRUE(fake_->AddDevice(gpu).ok());
    FakePciDevice nic;
    nic.bdf = kNic;
    nic.vendor = "0x8086";
    nic.device = "0x1533";
    nic.class_code = "0x020000";
    nic.driver = "e1000e";
    nic.native_driver = "e1000e";
    nic.iommu_group = "7";
    ASSERT_TRUE(fake_->AddDevice(nic).ok());
    PciSysfsOptions o;
    o.sysfs_root = fake_->root();
    o.proc_root = fake_->proc_root();
    o.driver_timeout = absl::Milliseconds(300);
    o.poll_interval = absl::Milliseconds(5);
    sysfs_ = std::make_unique<PciSysfs>(o, fake_);
  }
  void TearDown() override {
    if (fake_) fake_->ReleaseHangs();
  }

  std::shared_ptr<FakeSysfs> fake_;
  std::unique_ptr<PciSysfs> sysfs_;
};

// --- discovery and inspection ---------------------------------------------

TEST_F(PciSysfsTest, DiscoversOnlyNvidiaGpus) {
  FakePciDevice audio;  // an NVIDIA function that is not a GPU
  audio.bdf = "0000:98:00.1";
  audio.class_code = "0x040300";
  audio.driver = "snd_hda_intel";
  audio.iommu_group = "42";
  ASSERT_TRUE(fake_->AddDevice(audio).ok());
  FakePciDevice gpu2;
  gpu2.bdf = kGpu2;
  gpu2.class_code = "0x030000";
  gpu2.iommu_group = "43";
  ASSERT_TRUE(fake_->AddDevice(gpu2).ok());

  absl::StatusOr<std::vector<PciDeviceInfo>> gpus =
      sysfs_->DiscoverNvidiaGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].bdf, kGpu);
  EXPECT_EQ((*gpus)[0].driver, "nvidia");
  EXPECT_EQ((*gpus)[0].iommu_group, "42");
  EXPECT_EQ((*gpus)[0].device, "0x2331");
  EXPECT_EQ((*gpus)[1].bdf, kGpu2);
  EXPECT_EQ((*gpus)[1].driver, "");
}

TEST_F(PciSysfsTest, DiscoveryFailsClearlyWithoutSysfs) {
  PciSysfsOptions o;
  o.sysfs_root = fake_->root() + "/nonexistent";
  PciSysfs sysfs(o, fake_);
  absl::StatusOr<std::vector<PciDeviceInfo>> gpus = sysfs.DiscoverNvidiaGpus();
  ASSERT_FALSE(gpus.ok());
  EXPECT_TRUE(Contains(gpus.status(), "sysfs_root")) << gpus.status();
}

TEST_F(PciSysfsTest, MissingDeviceIsNotFound) {
  absl::StatusOr<PciDeviceInfo> info = sysfs_->Inspect("0000:99:00.0");
  ASSERT_EQ(info.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(info.status(), "0000:99:00.0"));
  EXPECT_TRUE(Contains(info.status(), fake_->root() + "/bus/pci/devices/"));
  EXPECT_TRUE(Contains(info.status(), "lspci"));
}

TEST_F(PciSysfsTest, MalformedBdfIsRejectedBeforeAnyPathIsBuilt) {
  absl::StatusOr<PciDeviceInfo> info = sysfs_->Inspect("../../../etc");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PciSysfsTest, NonNvidiaDeviceIsRefused) {
  absl::StatusOr<PciDeviceInfo> info = sysfs_->InspectNvidiaGpu(kNic);
  ASSERT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(info.status(), kNic));
  EXPECT_TRUE(Contains(info.status(), "vendor 0x8086"));
  EXPECT_TRUE(Contains(info.status(), "not an NVIDIA GPU"));
  // And nothing was written to it.
  EXPECT_EQ(sysfs_->BindToVfio(kNic).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fake_->writes().empty());
}

// --- IOMMU group viability ------------------------------------------------

TEST_F(PciSysfsTest, GroupWithVfioUnboundAndBridgeIsViable) {
  ASSERT_TRUE(fake_->ForceBind(kGpu, "vfio-pci").ok());
  FakePciDevice bridge;
  bridge.bdf = "0000:97:00.0";
  bridge.vendor = "0x8086";
  bridge.class_code = "0x060400";
  bridge.driver = "pcieport";
  bridge.iommu_group = "42";
  ASSERT_TRUE(fake_->AddDevice(bridge).ok());
  FakePciDevice idle;
  idle.bdf = "0000:98:00.1";
  idle.class_code = "0x068000";
  idle.iommu_group = "42";
  ASSERT_TRUE(fake_->AddDevice(idle).ok());
  EXPECT_TRUE(sysfs_->CheckGroupViable(kGpu).ok());
}

TEST_F(PciSysfsTest, GroupWithHostDriverIsNotViable) {
  ASSERT_TRUE(fake_->ForceBind(kGpu, "vfio-pci").ok());
  FakePciDevice audio;
  audio.bdf = "0000:98:00.1";
  audio.class_code = "0x040300";
  audio.driver = "snd_hda_intel";
  audio.iommu_group = "42";
  ASSERT_TRUE(fake_->AddDevice(audio).ok());
  absl::Status s = sysfs_->CheckGroupViable(kGpu);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "IOMMU group 42"));
  EXPECT_TRUE(Contains(s, "0000:98:00.1"));
  EXPECT_TRUE(Contains(s, "snd_hda_intel"));
  EXPECT_TRUE(Contains(s, "prepare_host.sh"));
}

TEST_F(PciSysfsTest, GpuStillOnHostDriverMakesGroupNotViable) {
  absl::Status s = sysfs_->CheckGroupViable(kGpu);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "0000:98:00.0 (class 0x030200) is bound to nvidia"));
}

TEST_F(PciSysfsTest, DeviceWithoutIommuGroupMeansIommuOff) {
  std::filesystem::remove(fake_->DevicePath(kGpu) + "/iommu_group");
  absl::Status s = sysfs_->CheckGroupViable(kGpu);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "intel_iommu=on"));
}

// --- binding --------------------------------------------------------------

TEST_F(PciSysfsTest, BindsFromNativeDriverInKernelOrder) {
  ASSERT_TRUE(sysfs_->BindToVfio(kGpu).ok());
  EXPECT_EQ(fake_->driver(kGpu), "vfio-pci");
  EXPECT_EQ(fake_->driver_override(kGpu), "vfio-pci");
  const std::string dev = fake_->DevicePath(kGpu);
  std::vector<std::string> expected = {
      dev + "/driver_override <- vfio-pci",
      dev + "/driver/unbind <- " + kGpu,
      fake_->root() + "/bus/pci/drivers_probe <- " + kGpu,
  };
  EXPECT_EQ(fake_->writes(), expected);
  // Idempotent: a second bind only refreshes the override.
  ASSERT_TRUE(sysfs_->BindToVfio(kGpu).ok());
  EXPECT_EQ(fake_->writes().size(), 4u);
}

TEST_F(PciSysfsTest, BindsAnUnboundDeviceWithoutUnbinding) {
  ASSERT_TRUE(fake_->ForceBind(kGpu, "").ok());
  ASSERT_TRUE(sysfs_->BindToVfio(kGpu).ok());
  EXPECT_EQ(fake_->driver(kGpu), "vfio-pci");
  EXPECT_EQ(fake_->writes().size(), 2u);
}

TEST_F(PciSysfsTest, BindFailsWhenVfioPciNotLoaded) {
  std::filesystem::remove_all(fake_->root() + "/bus/pci/drivers/vfio-pci");
  absl::Status s = sysfs_->BindToVfio(kGpu);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "modprobe vfio-pci"));
  EXPECT_EQ(fake_->driver(kGpu), "nvidia");
}

TEST_F(PciSysfsTest, FailedOverrideWriteNamesPathAndErrno) {
  const std::string path = fake_->DevicePath(kGpu) + "/driver_override";
  fake_->FailWrites(path, EIO);
  absl::Status s = sysfs_->BindToVfio(kGpu);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "GPU 0000:98:00.0"));
  EXPECT_TRUE(Contains(s, "setting driver_override"));
  EXPECT_TRUE(Contains(s, path));
  EXPECT_TRUE(Contains(s, "Input/output error (errno 5)"));
  EXPECT_EQ(fake_->driver(kGpu), "nvidia");
}

TEST_F(PciSysfsTest, BusyUnbindWriteIsReported) {
  fake_->FailWrites(fake_->DevicePath(kGpu) + "/driver/unbind", EBUSY);
  absl::Status s = sysfs_->BindToVfio(kGpu);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;  // EBUSY
  EXPECT_TRUE(Contains(s, "unbinding from nvidia"));
  EXPECT_TRUE(Contains(s, "Device or resource busy"));
}

TEST_F(PciSysfsTest, DriverThatWillNotUnbindIsNamed) {
  fake_->NeverUnbind(kGpu);
  absl::Status s = sysfs_->BindToVfio(kGpu);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "driver nvidia accepted the unbind but will not let go"));
  EXPECT_TRUE(Contains(s, "still reads 'nvidia'"));
}

TEST_F(PciSysfsTest, HangingUnbindTimesOut) {
  fake_->HangUnbind(kGpu);
  const long refs = fake_.use_count();
  absl::Time start = absl::Now();
  absl::Status s = sysfs_->BindToVfio(kGpu);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(Contains(s, "did not return within 300ms"));
  EXPECT_TRUE(Contains(s, "/driver/unbind"));
  // The abandoned write finishes once the kernel lets go; wait for its
  // thread to drop its reference so TearDown removes the tree.
  fake_->ReleaseHangs();
  for (int i = 0; i < 200 && fake_.use_count() > refs; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(fake_.use_count(), refs);
}

TEST_F(PciSysfsTest, ProbeThatBindsNothingIsReported) {
  fake_->IgnoreProbe(kGpu);
  absl::Status s = sysfs_->BindToVfio(kGpu);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "vfio-pci did not claim the device"));
  EXPECT_TRUE(Contains(s, "dmesg"));
}

TEST_F(PciSysfsTest, FailedProbeWriteIsReported) {
  fake_->FailWrites(fake_->root() + "/bus/pci/drivers_probe", EIO);
  absl::Status s = sysfs_->BindToVfio(kGpu);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "probing for vfio-pci"));
  EXPECT_TRUE(Contains(s, "errno 5"));
}

TEST_F(PciSysfsTest, ReturnsToNativeDriver) {
  ASSERT_TRUE(sysfs_->BindToVfio(kGpu).ok());
  ASSERT_TRUE(sysfs_->ReturnToHost(kGpu).ok());
  EXPECT_EQ(fake_->driver(kGpu), "nvidia");
  EXPECT_EQ(fake_->driver_override(kGpu), "");
  EXPECT_EQ(*fake_->ReadFile(fake_->DevicePath(kGpu) + "/driver_override"),
            "(null)\n");
}

TEST_F(PciSysfsTest, ReturnWithNativeDriverUnloadedLeavesItUnbound) {
  ASSERT_TRUE(sysfs_->BindToVfio(kGpu).ok());
  std::filesystem::remove_all(fake_->root() + "/bus/pci/drivers/nvidia");
  ASSERT_TRUE(sysfs_->ReturnToHost(kGpu).ok());
  EXPECT_EQ(fake_->driver(kGpu), "");
}

TEST_F(PciSysfsTest, ReturnRefusedWhenVfioReclaimsTheDevice) {
  FakePciDevice gpu2;
  gpu2.bdf = kGpu2;
  gpu2.driver = "vfio-pci";
  gpu2.native_driver = "vfio-pci";  // vfio-pci.ids=10de:2331
  gpu2.iommu_group = "43";
  ASSERT_TRUE(fake_->AddDevice(gpu2).ok());
  absl::Status s = sysfs_->ReturnToHost(kGpu2);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "vfio-pci.ids="));
}

// --- reset control --------------------------------------------------------

TEST_F(PciSysfsTest, DisablesAndRestoresResetMethod) {
  EXPECT_EQ(*sysfs_->ReadResetMethod(kGpu), "flr bus");
  ASSERT_TRUE(sysfs_->WriteResetMethod(kGpu, "").ok());
  EXPECT_EQ(*sysfs_->ReadResetMethod(kGpu), "");
  EXPECT_EQ(fake_->writes().back(),
            fake_->DevicePath(kGpu) + "/reset_method <- \\n");
  ASSERT_TRUE(sysfs_->WriteResetMethod(kGpu, "flr  bus").ok());
  EXPECT_EQ(fake_->reset_method(kGpu), "flr bus");
  ASSERT_TRUE(sysfs_->WriteResetMethod(kGpu, "").ok());
  ASSERT_TRUE(sysfs_->WriteResetMethod(kGpu, "default").ok());
  EXPECT_EQ(fake_->reset_method(kGpu), "flr bus");
}

TEST_F(PciSysfsTest, UnsupportedResetMethodIsExplained) {
  absl::Status s = sysfs_->WriteResetMethod(kGpu, "slot");
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(Contains(s, "Invalid argument"));
  EXPECT_TRUE(Contains(s, "'default'"));
}

// The kernel probes each method when it is written: one listed before may
// be refused now (a bus reset once another function shares the bus).
TEST_F(PciSysfsTest, AMethodThatNoLongerWorksIsRefusedWhenWritten) {
  fake_->BreakResetMethod(kGpu, "bus");
  absl::Status s = sysfs_->WriteResetMethod(kGpu, "flr bus");
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(Contains(s, "probes each method when it is written"));
  EXPECT_EQ(fake_->reset_method(kGpu), "flr bus");
  ASSERT_TRUE(sysfs_->WriteResetMethod(kGpu, "default").ok());
  EXPECT_EQ(fake_->reset_method(kGpu), "flr");
}

// "default" is the kernel's answer, even when nothing works.
TEST_F(PciSysfsTest, DefaultMayFindNoResetMethod) {
  fake_->BreakResetMethod(kGpu, "bus");
  fake_->BreakResetMethod(kGpu, "flr");
  absl::Status s = sysfs_->WriteResetMethod(kGpu, "default");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(*sysfs_->ReadResetMethod(kGpu), "");
}

TEST_F(PciSysfsTest, ResetFallsBackToWhatWorksWhenTheSavedListIsRefused) {
  ASSERT_TRUE(sysfs_->WriteResetMethod(kGpu, "").ok());
  fake_->BreakResetMethod(kGpu, "bus");
  absl::Status s = sysfs_->ResetKeepingResetDisabled(kGpu, "flr bus");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(fake_->reset_count(kGpu), 1);
  EXPECT_EQ(fake_->reset_method(kGpu), "");
  fake_->BreakResetMethod(kGpu, "flr");
  s = sysfs_->ResetKeepingResetDisabled(kGpu, "flr bus");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "found no reset method that works now"));
  EXPECT_EQ(fake_->reset_count(kGpu), 1);
  EXPECT_EQ(fake_->reset_method(kGpu), "");
}

TEST_F(PciSysfsTest, MissingResetMethodNeedsNewerKernel) {
  std::filesystem::remove(fake_->DevicePath(kGpu) + "/reset_method");
  absl::StatusOr<std::string> m = sysfs_->ReadResetMethod(kGpu);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(m.status(), "Linux 5.15"));
}

// A write given up on stays recorded as pending until the kernel returns it:
// meanwhile the device takes no second write to that attribute (no second
// thread), and CheckNoWritePending tells backends to refuse the GPU.
TEST_F(PciSysfsTest, PendingWriteRefusesTheDeviceUntilItReturns) {
  fake_->HangWrites(fake_->DevicePath(kGpu) + "/reset");
  ASSERT_EQ(sysfs_->FunctionReset(kGpu).code(), absl::StatusCode::kDeadlineExceeded);
  absl::Status pending = sysfs_->CheckNoWritePending(kGpu);
  EXPECT_EQ(pending.code(), absl::StatusCode::kUnavailable) << pending;
  EXPECT_TRUE(Contains(pending, "/reset")) << pending;
  absl::Status again = sysfs_->FunctionReset(kGpu);
  EXPECT_EQ(again.code(), absl::StatusCode::kUnavailable) << again;
  fake_->ReleaseHangs();
  for (int i = 0; i < 200 && !sysfs_->CheckNoWritePending(kGpu).ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(sysfs_->CheckNoWritePending(kGpu).ok());
  EXPECT_EQ(fake_->reset_count(kGpu), 1);  // the pending write acted; the refused one did not
}

TEST_F(PciSysfsTest, FunctionResetWritesOne) {
  ASSERT_TRUE(sysfs_->FunctionReset(kGpu).ok());
  EXPECT_EQ(fake_->reset_count(kGpu), 1);
}

TEST_F(PciSysfsTest, FunctionResetWithResetDisabledIsExplained) {
  ASSERT_TRUE(sysfs_->WriteResetMethod(kGpu, "").ok());
  absl::Status s = sysfs_->FunctionReset(kGpu);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "reset_method is empty"));
  EXPECT_EQ(fake_->reset_count(kGpu), 0);
}

// ENOTTY with methods listed: none of them works for the device now.
TEST_F(PciSysfsTest, FunctionResetWithNoWorkingMethodIsExplained) {
  ASSERT_TRUE(sysfs_->WriteResetMethod(kGpu, "bus").ok());
  fake_->BreakResetMethod(kGpu, "bus");
  absl::Status s = sysfs_->FunctionReset(kGpu);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "none of the enabled reset methods (bus)"));
  EXPECT_EQ(fake_->reset_count(kGpu), 0);
}

TEST_F(PciSysfsTest, FunctionResetIoErrorIsReported) {
  fake_->FailWrites(fake_->DevicePath(kGpu) + "/reset", EIO);
  absl::Status s = sysfs_->FunctionReset(kGpu);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "function reset failed"));
  EXPECT_TRUE(Contains(s, "errno 5"));
}

// --- VFIO holders ---------------------------------------------------------

// A process whose open files the MUX may not read could be the holder: the
// scan fails rather than answering "nobody".
TEST_F(PciSysfsTest, HolderScanFailsClosedWhenAProcessCannotBeRead) {
  ASSERT_TRUE(fake_->AddProcess(900, "qemu-system-x86", {"/dev/vfio/42"}).ok());
  fake_->DenyProcessFiles(900);
  absl::StatusOr<std::vector<VfioHolder>> h = sysfs_->FindVfioHolders(kGpu);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kPermissionDenied) << h.status();
  EXPECT_TRUE(absl::StrContains(h.status().message(), "CAP_SYS_PTRACE")) << h.status();
}

TEST_F(PciSysfsTest, FindsProcessesHoldingTheGroupOrCdev) {
  ASSERT_TRUE(sysfs_->BindToVfio(kGpu).ok());
  ASSERT_TRUE(fake_->AddProcess(100, "bash", {"/dev/pts/0"}).ok());
  EXPECT_TRUE(sysfs_->FindVfioHolders(kGpu)->empty());
  ASSERT_TRUE(
      fake_->AddProcess(4242, "qemu-system-x86", {"/dev/kvm", "/dev/vfio/42"})
          .ok());
  ASSERT_TRUE(
      fake_->AddProcess(4343, "holder", {"/dev/vfio/devices/vfio0"}).ok());
  ASSERT_TRUE(fake_->AddProcess(4444, "other", {"/dev/vfio/43"}).ok());
  absl::StatusOr<std::vector<VfioHolder>> h = sysfs_->FindVfioHolders(kGpu);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].pid, 4242);
  EXPECT_EQ((*h)[0].comm, "qemu-system-x86");
  EXPECT_EQ((*h)[0].path, "/dev/vfio/42");
  EXPECT_EQ((*h)[1].pid, 4343);
  EXPECT_EQ((*h)[1].path, "/dev/vfio/devices/vfio0");
}

}  // namespace
}  // namespace gputravel
