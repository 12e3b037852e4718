// Runs inside the real-kernel guest (run_scenario.sh SysfsRoute): the sysfs
// backend and the route table move a device between the kernel's own host
// driver and vfio-pci, with a real VFIO consumer holding it.
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vfio_mux/real_kernel/function_trace.h"
#include "vfio_mux/real_kernel/guest_machine.h"
#include "vfio_mux/real_kernel/stand_in_sysfs.h"
#include "vfio_mux/real_kernel/vfio_consumer.h"
#include "vfio_mux/route_table.h"
#include "vfio_mux/sysfs/sysfs_backend.h"
#include "vfio_mux/sysfs/sysfs_fs.h"
#include "vfio_mux/sysfs/vfio_preparation.h"

namespace gputravel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SysfsRoute : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> bdf = FindPciFunction(kStandInVendor, kStandInDevice);
    ASSERT_TRUE(bdf.ok()) << bdf.status();
    bdf_ = *bdf;
    // Every test starts and ends with the device on its host driver.
    ASSERT_EQ(PciDriver(bdf_), "virtio-pci");
    ASSERT_EQ(PciAttr(bdf_, "reset_method"), "flr pm bus");
    SysfsBackendOptions o;
    o.sysfs.driver_timeout = absl::Seconds(20);
    o.gpus = {{"gpu0", bdf_}};
    o.domains = {"td-a", "td-b"};
    auto b = SysfsBackend::Create(o, std::make_shared<StandInSysfsFs>("/sys", std::set<std::string>{bdf_}));
    ASSERT_TRUE(b.ok()) << b.status();
    backend_ = *std::move(b);
  }

  void TearDown() override {
    if (backend_ == nullptr) return;
    absl::Status s = backend_->Release("gpu0");
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(PciDriver(bdf_), "virtio-pci");
    EXPECT_EQ(PciAttr(bdf_, "reset_method"), "flr pm bus");
  }

  std::string bdf_;
  std::unique_ptr<SysfsBackend> backend_;
};

TEST_F(SysfsRoute, CreateOnlyInspectsAndMoveNeedsAPreparedHost) {
  auto gpus = backend_->ListGpus();
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].bdf, bdf_);
  EXPECT_EQ((*gpus)[0].driver, "virtio-pci");
  EXPECT_EQ((*gpus)[0].iommu_group, PciIommuGroup(bdf_));
  EXPECT_FALSE((*gpus)[0].iommu_group.empty()) << "intel-iommu gave the device no group";

  absl::Status s = backend_->Move("gpu0", "", "td-a");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("bound to 'virtio-pci', not vfio-pci"));
  EXPECT_EQ(PciDriver(bdf_), "virtio-pci");
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "flr pm bus");
}

// The sequence `vfio_mux prepare` (deploy/host/prepare_host.sh) runs: its dry
// run changes nothing and names the writes Prepare then makes.
TEST_F(SysfsRoute, PrepareDryRunNamesTheWritesAndChangesNothing) {
  std::vector<std::string> planned;
  VfioPreparationOptions dry;
  dry.dry_run = true;
  dry.report = [&](const std::string& line) {
    if (line.rfind("DRY-RUN: ", 0) == 0) planned.push_back(line);
  };
  auto p = PrepareGpuForVfio(backend_->sysfs(), bdf_, dry);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->found.driver, "virtio-pci");
  EXPECT_EQ(p->reset_methods, "flr pm bus");
  const std::string dev = "/sys/bus/pci/devices/" + bdf_;
  EXPECT_THAT(planned,
              ElementsAre(absl::StrCat("DRY-RUN: would write 'vfio-pci' to ", dev,
                                       "/driver_override (setting driver_override to vfio-pci)"),
                          absl::StrCat("DRY-RUN: would write '", bdf_, "' to ", dev,
                                       "/driver/unbind (unbinding from virtio-pci)"),
                          absl::StrCat("DRY-RUN: would write '", bdf_,
                                       "' to /sys/bus/pci/drivers_probe (probing for vfio-pci)"),
                          absl::StrCat("DRY-RUN: would write '\\n' to ", dev,
                                       "/reset_method (disabling reset)")));
  EXPECT_EQ(PciDriver(bdf_), "virtio-pci");
  EXPECT_EQ(PciAttr(bdf_, "driver_override"), "(null)");
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "flr pm bus");

  auto done = PrepareGpuForVfio(backend_->sysfs(), bdf_);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(PciDriver(bdf_), "vfio-pci");
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "");
  // Release restores the kernel's list ("default": the backend did not
  // prepare this one, so it saved none).
}

