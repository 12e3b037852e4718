// Runs inside the libvirt guest (run_scenario.sh LibvirtRoute): the MUX's
// route table and libvirt backend move the stand-in device between three
// nested VMs through the real libvirtd and QEMU, with the real kernel's
// vfio-pci underneath. Each hop's detach must end on libvirt's
// device-removed event and each attach on device-added; the kernel must show
// the device's VFIO group held by exactly the destination's QEMU.
#include <unistd.h>

#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vfio_mux/libvirt/libvirt_backend.h"
#include "vfio_mux/real_kernel/guest_machine.h"
#include "vfio_mux/real_kernel/nested_vms.h"
#include "vfio_mux/real_kernel/stand_in_sysfs.h"
#include "vfio_mux/real_kernel/vfio_consumer.h"
#include "vfio_mux/route_table.h"
#include "vfio_mux/sysfs/pci_sysfs.h"
#include "vfio_mux/sysfs/vfio_preparation.h"

namespace gputravel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kAlias[] = "ua-gputravel-gpu0";
constexpr char kOrchestrator[] = "orchestrator";
constexpr char kTdA[] = "td-a";
constexpr char kTdB[] = "td-b";

class LibvirtRoute : public ::testing::Test {
 protected:
  // The three nested VMs, started once for the suite (each start costs
  // tens of seconds under TCG), all with native PCIe hot-plug.
  static void SetUpTestSuite() {
    auto vms = NestedVms::Connect("qemu:///system");
    if (!vms.ok()) {
      setup_error_ = vms.status().ToString();
      return;
    }
    for (const char* name : {kOrchestrator, kTdA, kTdB}) {
      absl::Status s = (*vms)->Define(MinimalDomainXml(name, PciHotplug::kNativePcie));
      if (!s.ok()) {
        setup_error_ = s.ToString();
        return;
      }
    }
    const absl::Time start = absl::Now();
    absl::Status s = (*vms)->Start({kOrchestrator, kTdA, kTdB});
    std::cout << "LibvirtRoute: starting three nested VMs took "
              << absl::FormatDuration(absl::Now() - start) << std::endl;
    if (!s.ok()) {
      setup_error_ = s.ToString();
      return;
    }
    vms_ = *std::move(vms);
  }
  static void TearDownTestSuite() { vms_.reset(); }

