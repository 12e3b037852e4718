// Runs inside the libvirt guest (run_scenario.sh LibvirtTemplate): the TDX
// domain template deploy/libvirt/tdx-guest.xml in the real libvirt (9.0),
// with what that libvirt and a TCG guest cannot run set aside, each named;
// the MUX hot-plugs the stand-in device into one of its spare root ports.
// Its root ports use QEMU's default ACPI hot-plug, and the domain runs no
// OS, so nothing answers an unplug: the MUX's detach must time out into an
// error with the device still fenced in that domain, never report success on
// libvirt's word; and when the domain goes away mid-detach, the route
// completes.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vfio_mux/libvirt/libvirt_backend.h"
#include "vfio_mux/real_kernel/guest_machine.h"
#include "vfio_mux/real_kernel/libvirt_guest_fixture.h"
#include "vfio_mux/route_table.h"

namespace gputravel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kTemplatePath[] = "/guest/tdx-guest.xml";
constexpr char kTd[] = "td1";  // the template's own name
constexpr char kOrchestrator[] = "orchestrator";

// `xml` with the one occurrence of `from` replaced by `to`; an error naming
// `from` when it occurs otherwise (the template changed: the edit needs
// review).
absl::Status ReplaceOnce(std::string& xml, const std::string& from, const std::string& to) {
  size_t at = xml.find(from);
  if (at == std::string::npos || xml.find(from, at + 1) != std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        kTemplatePath, ": expected exactly one \"", from,
        "\"; the template changed, so review what the test sets aside"));
  }
  xml.replace(at, from.size(), to);
  return absl::OkStatus();
}

// Removes the one range from `begin` through `end` (and the rest of its line).
absl::Status RemoveOnce(std::string& xml, const std::string& begin, const std::string& end) {
  size_t b = xml.find(begin);
  size_t e = b == std::string::npos ? std::string::npos : xml.find(end, b);
  if (b == std::string::npos || e == std::string::npos ||
      xml.find(begin, b + 1) != std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        kTemplatePath, ": expected exactly one \"", begin, "\" ... \"", end,
        "\"; the template changed, so review what the test sets aside"));
  }
  size_t line_start = xml.rfind('\n', b);
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  size_t line_end = xml.find('\n', e);
  line_end = line_end == std::string::npos ? xml.size() : line_end + 1;
  xml.erase(line_start, line_end - line_start);
  return absl::OkStatus();
}

// The template as this guest can run it. Everything else is the template's.
// Set aside, each for a stated reason:
//   - the TDX-ONLY block (<launchSecurity type='tdx'>): Debian 12's libvirt
//     9.0 does not know it (needs libvirt 11.x); unless keep_tdx;
//   - type='kvm' -> 'qemu', <cpu mode='host-passthrough'>: no KVM here (TCG);
//   - the TDVF <loader>: OVMF.inteltdx.fd is not packaged in Debian 12 (the
//     domain boots SeaBIOS, and no OS);
//   - 64 GiB and 16 vCPUs -> 128 MiB and 1: VFIO pins all guest memory;
//   - <interface type='network'> (libvirt's 'default' network) -> 'user': no
//     libvirt networks in the guest (the virtio NIC and its slot stay);
//   - the <hostdev>: the hot-plug way, as the template's comment says.
// The disk's qcow2 file is created by the test.
absl::StatusOr<std::string> TemplateForThisGuest(bool keep_tdx) {
  std::ifstream in(kTemplatePath);
  std::stringstream buf;
  buf << in.rdbuf();
  std::string xml = buf.str();
  if (xml.empty()) return absl::NotFoundError(absl::StrCat(kTemplatePath, " missing or empty"));
  std::vector<absl::Status> edits;
  if (!keep_tdx) edits.push_back(RemoveOnce(xml, "<!-- TDX-ONLY BEGIN", "TDX-ONLY END -->"));
  edits.push_back(ReplaceOnce(xml, "<domain type='kvm'", "<domain type='qemu'"));
  edits.push_back(RemoveOnce(xml, "<cpu mode='host-passthrough'>", "</cpu>"));
  edits.push_back(RemoveOnce(xml, "<loader type='rom'", "</loader>"));
  edits.push_back(ReplaceOnce(xml, "<memory unit='GiB'>64</memory>", "<memory unit='MiB'>128</memory>"));
  edits.push_back(ReplaceOnce(xml, "<currentMemory unit='GiB'>64</currentMemory>",
                              "<currentMemory unit='MiB'>128</currentMemory>"));
  edits.push_back(ReplaceOnce(xml, "<vcpu placement='static'>16</vcpu>",
                              "<vcpu placement='static'>1</vcpu>"));
  edits.push_back(ReplaceOnce(xml, "<interface type='network'>", "<interface type='user'>"));
  edits.push_back(RemoveOnce(xml, "<source network='default'/>", "/>"));
  edits.push_back(RemoveOnce(xml, "<hostdev mode='subsystem'", "</hostdev>"));
  for (const absl::Status& s : edits) {
    if (!s.ok()) return s;
  }
  return xml;
}

