#include "vfio_mux/sysfs/sysfs_backend.h"

#include <dirent.h>
#include <errno.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "vfio_mux/sysfs/fake_sysfs.h"

namespace gputravel {
namespace {

constexpr char kGpu[] = "0000:98:00.0";
constexpr char kGpu2[] = "0000:b8:00.0";

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

class SysfsBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::shared_ptr<FakeSysfs>> f = FakeSysfs::Create();
    ASSERT_TRUE(f.ok()) << f.status();
    fake_ = *f;
    for (const char* d : {"nvidia", "vfio-pci", "e1000e"}) {
      ASSERT_TRUE(fake_->AddDriver(d).ok());
    }
    FakePciDevice gpu;
    gpu.bdf = kGpu;
    gpu.driver = "nvidia";
    gpu.iommu_group = "42";
    ASSERT_TRUE(fake_->AddDevice(gpu).ok());
    FakePciDevice gpu2;
    gpu2.bdf = kGpu2;
    gpu2.driver = "nvidia";
    gpu2.iommu_group = "43";
    ASSERT_TRUE(fake_->AddDevice(gpu2).ok());
    FakePciDevice nic;
    nic.bdf = "0000:17:00.0";
    nic.vendor = "0x8086";
    nic.class_code = "0x020000";
    nic.driver = "e1000e";
    nic.iommu_group = "7";
    ASSERT_TRUE(fake_->AddDevice(nic).ok());
  }
  void TearDown() override { fake_->ReleaseHangs(); }

  SysfsBackendOptions Options(std::vector<SysfsGpuConfig> gpus,
                              bool prepare = true) {
    SysfsBackendOptions o;
    o.sysfs.sysfs_root = fake_->root();
    o.sysfs.proc_root = fake_->proc_root();
    o.sysfs.driver_timeout = absl::Milliseconds(300);
    o.sysfs.poll_interval = absl::Milliseconds(5);
    o.gpus = std::move(gpus);
    o.domains = {"td-a", "td-b", "td-c"};
    o.prepare_on_start = prepare;
    return o;
  }

  std::unique_ptr<SysfsBackend> MakeBackend(bool prepare = true) {
    absl::StatusOr<std::unique_ptr<SysfsBackend>> b =
        SysfsBackend::Create(Options({{"gpu0", kGpu}}, prepare), fake_);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  std::shared_ptr<FakeSysfs> fake_;
};

// --- construction ---------------------------------------------------------

TEST_F(SysfsBackendTest, CreatePreparesConfiguredGpus) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->Name(), "sysfs");
  EXPECT_EQ(fake_->driver(kGpu), "vfio-pci");
  EXPECT_EQ(fake_->reset_method(kGpu), "");
  EXPECT_EQ(fake_->driver(kGpu2), "nvidia");  // not configured, not touched
  absl::StatusOr<std::vector<GpuDevice>> gpus = b->ListGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].name, "gpu0");
  EXPECT_EQ((*gpus)[0].bdf, kGpu);
  EXPECT_EQ((*gpus)[0].iommu_group, "42");
  EXPECT_EQ((*gpus)[0].driver, "vfio-pci");
}

TEST_F(SysfsBackendTest, CreateWithoutPrepareOnlyInspects) {
  std::unique_ptr<SysfsBackend> b = MakeBackend(/*prepare=*/false);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(fake_->driver(kGpu), "nvidia");
  EXPECT_TRUE(fake_->writes().empty());
}

// P8: a GPU is routable only because the administrator listed it, never
// for being present on the host.
TEST_F(SysfsBackendTest, EmptyGpuListIsRefusedNotEveryGpu) {
  absl::StatusOr<std::unique_ptr<SysfsBackend>> b =
      SysfsBackend::Create(Options({}, /*prepare=*/true), fake_);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(b.status(), "no GPUs in the MUX config"));
  EXPECT_EQ(fake_->driver(kGpu), "nvidia");
  EXPECT_EQ(fake_->driver(kGpu2), "nvidia");
  EXPECT_TRUE(fake_->writes().empty());
}

TEST_F(SysfsBackendTest, GpuNameOutsideTheAllowedCharactersIsRefused) {
  absl::StatusOr<std::unique_ptr<SysfsBackend>> b =
      SysfsBackend::Create(Options({{"gpu\n0", kGpu}}), fake_);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SysfsBackendTest, CreateRejectsBadConfig) {
  absl::StatusOr<std::unique_ptr<SysfsBackend>> b =
      SysfsBackend::Create(Options({{"gpu0", "0000:99:00.0"}}), fake_);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
  b = SysfsBackend::Create(Options({{"nic", "0000:17:00.0"}}), fake_);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(b.status(), "not an NVIDIA GPU"));
  b = SysfsBackend::Create(Options({{"gpu0", "zz"}}), fake_);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(b.status(), "'gpu0'"));
  b = SysfsBackend::Create(Options({{"a", kGpu}, {"b", "98:00.0"}}), fake_);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(b.status(), "listed twice"));
}