  void SetUp() override {
    ASSERT_NE(vms_, nullptr) << "nested VMs: " << setup_error_;
    absl::StatusOr<std::string> bdf = FindPciFunction(kStandInVendor, kStandInDevice);
    ASSERT_TRUE(bdf.ok()) << bdf.status();
    bdf_ = *bdf;
    fs_ = std::make_shared<StandInSysfsFs>("/sys", std::set<std::string>{bdf_});
    sysfs_ = std::make_unique<PciSysfs>(SysfsOptions(), fs_);
    dir_ = absl::StrCat(kDataDir, "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0) << dir_;
  }

  static PciSysfsOptions SysfsOptions() {
    PciSysfsOptions o;
    o.driver_timeout = absl::Seconds(20);
    return o;
  }

  // The MUX's libvirt backend as its config would make it: three domains,
  // sysfs checks on (through the stand-in sysfs), TDX not required unless
  // asked (the nested VMs cannot be TDs).
  std::unique_ptr<LibvirtBackend> NewBackend(bool require_tdx = false) {
    LibvirtBackendOptions o;
    o.uri = "qemu:///system";
    o.gpus = {{"gpu0", bdf_, ""}};
    o.domains = {kOrchestrator, kTdA, kTdB};
    o.detach_timeout = absl::Seconds(60);
    o.require_tdx = require_tdx;
    o.sysfs = SysfsOptions();
    auto b = LibvirtBackend::Create(o, fs_);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  std::unique_ptr<RouteTable> OpenTable(RoutingBackend* backend) {
    RouteTableOptions to;
    to.domains = {kOrchestrator, kTdA, kTdB};
    auto t = RouteTable::Open(backend, dir_ + "/state.json", dir_ + "/audit.log", to);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *std::move(t) : nullptr;
  }

  // What `vfio_mux prepare` does on a host: vfio-pci, reset disabled.
  void Prepare() {
    auto p = PrepareGpuForVfio(*sysfs_, bdf_);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(PciDriver(bdf_), "vfio-pci");
    ASSERT_EQ(PciAttr(bdf_, "reset_method"), "");
  }

  // The pids of the processes that hold the device's VFIO group, per the
  // kernel (the MUX's holder scan over /proc).
  std::vector<int> VfioHolderPids() {
    auto holders = sysfs_->FindVfioHolders(bdf_);
    EXPECT_TRUE(holders.ok()) << holders.status();
    std::vector<int> pids;
    if (holders.ok()) {
      for (const VfioHolder& h : *holders) pids.push_back(h.pid);
    }
    return pids;
  }
  int QemuPid(const std::string& domain) {
    auto pid = vms_->QemuPid(domain);
    EXPECT_TRUE(pid.ok()) << pid.status();
    return pid.ok() ? *pid : -1;
  }
  // The first event of `kind` for the GPU's alias on `domain` since `since`.
  std::optional<DeviceEvent> FindEvent(const std::string& domain, const std::string& kind,
                                       absl::Time since) {
    for (const DeviceEvent& e : vms_->Events()) {
      if (e.domain == domain && e.kind == kind && e.alias == kAlias && e.time >= since) return e;
    }
    return std::nullopt;
  }

  static inline std::unique_ptr<NestedVms> vms_;
  static inline std::string setup_error_;
  std::string bdf_, dir_;
  std::shared_ptr<SysfsFs> fs_;
  std::unique_ptr<PciSysfs> sysfs_;
};

TEST_F(LibvirtRoute, RouteMovesTheDeviceBetweenHoldersAndBackOnDeviceEvents) {
  Prepare();
  auto backend = NewBackend();
  ASSERT_NE(backend, nullptr);
  auto table = OpenTable(backend.get());
  ASSERT_NE(table, nullptr);
  ASSERT_THAT(*backend->DomainsHolding("gpu0"), IsEmpty());

  struct Hop {
    const char* to;
    uint64_t token;
  };
  std::string from;
  for (const Hop& hop : {Hop{kOrchestrator, 1}, Hop{kTdA, 2}, Hop{kTdB, 3},
                         Hop{kOrchestrator, 4}}) {
    SCOPED_TRACE(absl::StrCat("route '", from, "' -> '", hop.to, "'"));
    const absl::Time start = absl::Now();
    absl::StatusOr<Route> r = table->RouteTo("gpu0", hop.to, hop.token);
    const absl::Time end = absl::Now();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->domain, hop.to);
    EXPECT_EQ(r->fencing_token, hop.token);
    std::cout << "LibvirtRoute: route '" << from << "' -> '" << hop.to << "' took "
              << absl::FormatDuration(end - start) << std::endl;

    // libvirt: the destination alone lists it, and said so with an event.
    EXPECT_THAT(*backend->DomainsHolding("gpu0"), ElementsAre(hop.to));
    EXPECT_TRUE(vms_->WaitForEvent(hop.to, "added", kAlias, start, absl::Seconds(10)))
        << "no device-added event from '" << hop.to << "'";
    if (!from.empty()) {
      // The detach was done on the device-removed event: it came before the
      // route returned (this recorder's callback runs before the backend's,
      // registered earlier on the same event loop).
      std::optional<DeviceEvent> removed = FindEvent(from, "removed", start);
      ASSERT_TRUE(removed.has_value()) << "route returned before '" << from
                                       << "' sent device-removed";
      EXPECT_LE(removed->time, end);
      std::optional<DeviceEvent> added = FindEvent(hop.to, "added", start);
      ASSERT_TRUE(added.has_value());
      EXPECT_LE(removed->time, added->time) << "attached before the detach was done";
    }
    EXPECT_FALSE(FindEvent(hop.to, "removal-failed", start).has_value());

    // The kernel: still on vfio-pci with reset disabled (managed='no': libvirt
    // never rebinds it), and its group is held by the destination's QEMU only.
    EXPECT_EQ(PciDriver(bdf_), "vfio-pci");
    EXPECT_EQ(PciAttr(bdf_, "reset_method"), "");
    EXPECT_THAT(VfioHolderPids(), ElementsAre(QemuPid(hop.to)));
    from = hop.to;
  }

  // The route home ends unrouted: nothing holds the device.
  const absl::Time start = absl::Now();
  absl::StatusOr<Route> r = table->RouteTo("gpu0", "", 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->domain, "");
  EXPECT_TRUE(FindEvent(kOrchestrator, "removed", start).has_value());
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), IsEmpty());
  EXPECT_THAT(VfioHolderPids(), IsEmpty());
  EXPECT_EQ(PciDriver(bdf_), "vfio-pci");
}