// The value of attribute `name` in the first element that starts at or after
// `from` with `tag`, or "".
std::string Attr(const std::string& xml, size_t from, const std::string& tag,
                 const std::string& name, size_t* at = nullptr) {
  size_t t = xml.find(tag, from);
  if (t == std::string::npos) return "";
  size_t close = xml.find('>', t);
  std::string element = xml.substr(t, close - t);
  if (at != nullptr) *at = t;
  std::string key = " " + name + "='";
  size_t k = element.find(key);
  if (k == std::string::npos) return "";
  size_t v = k + key.size();
  return element.substr(v, element.find('\'', v) - v);
}

int HexOrDec(const std::string& s) {
  int v = -1;
  if (s.rfind("0x", 0) == 0) {
    if (!absl::SimpleHexAtoi(s.substr(2), &v)) return -1;
  } else if (!absl::SimpleAtoi(s, &v)) {
    return -1;
  }
  return v;
}

// The pcie-root-port controllers of a live XML with nothing behind them.
std::set<int> EmptyRootPorts(const std::string& xml) {
  std::set<int> ports, used;
  const std::string port = "<controller type='pci' index='";
  for (size_t at = xml.find(port); at != std::string::npos; at = xml.find(port, at + 1)) {
    size_t close = xml.find('>', at);
    std::string element = xml.substr(at, close - at);
    if (element.find("model='pcie-root-port'") != std::string::npos) {
      ports.insert(HexOrDec(Attr(xml, at, "<controller", "index")));
    }
  }
  const std::string address = "<address type='pci'";
  for (size_t at = xml.find(address); at != std::string::npos; at = xml.find(address, at + 1)) {
    used.insert(HexOrDec(Attr(xml, at, address, "bus")));
  }
  std::set<int> empty;
  for (int p : ports) {
    if (used.count(p) == 0) empty.insert(p);
  }
  return empty;
}

// The guest bus of the hostdev in a live XML, -1 when none.
int HostdevGuestBus(const std::string& xml) {
  size_t h = xml.find("<hostdev ");
  if (h == std::string::npos) return -1;
  size_t end = xml.find("</hostdev>", h);
  size_t at = 0;
  std::string bus = Attr(xml, h, "<address type='pci'", "bus", &at);
  return at < end ? HexOrDec(bus) : -1;
}

class LibvirtTemplate : public LibvirtGuestFixture {
 protected:
  // The orchestrator's stand-in (native PCIe hot-plug); the template's
  // domain is defined and started by the first test.
  static void SetUpTestSuite() { LaunchVms({{kOrchestrator, PciHotplug::kNativePcie}}); }

  void SetUp() override {
    LibvirtGuestFixture::SetUp();
    if (HasFatalFailure()) return;
    absl::Status s = gpu_->Prepare();
    ASSERT_TRUE(s.ok()) << s;
  }

