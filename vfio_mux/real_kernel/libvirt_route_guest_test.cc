// Runs inside the libvirt guest (run_scenario.sh LibvirtRoute): the MUX's
// route table and libvirt backend move the stand-in device between three
// nested VMs through the real libvirtd and QEMU, with the real kernel's
// vfio-pci underneath. Each hop's detach must end on libvirt's
// device-removed event and each attach on device-added; the kernel must show
// the device's VFIO group held by exactly the destination's QEMU.
#include <sys/stat.h>
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
#include "vfio_mux/real_kernel/libvirt_guest_fixture.h"
#include "vfio_mux/real_kernel/vfio_consumer.h"
#include "vfio_mux/route_table.h"

namespace gputravel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kOrchestrator[] = "orchestrator";
constexpr char kTdA[] = "td-a";
constexpr char kTdB[] = "td-b";

class LibvirtRoute : public LibvirtGuestFixture {
 protected:
  // Three nested VMs, all with native PCIe hot-plug.
  static void SetUpTestSuite() {
    LaunchVms({{kOrchestrator, PciHotplug::kNativePcie},
               {kTdA, PciHotplug::kNativePcie},
               {kTdB, PciHotplug::kNativePcie}});
  }

  void SetUp() override {
    LibvirtGuestFixture::SetUp();
    if (HasFatalFailure()) return;
    dir_ = absl::StrCat(kDataDir, "/",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0) << dir_;
  }

  // The MUX's libvirt backend as its config would make it for the three
  // domains; TDX not required unless asked (the nested VMs cannot be TDs).
  std::unique_ptr<LibvirtBackend> NewBackend(bool require_tdx = false) {
    LibvirtBackendOptions o = gpu_->BackendOptions({kOrchestrator, kTdA, kTdB}, require_tdx);
    o.detach_timeout = absl::Seconds(60);
    auto b = LibvirtBackend::Create(o, gpu_->fs());
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
  void Prepare() {
    absl::Status s = gpu_->Prepare();
    ASSERT_TRUE(s.ok()) << s;
  }

  std::string dir_;
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
    std::optional<DeviceEvent> added = AwaitEvent(hop.to, "added", start);
    ASSERT_TRUE(added.has_value()) << "no device-added event from '" << hop.to << "'";
    if (!from.empty()) {
      // libvirt emitted the source's device-removed before the
      // destination's device-added: the attach waited for the removal.
      std::optional<DeviceEvent> removed = AwaitEvent(from, "removed", start);
      ASSERT_TRUE(removed.has_value()) << "no device-removed event from '" << from << "'";
      EXPECT_LT(removed->seq, added->seq) << "attached before the detach was done";
    }
    EXPECT_FALSE(EventSeen(hop.to, "removal-failed", start));

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
  EXPECT_TRUE(AwaitEvent(kOrchestrator, "removed", start).has_value());
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), IsEmpty());
  EXPECT_THAT(VfioHolderPids(), IsEmpty());
  EXPECT_EQ(PciDriver(bdf_), "vfio-pci");
}

// A device its host driver still holds is never handed to libvirt.
TEST_F(LibvirtRoute, ADeviceOnItsHostDriverIsRefusedBeforeLibvirtIsAsked) {
  ASSERT_TRUE(gpu_->sysfs().ReturnToHost(bdf_).ok());
  ASSERT_TRUE(gpu_->sysfs().WriteResetMethod(bdf_, "default").ok());
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
  EXPECT_FALSE(EventSeen(kTdA, "added", start));
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
  EXPECT_FALSE(EventSeen(kOrchestrator, "added", start));
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
  ASSERT_TRUE(vms()->Destroy(kTdB).ok());

  const absl::Time start = absl::Now();
  r = table->RouteTo("gpu0", kTdB, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("the domain is not running"));
  EXPECT_TRUE(AwaitEvent(kTdA, "removed", start).has_value());
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