TEST_F(SysfsRoute, PrepareBindsToVfioPciAndReleaseGivesItBack) {
  ASSERT_TRUE(backend_->Prepare("gpu0").ok());
  EXPECT_EQ(PciDriver(bdf_), "vfio-pci");
  EXPECT_EQ(PciAttr(bdf_, "driver_override"), "vfio-pci");
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "") << "reset must be disabled while on vfio-pci";
  const std::string group = PciIommuGroup(bdf_);
  EXPECT_EQ(access(("/dev/vfio/" + group).c_str(), F_OK), 0) << "no /dev/vfio/" << group;
  // Idempotent.
  absl::Status again = backend_->Prepare("gpu0");
  EXPECT_TRUE(again.ok()) << again;

  absl::Status s = backend_->Release("gpu0");
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(PciDriver(bdf_), "virtio-pci");
  EXPECT_EQ(PciAttr(bdf_, "driver_override"), "(null)");
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "flr pm bus");
  // The host driver really has it again: its network interface is back.
  auto virtio = RealSysfsFs()->ListDir(absl::StrCat("/sys/bus/pci/devices/", bdf_));
  ASSERT_TRUE(virtio.ok());
  bool has_net = false;
  for (const std::string& e : *virtio) {
    if (e.rfind("virtio", 0) == 0) {
      has_net = RealSysfsFs()->Exists(absl::StrCat("/sys/bus/pci/devices/", bdf_, "/", e, "/net"));
    }
  }
  EXPECT_TRUE(has_net) << "virtio-net did not come back on " << bdf_;
}

TEST_F(SysfsRoute, RoutesWithFencingAndRefusesWhileAConsumerHoldsIt) {
  ASSERT_TRUE(backend_->Prepare("gpu0").ok());
  const std::string dir = absl::StrCat(kDataDir, "/route-", getpid());
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  RouteTableOptions to;
  to.domains = {"td-a", "td-b"};
  auto table = RouteTable::Open(backend_.get(), dir + "/state.json", dir + "/audit.log", to);
  ASSERT_TRUE(table.ok()) << table.status();

  auto r = (*table)->RouteTo("gpu0", "td-a", 1);
  ASSERT_TRUE(r.ok()) << r.status();

  // td-a's VMM takes the device the way QEMU does.
  auto consumer = VfioConsumer::OpenGroup(PciIommuGroup(bdf_));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  auto viable = consumer->Viable();
  ASSERT_TRUE(viable.ok()) << viable.status();
  EXPECT_TRUE(*viable);
  absl::Status took = consumer->Take(bdf_);
  ASSERT_TRUE(took.ok()) << took;
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "");

  // Staying with td-a while it holds the device is fine; leaving is not.
  r = (*table)->RouteTo("gpu0", "td-a", 1);
  EXPECT_TRUE(r.ok()) << r.status();
  r = (*table)->RouteTo("gpu0", "td-b", 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(absl::StrCat("pid ", getpid())));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/dev/vfio/" + PciIommuGroup(bdf_)));
  absl::Status reset = (*table)->Reset("gpu0", 2);
  EXPECT_EQ(reset.code(), absl::StatusCode::kFailedPrecondition) << reset;

  consumer->Close();
  EXPECT_EQ(PciDriver(bdf_), "vfio-pci");
  r = (*table)->RouteTo("gpu0", "td-b", 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->domain, "td-b");
  // A stale token is fenced off, whatever it asks for.
  r = (*table)->RouteTo("gpu0", "td-a", 1);
  EXPECT_FALSE(r.ok());
  auto now = (*table)->Get("gpu0");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->domain, "td-b");
  EXPECT_EQ(now->fencing_token, 2u);
  r = (*table)->RouteTo("gpu0", "", 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*table)->Close().ok());
}