  // The backend with the template's domain. require_tdx is off: the TDX
  // element is what this libvirt cannot take (LibvirtRoute checks the
  // refusal of a non-TD on real libvirt).
  std::unique_ptr<LibvirtBackend> NewBackend(absl::Duration detach_timeout) {
    LibvirtBackendOptions o = gpu_->BackendOptions({kOrchestrator, kTd}, /*require_tdx=*/false);
    o.detach_timeout = detach_timeout;
    auto b = LibvirtBackend::Create(o, gpu_->fs());
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  // One route table for the suite's tests, on the ext4 test disk: its
  // fencing tokens carry from test to test, as the MUX's would.
  absl::StatusOr<std::unique_ptr<RouteTable>> OpenTable(RoutingBackend* backend) {
    const std::string dir = absl::StrCat(kDataDir, "/template-routes");
    mkdir(dir.c_str(), 0700);
    RouteTableOptions to;
    to.domains = {kOrchestrator, kTd};
    return RouteTable::Open(backend, dir + "/state.json", dir + "/audit.log", to);
  }

  static inline std::set<int> spare_ports_;
};

TEST_F(LibvirtTemplate, LibvirtTakesTheTemplateWithTheTdxBlockSetAsideAndLeavesRootPortsSpare) {
  // With the TDX block this libvirt refuses the domain, naming the element.
  absl::StatusOr<std::string> with_tdx = TemplateForThisGuest(/*keep_tdx=*/true);
  ASSERT_TRUE(with_tdx.ok()) << with_tdx.status();
  absl::Status refused = vms()->Define(*with_tdx);
  std::cout << "LibvirtTemplate: with <launchSecurity type='tdx'>: " << refused << std::endl;
  EXPECT_FALSE(refused.ok()) << "this libvirt knows TDX: drop the set-aside of the TDX block";
  EXPECT_THAT(std::string(refused.message()), HasSubstr("tdx"));

  absl::StatusOr<std::string> xml = TemplateForThisGuest(/*keep_tdx=*/false);
  ASSERT_TRUE(xml.ok()) << xml.status();
  ASSERT_EQ(system("qemu-img create -q -f qcow2 /var/lib/libvirt/images/td1.qcow2 64M"), 0);
  absl::Status defined = vms()->Define(*xml);
  ASSERT_TRUE(defined.ok()) << defined;
  const absl::Time start = absl::Now();
  absl::Status started = vms()->Start({kTd});
  ASSERT_TRUE(started.ok()) << started;
  std::cout << "LibvirtTemplate: starting the template's domain took "
            << absl::FormatDuration(absl::Now() - start) << std::endl;

  // libvirt placed the disk, the NIC and the virtio-serial controller where
  // the template says, and no other device on a root port: some stay empty
  // for the hot-plugged GPU.
  absl::StatusOr<std::string> live = vms()->LiveXml(kTd);
  ASSERT_TRUE(live.ok()) << live.status();
  spare_ports_ = EmptyRootPorts(*live);
  std::cout << "LibvirtTemplate: empty root ports after start: "
            << absl::StrJoin(spare_ports_, ", ") << std::endl;
  EXPECT_FALSE(spare_ports_.empty())
      << "libvirt put devices on every root port: nothing left to hot-plug into\n"
      << *live;
}

TEST_F(LibvirtTemplate, TheMuxHotPlugsIntoASpareRootPort) {
  ASSERT_TRUE(vms()->IsActive(kTd)) << "the template's domain is not running";
  auto backend = NewBackend(absl::Seconds(10));
  ASSERT_NE(backend, nullptr);
  auto table = OpenTable(backend.get());
  ASSERT_TRUE(table.ok()) << table.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<Route> r = (*table)->RouteTo("gpu0", kTd, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << "LibvirtTemplate: attach to the template's domain took "
            << absl::FormatDuration(absl::Now() - start) << std::endl;
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), ElementsAre(kTd));
  EXPECT_TRUE(AwaitEvent(kTd, "added", start).has_value());
  absl::StatusOr<std::string> live = vms()->LiveXml(kTd);
  ASSERT_TRUE(live.ok()) << live.status();
  const size_t hostdev = live->find("<hostdev ");
  ASSERT_NE(hostdev, std::string::npos);
  std::cout << "LibvirtTemplate: the hostdev in the live XML:\n"
            << live->substr(hostdev, live->find("</hostdev>", hostdev) + 10 - hostdev)
            << std::endl;
  const int bus = HostdevGuestBus(*live);
  EXPECT_EQ(spare_ports_.count(bus), 1u)
      << "the hostdev went to bus " << bus << ", not a spare root port ("
      << absl::StrJoin(spare_ports_, ", ") << ")";
  EXPECT_THAT(VfioHolderPids(), ElementsAre(QemuPid(kTd)));
}