TEST_F(SysfsBackendTest, PrepareOnStartReportsStuckDriver) {
  fake_->NeverUnbind(kGpu);
  absl::StatusOr<std::unique_ptr<SysfsBackend>> b =
      SysfsBackend::Create(Options({{"gpu0", kGpu}}), fake_);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(b.status(), "will not let go"));
}

// --- Move -----------------------------------------------------------------

TEST_F(SysfsBackendTest, MoveRecordsTheNewDomain) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(b->Move("gpu0", "", "td-a").ok());
  EXPECT_EQ(b->RecordedDomain("gpu0"), "td-a");
  ASSERT_TRUE(b->Move("gpu0", "td-a", "td-b").ok());
  EXPECT_EQ(b->RecordedDomain("gpu0"), "td-b");
  ASSERT_TRUE(b->Move("gpu0", "td-b", "").ok());
  EXPECT_EQ(b->RecordedDomain("gpu0"), "");
  // No rebinding and no reset during moves.
  EXPECT_EQ(fake_->driver(kGpu), "vfio-pci");
  EXPECT_EQ(fake_->reset_count(kGpu), 0);
}

TEST_F(SysfsBackendTest, MoveUnknownGpuListsConfiguredOnes) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  absl::Status s = b->Move("gpu9", "", "td-a");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(s, "configured: gpu0"));
}

TEST_F(SysfsBackendTest, MoveToUnconfiguredDomainIsRefusedUntouched) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  const size_t writes = fake_->writes().size();
  absl::Status s = b->Move("gpu0", "", "other-tenant-vm");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(Contains(s, "'other-tenant-vm' is not one this MUX routes"));
  EXPECT_EQ(b->RecordedDomain("gpu0"), "");
  EXPECT_EQ(fake_->writes().size(), writes);
}

TEST_F(SysfsBackendTest, MoveFromWrongDomainIsRefused) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(b->Move("gpu0", "", "td-a").ok());
  absl::Status s = b->Move("gpu0", "td-b", "td-c");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "last routed it to 'td-a'"));
  EXPECT_EQ(b->RecordedDomain("gpu0"), "td-a");
}

TEST_F(SysfsBackendTest, MoveRefusedWhenNotOnVfioPci) {
  std::unique_ptr<SysfsBackend> b = MakeBackend(/*prepare=*/false);
  absl::Status s = b->Move("gpu0", "", "td-a");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "bound to 'nvidia', not vfio-pci"));
  EXPECT_TRUE(Contains(s, "prepare_host.sh --bdf 0000:98:00.0"));
  ASSERT_TRUE(b->Prepare("gpu0").ok());
  EXPECT_TRUE(b->Move("gpu0", "", "td-a").ok());
}

TEST_F(SysfsBackendTest, MoveRefusedWhileConsumerHoldsTheGroup) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(b->Move("gpu0", "", "td-a").ok());
  ASSERT_TRUE(fake_->AddProcess(777, "qemu-system-x86", {"/dev/vfio/42"}).ok());
  absl::Status s = b->Move("gpu0", "td-a", "td-b");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "pid 777 (qemu-system-x86) via /dev/vfio/42"));
  EXPECT_TRUE(Contains(s, "'td-a' must close the device"));
  EXPECT_EQ(b->RecordedDomain("gpu0"), "td-a");
  // Re-asserting the current route does not need the consumer to let go.
  EXPECT_TRUE(b->Move("gpu0", "td-a", "td-a").ok());
}

TEST_F(SysfsBackendTest, MoveDisablesResetThatWasReEnabled) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(fake_->WriteFile(fake_->DevicePath(kGpu) + "/reset_method",
                               "default")
                  .ok());
  ASSERT_TRUE(b->Move("gpu0", "", "td-a").ok());
  EXPECT_EQ(fake_->reset_method(kGpu), "");
}

TEST_F(SysfsBackendTest, MoveRefusedWhenGroupBecameNonViable) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  FakePciDevice audio;
  audio.bdf = "0000:98:00.1";
  audio.class_code = "0x040300";
  audio.driver = "nvidia";
  audio.iommu_group = "42";
  ASSERT_TRUE(fake_->AddDevice(audio).ok());
  absl::Status s = b->Move("gpu0", "", "td-a");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "0000:98:00.1 (class 0x040300) is bound to nvidia"));
}