// A device its host driver still holds is never handed to libvirt.
TEST_F(LibvirtRoute, ADeviceOnItsHostDriverIsRefusedBeforeLibvirtIsAsked) {
  ASSERT_TRUE(sysfs_->ReturnToHost(bdf_).ok());
  ASSERT_TRUE(sysfs_->WriteResetMethod(bdf_, "default").ok());
  ASSERT_EQ(PciDriver(bdf_), "virtio-pci");
  auto backend = NewBackend();
  ASSERT_NE(backend, nullptr);
  auto table = OpenTable(backend.get());
  ASSERT_NE(table, nullptr);

  const absl::Time start = absl::Now();
  absl::StatusOr<Route> r = table->RouteTo("gpu0", kTdA, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("bound to 'virtio-pci', not vfio-pci"));
  EXPECT_EQ(PciDriver(bdf_), "virtio-pci");
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "flr pm bus");
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), IsEmpty());
  EXPECT_FALSE(FindEvent(kTdA, "added", start).has_value());
  EXPECT_EQ(table->Get("gpu0")->domain, "");
}

// A host process (not a VM) with the device's VFIO group open: QEMU cannot
// open the group, libvirt's attach fails, and nothing claims the device.
TEST_F(LibvirtRoute, AHostProcessHoldingTheGroupMakesTheAttachFailAndNothingClaimsIt) {
  Prepare();
  auto backend = NewBackend();
  ASSERT_NE(backend, nullptr);
  auto table = OpenTable(backend.get());
  ASSERT_NE(table, nullptr);
  {
    auto holder = VfioConsumer::OpenGroup(PciIommuGroup(bdf_));
    ASSERT_TRUE(holder.ok()) << holder.status();
    ASSERT_TRUE(holder->Take(bdf_).ok());
    EXPECT_THAT(VfioHolderPids(), ElementsAre(getpid()));

    absl::StatusOr<Route> r = table->RouteTo("gpu0", kTdA, 1);
    ASSERT_FALSE(r.ok()) << "attached while a host process holds the group";
    std::cout << "LibvirtRoute: attach with the group held: " << r.status() << std::endl;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("attaching GPU gpu0 (" + bdf_ + ") to domain 'td-a'"));
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(absl::StrCat("held open by pid ", getpid(), " (")));
    EXPECT_THAT(*backend->DomainsHolding("gpu0"), IsEmpty());
    EXPECT_EQ(table->Get("gpu0")->domain, "");
    EXPECT_THAT(VfioHolderPids(), ElementsAre(getpid()));
  }
  // Let go: the same route goes through.
  absl::StatusOr<Route> r = table->RouteTo("gpu0", kTdA, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), ElementsAre(kTdA));
  EXPECT_THAT(VfioHolderPids(), ElementsAre(QemuPid(kTdA)));
  r = table->RouteTo("gpu0", "", 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(VfioHolderPids(), IsEmpty());
}

// require_tdx (the production default) on real libvirt: a VM that is not a
// TD is refused from its live XML, before any hot-plug.
TEST_F(LibvirtRoute, ADomainThatIsNotATdIsRefusedFromItsLiveXml) {
  Prepare();
  auto backend = NewBackend(/*require_tdx=*/true);
  ASSERT_NE(backend, nullptr);
  const absl::Time start = absl::Now();
  absl::Status s = backend->Move("gpu0", "", kOrchestrator);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("not a TDX guest"));
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), IsEmpty());
  EXPECT_FALSE(FindEvent(kOrchestrator, "added", start).has_value());
}

// The destination stops between the route's detach and its attach: the
// route fails saying so, the device is left in no VM, and the next route
// (to the orchestrator) goes through. Runs last: td-b stays down.
TEST_F(LibvirtRoute, ADestinationThatDisappearsMidRouteLeavesTheDeviceFree) {
  Prepare();
  auto backend = NewBackend();
  ASSERT_NE(backend, nullptr);
  auto table = OpenTable(backend.get());
  ASSERT_NE(table, nullptr);
  absl::StatusOr<Route> r = table->RouteTo("gpu0", kTdA, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(vms_->Destroy(kTdB).ok());

  const absl::Time start = absl::Now();
  r = table->RouteTo("gpu0", kTdB, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("the domain is not running"));
  EXPECT_TRUE(FindEvent(kTdA, "removed", start).has_value());
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), IsEmpty());
  EXPECT_THAT(VfioHolderPids(), IsEmpty());
  // The table keeps the last route that succeeded; the next route from
  // there finds td-a holding nothing and goes on.
  EXPECT_EQ(table->Get("gpu0")->domain, kTdA);
  r = table->RouteTo("gpu0", kOrchestrator, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), ElementsAre(kOrchestrator));
  r = table->RouteTo("gpu0", "", 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(VfioHolderPids(), IsEmpty());
}

}  // namespace
}  // namespace gputravel