TEST_F(LibvirtTemplate, ADetachThatNoEventConfirmsTimesOutAndTheDeviceStaysFenced) {
  ASSERT_TRUE(vms()->IsActive(kTd)) << "the template's domain is not running";
  auto backend = NewBackend(absl::Seconds(8));
  ASSERT_NE(backend, nullptr);
  auto table = OpenTable(backend.get());
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ((*table)->Get("gpu0")->domain, kTd);
  const uint64_t token = (*table)->Get("gpu0")->fencing_token;

  const absl::Time start = absl::Now();
  absl::StatusOr<Route> r = (*table)->RouteTo("gpu0", kOrchestrator, token + 1);
  ASSERT_FALSE(r.ok()) << "a detach no event confirmed counted as done";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("no device-removed event for hostdev '" + std::string(kGpuAlias) + "'"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("stays attached to 'td1'"));
  // libvirt's API said the request was sent: the MUX did not take it for done.
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("although libvirt accepted the request"));
  std::cout << "LibvirtTemplate: " << r.status() << std::endl;

  // Fenced: the table keeps the route and token it had; the device is where
  // the table says and nowhere else, per libvirt and per the kernel.
  EXPECT_EQ((*table)->Get("gpu0")->domain, kTd);
  EXPECT_EQ((*table)->Get("gpu0")->fencing_token, token);
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), ElementsAre(kTd));
  EXPECT_THAT(VfioHolderPids(), ElementsAre(QemuPid(kTd)));
  EXPECT_FALSE(EventSeen(kTd, "removed", start));

  // A stale token cannot move it. A retry with a new one finds the first
  // request still pending in QEMU (which refuses a second), waits for its
  // event again, and times out again.
  r = (*table)->RouteTo("gpu0", kOrchestrator, token);
  EXPECT_FALSE(r.ok());
  r = (*table)->RouteTo("gpu0", kOrchestrator, token + 2);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("with an earlier detach request still pending"));
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), ElementsAre(kTd));
  EXPECT_EQ((*table)->Get("gpu0")->domain, kTd);
  EXPECT_EQ((*table)->Get("gpu0")->fencing_token, token);
  EXPECT_FALSE(EventSeen(kTd, "removed", start));
}

// The holder's domain goes away while the MUX waits for its device-removed
// event: a stopped domain holds nothing, so the route completes.
TEST_F(LibvirtTemplate, ASourceThatDisappearsMidDetachLetsTheRouteComplete) {
  ASSERT_TRUE(vms()->IsActive(kTd)) << "the template's domain is not running";
  auto backend = NewBackend(absl::Seconds(120));
  ASSERT_NE(backend, nullptr);
  auto table = OpenTable(backend.get());
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_THAT(*backend->DomainsHolding("gpu0"), ElementsAre(kTd));
  const uint64_t token = (*table)->Get("gpu0")->fencing_token + 10;

  absl::StatusOr<Route> r = absl::UnknownError("not run");
  const absl::Time start = absl::Now();
  std::thread route([&] { r = (*table)->RouteTo("gpu0", kOrchestrator, token); });
  // The route's detach finds the earlier requests still pending and waits
  // for an event that no guest will send; the domain is destroyed meanwhile.
  absl::SleepFor(absl::Seconds(4));
  absl::Status destroyed = vms()->Destroy(kTd);
  route.join();
  ASSERT_TRUE(destroyed.ok()) << destroyed;
  std::cout << "LibvirtTemplate: route with the source destroyed mid-detach took "
            << absl::FormatDuration(absl::Now() - start) << std::endl;
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->domain, kOrchestrator);
  EXPECT_FALSE(vms()->IsActive(kTd));
  EXPECT_THAT(*backend->DomainsHolding("gpu0"), ElementsAre(kOrchestrator));
  EXPECT_THAT(VfioHolderPids(), ElementsAre(QemuPid(kOrchestrator)));
  EXPECT_EQ(PciDriver(bdf_), "vfio-pci");

  r = (*table)->RouteTo("gpu0", "", token + 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(AwaitEvent(kOrchestrator, "removed", start).has_value());
  EXPECT_THAT(VfioHolderPids(), IsEmpty());
}

}  // namespace
}  // namespace gputravel