TEST_F(SysfsBackendTest, MoveFailsWhenResetMethodWriteFails) {
  std::unique_ptr<SysfsBackend> b = MakeBackend(/*prepare=*/false);
  ASSERT_TRUE(fake_->ForceBind(kGpu, "vfio-pci").ok());
  fake_->FailWrites(fake_->DevicePath(kGpu) + "/reset_method", EIO);
  absl::Status s = b->Move("gpu0", "", "td-a");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "reset_method"));
  EXPECT_TRUE(Contains(s, "errno 5"));
  EXPECT_EQ(b->RecordedDomain("gpu0"), "");
}

// --- Reset and Release ----------------------------------------------------

TEST_F(SysfsBackendTest, ResetRestoresResetsAndDisablesAgain) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(b->Reset("gpu0").ok());
  EXPECT_EQ(fake_->reset_count(kGpu), 1);
  EXPECT_EQ(fake_->reset_method(kGpu), "");
  const std::string path = fake_->DevicePath(kGpu) + "/reset_method";
  std::vector<std::string> w = fake_->writes();
  ASSERT_GE(w.size(), 3u);
  EXPECT_EQ(w[w.size() - 3], path + " <- flr bus");
  EXPECT_EQ(w[w.size() - 1], path + " <- \\n");
}

TEST_F(SysfsBackendTest, FailedResetStillDisablesResetAgain) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  fake_->FailWrites(fake_->DevicePath(kGpu) + "/reset", EIO);
  absl::Status s = b->Reset("gpu0");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "function reset failed"));
  EXPECT_EQ(fake_->reset_method(kGpu), "");
}