TEST_F(SysfsRoute, ResetMethodIsTheKernelsList) {
  ASSERT_TRUE(backend_->Prepare("gpu0").ok());
  PciSysfs& sysfs = backend_->sysfs();
  for (const char* methods : {"bus", "pm", "flr", "pm bus", "bus flr"}) {
    absl::Status s = sysfs.WriteResetMethod(bdf_, methods);
    EXPECT_TRUE(s.ok()) << methods << ": " << s;
    EXPECT_EQ(PciAttr(bdf_, "reset_method"), methods);
  }
  // A method the device lacks, or no method at all: EINVAL, list unchanged.
  for (const char* bad : {"device_specific", "bogus"}) {
    absl::Status s = sysfs.WriteResetMethod(bdf_, bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
    EXPECT_EQ(PciAttr(bdf_, "reset_method"), "bus flr");
  }
  ASSERT_TRUE(sysfs.WriteResetMethod(bdf_, "default").ok());
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "flr pm bus");
  ASSERT_TRUE(sysfs.WriteResetMethod(bdf_, "").ok());
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "");
  // With every method disabled the kernel refuses a reset (ENOTTY).
  absl::Status s = sysfs.FunctionReset(bdf_);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("reset_method is empty"));
}

TEST_F(SysfsRoute, ResetRestoresTheMethodsResetsAndDisablesThemAgain) {
  ASSERT_TRUE(backend_->Prepare("gpu0").ok());
  absl::Status s = backend_->Reset("gpu0");
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "");
  EXPECT_EQ(PciDriver(bdf_), "vfio-pci");
  // A consumer holding the device: refused, untouched.
  auto consumer = VfioConsumer::OpenGroup(PciIommuGroup(bdf_));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE(consumer->Take(bdf_).ok());
  s = backend_->Reset("gpu0");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("pid ", getpid())));
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "");
  consumer->Close();
  // Release refuses while held too; here nothing holds it.
}

// What an empty reset_method does and does not stop. The device is alone
// below its root port, so the kernel can reset its bus ("bus" was in its
// list). A consumer that takes the device and lets go: no function reset
// (the list is empty), but vfio-pci's release still resets the bus
// (vfio_pci_dev_set_try_reset -> pci_reset_bus ignores reset_method): the
// state a CC session needs does not survive the release. (Debian's 6.1.)
TEST_F(SysfsRoute, AReleaseByAConsumerStillResetsTheBusWithResetMethodEmpty) {
  ASSERT_TRUE(backend_->Prepare("gpu0").ok());
  ASSERT_EQ(PciAttr(bdf_, "reset_method"), "");
  // pci_reset_secondary_bus sets the bridge's Secondary Bus Reset bit
  // (pci_bridge_secondary_bus_reset is inlined into its callers).
  auto trace = FunctionTrace::Start({"pcie_flr", "pci_reset_bus", "pci_reset_secondary_bus"});
  ASSERT_TRUE(trace.ok()) << trace.status();
  {
    auto consumer = VfioConsumer::OpenGroup(PciIommuGroup(bdf_));
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    absl::Status took = consumer->Take(bdf_);
    ASSERT_TRUE(took.ok()) << took;
  }
  auto calls = trace->Stop();
  ASSERT_TRUE(calls.ok()) << calls.status();
  for (const auto& [f, n] : *calls) std::cout << "calls of " << f << ": " << n << "\n";
  EXPECT_EQ((*calls)["pcie_flr"], 0) << "a function reset despite the empty reset_method";
  EXPECT_GE((*calls)["pci_reset_bus"], 1) << "vfio-pci released the device without a bus reset";
  EXPECT_GE((*calls)["pci_reset_secondary_bus"], 1) << "no Secondary Bus Reset was issued";
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "");
}

}  // namespace
}  // namespace gputravel