TEST_F(SysfsBackendTest, ResetRefusesGpuOnTheHostsDriver) {
  std::unique_ptr<SysfsBackend> b = MakeBackend(/*prepare=*/false);
  absl::Status s = b->Reset("gpu0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "bound to 'nvidia', not vfio-pci"));
  EXPECT_EQ(fake_->reset_count(kGpu), 0);
  EXPECT_EQ(fake_->reset_method(kGpu), "flr bus");  // left as the host had it
  EXPECT_TRUE(fake_->writes().empty());
}

TEST_F(SysfsBackendTest, ResetRefusesGpuHeldByAProcess) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(fake_->AddProcess(4242, "qemu-system-x86", {"/dev/vfio/42"}).ok());
  const size_t writes = fake_->writes().size();
  absl::Status s = b->Reset("gpu0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "reset refused"));
  EXPECT_EQ(fake_->reset_count(kGpu), 0);
  EXPECT_EQ(fake_->writes().size(), writes);
}

// Every sysfs write is bounded, not only unbind and probe: a reset the
// kernel never returns from fails after driver_timeout.
TEST_F(SysfsBackendTest, ResetWriteThatNeverReturnsTimesOut) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  fake_->HangWrites(fake_->DevicePath(kGpu) + "/reset");
  const absl::Time start = absl::Now();
  absl::Status s = b->Reset("gpu0");
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// Threads of this process (/proc/self/task entries).
int ThreadCount() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

// ATTACK (route table vs reality): the same for the sysfs backend: "" -> ""
// skips the holder scan (it runs only when from != to), so a GPU that a
// process holds is confirmed unrouted. Secure: refused, naming no holder to
// the caller.
TEST_F(SysfsBackendTest, ConfirmingUnroutedScansForHolders) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(fake_->AddProcess(4245, "qemu-system-x86", {"/dev/vfio/42"}).ok());
  absl::Status s = b->Move("gpu0", "", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

// ATTACK (P8, reset a GPU held by someone else): the holder scan compares
// /proc/PID/fd link texts with "/dev/vfio/<group>" byte for byte. The kernel
// writes that text relative to the reader's root and marks unlinked nodes:
// a VMM chrooted by its jailer (firecracker's jailer, or any sandbox with
// its own /dev under a chroot) shows "/srv/jailer/.../root/dev/vfio/42", and
// a node removed while open (a namespace's /dev torn down) shows
// "/dev/vfio/42 (deleted)". Either holder is missed and Reset goes ahead
// under it. Secure: the scan identifies the device file itself (stat's
// st_rdev through /proc/PID/fd/N), not its name, and refuses.
TEST_F(SysfsBackendTest, ResetRefusesGpuHeldThroughAnyPathToItsGroup) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(fake_->AddProcess(4243, "firecracker",
                                {"/srv/jailer/firecracker/vm1/root/dev/vfio/42"})
                  .ok());
  ASSERT_TRUE(fake_->AddProcess(4244, "qemu-system-x86", {"/dev/vfio/42 (deleted)"}).ok());
  absl::Status s = b->Reset("gpu0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(fake_->reset_count(kGpu), 0) << "the GPU was reset under its holder";
}

// ATTACK (P8, threads): a reset whose sysfs write the kernel does not finish
// in driver_timeout (a device that stays "not ready" after FLR makes the
// kernel wait 60 s, and every later reset of that device queues behind it on
// the device lock) leaves its writer thread behind; the GPU is no longer
// busy, so the caller simply asks again. Each Reset RPC then leaks one
// thread, past the server's 16-thread cap and up to the unit's TasksMax, at
// which std::thread throws and the root MUX aborts. Secure: while an
// earlier write to the device is still pending in the kernel, a new reset is
// refused without starting another writer.
TEST_F(SysfsBackendTest, HungResetWritesDoNotPileUpThreads) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  fake_->HangWrites(fake_->DevicePath(kGpu) + "/reset");
  ASSERT_EQ(b->Reset("gpu0").code(), absl::StatusCode::kDeadlineExceeded);
  const int before = ThreadCount();
  ASSERT_GT(before, 0);
  for (int i = 0; i < 8; ++i) {
    absl::Status s = b->Reset("gpu0");
    EXPECT_FALSE(s.ok());
  }
  const int after = ThreadCount();
  fake_->ReleaseHangs();
  EXPECT_LE(after - before, 1) << "each Reset of a GPU whose reset write is still pending "
                                  "left one more thread blocked in the kernel ("
                               << before << " -> " << after << " threads)";
}

// ATTACK: a reset of one GPU that the kernel keeps
// waiting (up to driver_timeout, 10 s) must not stall moves of every other
// GPU: the backend serializes per GPU (per IOMMU group), not per backend.
TEST_F(SysfsBackendTest, SlowResetOfOneGpuDoesNotBlockAnotherGpusMove) {
  SysfsBackendOptions o = Options({{"gpu0", kGpu}, {"gpu1", kGpu2}});
  // Far longer than a move takes: a move that waited for gpu0's reset to give
  // up would take at least this.
  o.sysfs.driver_timeout = absl::Seconds(20);
  absl::StatusOr<std::unique_ptr<SysfsBackend>> b = SysfsBackend::Create(o, fake_);
  ASSERT_TRUE(b.ok()) << b.status();
  fake_->HangWrites(fake_->DevicePath(kGpu) + "/reset");
  std::thread resetter([&] { (void)(*b)->Reset("gpu0"); });
  EXPECT_TRUE(fake_->AwaitHeldWrites(1, absl::Seconds(30)))
      << "gpu0's reset never reached the kernel";
  const absl::Time start = absl::Now();
  absl::Status moved = (*b)->Move("gpu1", "", "td-a");
  const absl::Duration took = absl::Now() - start;
  fake_->ReleaseHangs();
  resetter.join();
  EXPECT_TRUE(moved.ok()) << moved;
  EXPECT_LT(took, o.sysfs.driver_timeout / 2)
      << "gpu1's move waited " << took << " for gpu0's pending reset";
}

TEST_F(SysfsBackendTest, ReleaseReturnsGpuToHost) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(b->Move("gpu0", "", "td-a").ok());
  ASSERT_TRUE(b->Release("gpu0").ok());
  EXPECT_EQ(fake_->driver(kGpu), "nvidia");
  EXPECT_EQ(fake_->reset_method(kGpu), "flr bus");
  EXPECT_EQ(b->RecordedDomain("gpu0"), "");
}

// The saved list no longer probes (another function joined the bus): the
// GPU still goes back, with what the kernel finds works now.
TEST_F(SysfsBackendTest, ReleaseFallsBackToTheKernelsListWhenTheSavedOneIsRefused) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  fake_->BreakResetMethod(kGpu, "bus");
  absl::Status s = b->Release("gpu0");
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(fake_->driver(kGpu), "nvidia");
  EXPECT_EQ(fake_->reset_method(kGpu), "flr");
}

TEST_F(SysfsBackendTest, ReleaseRefusedWhileHeld) {
  std::unique_ptr<SysfsBackend> b = MakeBackend();
  ASSERT_TRUE(fake_->AddProcess(888, "holder", {"/dev/vfio/42"}).ok());
  absl::Status s = b->Release("gpu0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(s, "pid 888"));
  EXPECT_EQ(fake_->driver(kGpu), "vfio-pci");
}

}  // namespace
}  // namespace gputravel
