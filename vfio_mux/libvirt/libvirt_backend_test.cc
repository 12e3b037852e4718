#include "vfio_mux/libvirt/libvirt_backend.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "util/test_dir.h"
#include "vfio_mux/sysfs/fake_sysfs.h"

namespace gputravel {
namespace {

constexpr char kGpu[] = "0000:98:00.0";
constexpr char kGpu1[] = "0000:b8:00.0";

bool Contains(const absl::Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// A test-driver node: td-a running with gpu0 attached, td-b running without
// it, td-off defined but shut off, and other-vm (another tenant's VM, not in
// the MUX configuration) running. libvirt 9.0's test driver parses hostdevs
// but cannot hot-plug, so these tests cover everything up to the
// attach/detach call and the refusal to go further.
constexpr char kNodeXml[] = R"(<node>
  <domain type='test'>
    <name>td-a</name>
    <memory>1048576</memory>
    <os><type arch='x86_64'>hvm</type></os>
    <devices>
      <hostdev mode='subsystem' type='pci' managed='no'>
        <source><address domain='0x0000' bus='0x98' slot='0x00' function='0x0'/></source>
        <alias name='ua-gpu0'/>
      </hostdev>
    </devices>
  </domain>
  <domain type='test'>
    <name>td-b</name>
    <memory>1048576</memory>
    <os><type arch='x86_64'>hvm</type></os>
    <devices/>
  </domain>
  <domain type='test'>
    <name>other-vm</name>
    <memory>1048576</memory>
    <os><type arch='x86_64'>hvm</type></os>
    <devices/>
  </domain>
  <domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>
    <name>td-off</name>
    <memory>1048576</memory>
    <os><type arch='x86_64'>hvm</type></os>
    <devices>
      <hostdev mode='subsystem' type='pci' managed='no'>
        <source><address domain='0x0000' bus='0xb8' slot='0x00' function='0x0'/></source>
      </hostdev>
    </devices>
    <test:runstate>5</test:runstate>
  </domain>
</node>
)";

class LibvirtBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("libvirt_backend_test.");
    std::ofstream(dir_ + "/node.xml") << kNodeXml;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LibvirtBackendOptions Options() {
    LibvirtBackendOptions o;
    o.uri = absl::StrCat("test://", dir_, "/node.xml");
    o.gpus = {{"gpu0", kGpu, "ua-gpu0"}, {"gpu1", kGpu1, ""}};
    o.check_sysfs = false;
    o.require_tdx = false;  // libvirt 9.0's test driver cannot express a TD
    // td-nope: configured, but no VM of that name exists.
    o.domains = {"td-a", "td-b", "td-off", "td-nope"};
    o.detach_timeout = absl::Milliseconds(200);
    o.poll_interval = absl::Milliseconds(20);
    return o;
  }

  std::unique_ptr<LibvirtBackend> Make(LibvirtBackendOptions o) {
    absl::StatusOr<std::unique_ptr<LibvirtBackend>> b =
        LibvirtBackend::Create(std::move(o));
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  std::string dir_;
};

// --- test:///default: connection and plumbing -----------------------------

TEST_F(LibvirtBackendTest, DefaultTestDriverConnectsAndReadsXml) {
  LibvirtBackendOptions o = Options();
  o.uri = "test:///default";
  o.domains = {"test"};
  std::unique_ptr<LibvirtBackend> b = Make(o);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->Name(), "libvirt");
  absl::StatusOr<std::string> xml = b->LiveXml("test");
  ASSERT_TRUE(xml.ok()) << xml.status();
  EXPECT_NE(xml->find("<name>test</name>"), std::string::npos);
  absl::StatusOr<std::vector<std::string>> holders = b->DomainsHolding("gpu0");
  ASSERT_TRUE(holders.ok()) << holders.status();
  EXPECT_TRUE(holders->empty());
}

TEST_F(LibvirtBackendTest, DefaultTestDriverCannotAttachAndSaysSo) {
  LibvirtBackendOptions o = Options();
  o.uri = "test:///default";
  o.domains = {"test"};
  std::unique_ptr<LibvirtBackend> b = Make(o);
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu0", "", "test");
  ASSERT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(Contains(s, "attaching GPU gpu0 (0000:98:00.0) to domain 'test'"));
  EXPECT_TRUE(Contains(s, "test:///default"));
  EXPECT_TRUE(Contains(s, "qemu:///system"));
}

// The running VM "test" of test:///default, not configured: the attach
// never reaches virDomainAttachDeviceFlags.
TEST_F(LibvirtBackendTest, DefaultTestDriverVmNotConfiguredIsNeverAttached) {
  LibvirtBackendOptions o = Options();
  o.uri = "test:///default";
  o.domains = {"td-a"};
  std::unique_ptr<LibvirtBackend> b = Make(o);
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu0", "", "test");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_FALSE(Contains(s, "attaching")) << s;
}

TEST_F(LibvirtBackendTest, ListsConfiguredGpus) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::StatusOr<std::vector<GpuDevice>> gpus = b->ListGpus();
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].name, "gpu0");
  EXPECT_EQ((*gpus)[0].bdf, kGpu);
  EXPECT_EQ((*gpus)[1].name, "gpu1");
}

// --- configuration and connection errors ----------------------------------

TEST_F(LibvirtBackendTest, RejectsBadConfig) {
  LibvirtBackendOptions o = Options();
  o.gpus.clear();
  EXPECT_EQ(LibvirtBackend::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options();
  o.gpus[0].alias = "gpu0";
  absl::Status s = LibvirtBackend::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s, "'ua-'"));
  o = Options();
  o.gpus[1].bdf = kGpu;
  s = LibvirtBackend::Create(o).status();
  EXPECT_TRUE(Contains(s, "unique")) << s;
  o = Options();
  o.gpus[1].bdf = "98:00";
  s = LibvirtBackend::Create(o).status();
  EXPECT_TRUE(Contains(s, "'gpu1'")) << s;
}

TEST_F(LibvirtBackendTest, UnreachableUriIsReported) {
  LibvirtBackendOptions o = Options();
  o.uri = "test:///nonexistent/node.xml";
  absl::Status s = LibvirtBackend::Create(o).status();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "connecting (libvirt URI 'test:///nonexistent/node.xml')"))
      << s;
  EXPECT_TRUE(Contains(s, "libvirtd"));
}

TEST_F(LibvirtBackendTest, UnknownGpuAndDomain) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu9", "", "td-b");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(s, "configured: gpu0, gpu1"));
  s = b->Move("gpu1", "", "td-nope");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_TRUE(Contains(s, "'td-nope'"));
  EXPECT_TRUE(Contains(s, "virsh"));
  // Detaching from a domain that does not exist (a transient TD shut down or
  // crashed) is not an error: it holds nothing. The GPU still cannot be
  // unrouted while a running domain holds it.
  s = b->Move("gpu1", "td-nope", "");
  EXPECT_TRUE(s.ok()) << s;
  s = b->Move("gpu0", "td-nope", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "td-a")) << s;
}

// --- the live-XML scan ----------------------------------------------------

TEST_F(LibvirtBackendTest, FindsHolderInLiveXmlOfRunningDomainsOnly) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(*b->DomainsHolding("gpu0"), std::vector<std::string>{"td-a"});
  // gpu1 is only in the definition of a stopped domain: not held.
  EXPECT_TRUE(b->DomainsHolding("gpu1")->empty());
}

TEST_F(LibvirtBackendTest, RefusesToAttachWhileAttachedElsewhere) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu0", "", "td-b");
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "attached to running domain 'td-a'"));
  EXPECT_TRUE(Contains(s, "one VM at a time"));
}

TEST_F(LibvirtBackendTest, AttachToCurrentHolderIsANoOp) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->Move("gpu0", "td-a", "td-a").ok());
  // `from` does not hold it, `to` does: converges without a hot-plug.
  EXPECT_TRUE(b->Move("gpu0", "td-b", "td-a").ok());
}

TEST_F(LibvirtBackendTest, DetachReachesLibvirtAndReportsUnsupportedDriver) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu0", "td-a", "td-b");
  ASSERT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(Contains(s, "detaching GPU gpu0 (0000:98:00.0) from domain 'td-a'"));
  EXPECT_TRUE(Contains(s, "cannot hot-plug"));
  EXPECT_EQ(*b->DomainsHolding("gpu0"), std::vector<std::string>{"td-a"});
}

// The detach is confirmed only by the DEVICE_REMOVED event for the live
// hostdev's alias; a live hostdev without one (libvirt's QEMU driver names
// every live device; the test driver keeps what the XML says) is refused
// before libvirt is asked to detach anything.
TEST_F(LibvirtBackendTest, DetachOfALiveHostdevWithoutAliasIsRefused) {
  std::string node = kNodeXml;
  const std::string alias = "\n        <alias name='ua-gpu0'/>";
  ASSERT_NE(node.find(alias), std::string::npos);
  node.erase(node.find(alias), alias.size());
  std::ofstream(dir_ + "/node.xml") << node;
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu0", "td-a", "td-b");
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "gives the hostdev no alias")) << s;
  EXPECT_EQ(*b->DomainsHolding("gpu0"), std::vector<std::string>{"td-a"});
}

// ATTACK (route table vs reality): the table calls Move even when from ==
// to because it may be behind the GPU, and the backend must then confirm or
// say where the GPU is (routing_backend.h). For "" -> "" the libvirt backend
// answers OK without asking libvirt anything, so "the GPU is unrouted" is
// confirmed (and journaled "ok") while a running VM holds it, here td-a, and
// equally a VM outside the configuration. Secure: refused, as an unroute
// from a named domain is (UnroutingWhileLibvirtDisagreesIsRefused).
TEST_F(LibvirtBackendTest, ConfirmingUnroutedChecksLibvirt) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu0", "", "");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST_F(LibvirtBackendTest, UnroutingWhileLibvirtDisagreesIsRefused) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu0", "td-b", "");
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "still attached to running domain 'td-a'"));
}

TEST_F(LibvirtBackendTest, AttachToStoppedDomainIsRefused) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu1", "", "td-off");
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "not running"));
  EXPECT_TRUE(Contains(s, "start td-off"));
  // Detaching from a stopped domain has nothing to do.
  EXPECT_TRUE(b->Move("gpu1", "td-off", "").ok());
}

TEST_F(LibvirtBackendTest, MapsMuxDomainNamesToLibvirtNames) {
  LibvirtBackendOptions o = Options();
  o.domains = {"trust-domain-1", "trust-domain-2"};
  o.domain_names = {{"trust-domain-1", "td-a"}, {"trust-domain-2", "td-b"}};
  std::unique_ptr<LibvirtBackend> b = Make(o);
  ASSERT_NE(b, nullptr);
  absl::StatusOr<std::string> xml = b->LiveXml("trust-domain-1");
  ASSERT_TRUE(xml.ok()) << xml.status();
  EXPECT_NE(xml->find("<name>td-a</name>"), std::string::npos);
  absl::Status s = b->Move("gpu0", "", "trust-domain-2");
  EXPECT_TRUE(Contains(s, "to domain 'td-b'")) << s;
}

// P8: a running VM that is not in the configuration is never looked up,
// attached to or detached from, and every unconfigured name gets the same
// refusal, whether or not such a VM exists.
TEST_F(LibvirtBackendTest, UnconfiguredDomainIsRefusedBeforeLibvirt) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::Status exists = b->Move("gpu1", "", "other-vm");
  absl::Status absent = b->Move("gpu1", "", "no-such-vm");
  EXPECT_EQ(exists.code(), absl::StatusCode::kPermissionDenied) << exists;
  EXPECT_EQ(absent.code(), absl::StatusCode::kPermissionDenied) << absent;
  std::string e(exists.message()), a(absent.message());
  e.replace(e.find("other-vm"), 8, "X");
  a.replace(a.find("no-such-vm"), 10, "X");
  EXPECT_EQ(e, a);
  EXPECT_EQ(b->Move("gpu0", "other-vm", "td-a").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(b->LiveXml("other-vm").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(b->DomainsHolding("gpu1")->empty());
}

// A configured domain that is not a TDX guest does not get the GPU.
TEST_F(LibvirtBackendTest, AttachToADomainThatIsNotATdIsRefused) {
  LibvirtBackendOptions o = Options();
  o.require_tdx = true;
  std::unique_ptr<LibvirtBackend> b = Make(o);
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu1", "", "td-b");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "not a TDX guest")) << s;
  EXPECT_TRUE(b->DomainsHolding("gpu1")->empty());
}

TEST_F(LibvirtBackendTest, DomainNamesMustMapConfiguredDomains) {
  LibvirtBackendOptions o = Options();
  o.domain_names = {{"td-z", "other-vm"}};
  absl::Status s = LibvirtBackend::Create(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(Contains(s, "'td-z', which is not in"));
}

TEST_F(LibvirtBackendTest, ResetNeedsSysfs) {
  std::unique_ptr<LibvirtBackend> b = Make(Options());
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Reset("gpu0");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(s, "check_sysfs"));
}

// --- with sysfs checks against the fake kernel ----------------------------

class LibvirtSysfsTest : public LibvirtBackendTest {
 protected:
  void SetUp() override {
    LibvirtBackendTest::SetUp();
    absl::StatusOr<std::shared_ptr<FakeSysfs>> f = FakeSysfs::Create();
    ASSERT_TRUE(f.ok()) << f.status();
    fake_ = *f;
    ASSERT_TRUE(fake_->AddDriver("nvidia").ok());
    ASSERT_TRUE(fake_->AddDriver("vfio-pci").ok());
    for (const char* bdf : {kGpu, kGpu1}) {
      FakePciDevice d;
      d.bdf = bdf;
      d.driver = "nvidia";
      d.iommu_group = bdf == std::string(kGpu) ? "42" : "43";
      ASSERT_TRUE(fake_->AddDevice(d).ok());
    }
  }
  LibvirtBackendOptions SysfsOptions() {
    LibvirtBackendOptions o = Options();
    o.check_sysfs = true;
    o.sysfs.sysfs_root = fake_->root();
    o.sysfs.proc_root = fake_->proc_root();
    o.sysfs.driver_timeout = absl::Milliseconds(200);
    o.sysfs.poll_interval = absl::Milliseconds(5);
    return o;
  }
  std::unique_ptr<LibvirtBackend> MakeWithSysfs() {
    absl::StatusOr<std::unique_ptr<LibvirtBackend>> b =
        LibvirtBackend::Create(SysfsOptions(), fake_);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  std::shared_ptr<FakeSysfs> fake_;
};

TEST_F(LibvirtSysfsTest, CreateInspectsGpus) {
  LibvirtBackendOptions o = SysfsOptions();
  o.gpus[1].bdf = "0000:99:00.0";
  absl::Status s = LibvirtBackend::Create(o, fake_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  std::unique_ptr<LibvirtBackend> b = MakeWithSysfs();
  ASSERT_NE(b, nullptr);
  absl::StatusOr<std::vector<GpuDevice>> gpus = b->ListGpus();
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ((*gpus)[0].iommu_group, "42");
  EXPECT_EQ((*gpus)[0].driver, "nvidia");
}

TEST_F(LibvirtSysfsTest, AttachNeedsVfioPciBinding) {
  std::unique_ptr<LibvirtBackend> b = MakeWithSysfs();
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Move("gpu1", "", "td-b");
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "bound to 'nvidia', not vfio-pci"));
  EXPECT_TRUE(Contains(s, "prepare_host.sh --bdf 0000:b8:00.0"));
}

TEST_F(LibvirtSysfsTest, AttachDisablesResetBeforeHotplug) {
  std::unique_ptr<LibvirtBackend> b = MakeWithSysfs();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(fake_->ForceBind(kGpu1, "vfio-pci").ok());
  absl::Status s = b->Move("gpu1", "", "td-b");
  // Every check passed; the test driver then cannot hot-plug.
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_EQ(fake_->reset_method(kGpu1), "");
}

TEST_F(LibvirtSysfsTest, ResetGoesThroughSysfsAndKeepsResetDisabled) {
  std::unique_ptr<LibvirtBackend> b = MakeWithSysfs();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(fake_->ForceBind(kGpu1, "vfio-pci").ok());
  ASSERT_TRUE(b->Reset("gpu1").ok());
  EXPECT_EQ(fake_->reset_count(kGpu1), 1);
  EXPECT_EQ(fake_->reset_method(kGpu1), "");
}

// A GPU on the host's driver is not the MUX's to reset: refused, and its
// reset_method left as the host had it.
TEST_F(LibvirtSysfsTest, ResetRefusesGpuOnTheHostsDriver) {
  std::unique_ptr<LibvirtBackend> b = MakeWithSysfs();
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Reset("gpu1");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(fake_->reset_count(kGpu1), 0);
  EXPECT_EQ(fake_->reset_method(kGpu1), "flr bus");
}

// Held open by a process while libvirt lists it in no configured domain
// (another tenant's QEMU, a stray VFIO user): refused.
TEST_F(LibvirtSysfsTest, ResetRefusesGpuHeldOutsideTheConfiguredDomains) {
  std::unique_ptr<LibvirtBackend> b = MakeWithSysfs();
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(fake_->ForceBind(kGpu1, "vfio-pci").ok());
  ASSERT_TRUE(fake_->AddProcess(4242, "qemu-system-x86", {"/dev/vfio/43"}).ok());
  absl::Status s = b->Reset("gpu1");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Contains(s, "reset of GPU gpu1"));
  EXPECT_EQ(fake_->reset_count(kGpu1), 0);
}

// Held by the VM of a configured domain that libvirt lists it in: reset.
TEST_F(LibvirtSysfsTest, ResetOfGpuInAConfiguredDomainsVm) {
  ASSERT_TRUE(fake_->ForceBind(kGpu, "vfio-pci").ok());
  ASSERT_TRUE(fake_->AddProcess(5151, "qemu-system-x86", {"/dev/vfio/42"}).ok());
  std::unique_ptr<LibvirtBackend> b = MakeWithSysfs();
  ASSERT_NE(b, nullptr);
  absl::Status s = b->Reset("gpu0");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(fake_->reset_count(kGpu), 1);
  // The same VM, once it is no longer a configured domain: refused.
  LibvirtBackendOptions o = SysfsOptions();
  o.domains = {"td-b"};
  absl::StatusOr<std::unique_ptr<LibvirtBackend>> other = LibvirtBackend::Create(o, fake_);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ((*other)->Reset("gpu0").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fake_->reset_count(kGpu), 1);
}

// ATTACK: a reset's sysfs writes (bounded by
// driver_timeout, 10 s) or a detach's wait for the guest (detach_timeout,
// 30 s) on one GPU must not stall every other GPU's move and pile the
// server's 16 threads up behind it: the backend serializes per GPU only.
TEST_F(LibvirtSysfsTest, SlowResetOfOneGpuDoesNotBlockAnotherGpusMove) {
  ASSERT_TRUE(fake_->ForceBind(kGpu, "vfio-pci").ok());
  ASSERT_TRUE(fake_->ForceBind(kGpu1, "vfio-pci").ok());
  LibvirtBackendOptions o = SysfsOptions();
  // Far longer than a move takes: a move that waited for gpu0's reset to give
  // up would take at least this.
  o.sysfs.driver_timeout = absl::Seconds(20);
  absl::StatusOr<std::unique_ptr<LibvirtBackend>> b = LibvirtBackend::Create(o, fake_);
  ASSERT_TRUE(b.ok()) << b.status();
  fake_->HangWrites(fake_->DevicePath(kGpu) + "/reset");
  std::thread resetter([&] { (void)(*b)->Reset("gpu0"); });  // gpu0 is in td-a: allowed
  EXPECT_TRUE(fake_->AwaitHeldWrites(1, absl::Seconds(30)))
      << "gpu0's reset never reached the kernel";
  const absl::Time start = absl::Now();
  absl::Status moved = (*b)->Move("gpu1", "", "td-b");  // the test driver cannot hot-plug
  const absl::Duration took = absl::Now() - start;
  fake_->ReleaseHangs();
  resetter.join();
  EXPECT_EQ(moved.code(), absl::StatusCode::kUnimplemented) << moved;
  EXPECT_LT(took, o.sysfs.driver_timeout / 2)
      << "gpu1's move waited " << took << " for gpu0's pending reset";
}

// --- a real hypervisor, only when an operator asks for it -----------------
//
//   bazel test //vfio_mux/libvirt:libvirt_backend_test
//     --test_env=GPUTRAVEL_LIBVIRT_URI=qemu:///system
//     --test_env=GPUTRAVEL_LIBVIRT_DOMAIN=td1
//     --test_env=GPUTRAVEL_GPU_BDF=0000:98:00.0
//     [--test_env=GPUTRAVEL_LIBVIRT_DOMAIN2=td2] --test_output=all
// The GPU must be bound to vfio-pci (deploy/host/prepare_host.sh) and not
// attached anywhere; the domains must be running. The test attaches the GPU,
// (optionally moves it to DOMAIN2 and back) and detaches it again.
TEST(LibvirtRealHypervisorTest, AttachMoveDetach) {
  const char* uri = getenv("GPUTRAVEL_LIBVIRT_URI");
  const char* domain = getenv("GPUTRAVEL_LIBVIRT_DOMAIN");
  const char* bdf = getenv("GPUTRAVEL_GPU_BDF");
  const char* domain2 = getenv("GPUTRAVEL_LIBVIRT_DOMAIN2");
  if (uri == nullptr || domain == nullptr || bdf == nullptr) {
    GTEST_SKIP() << "needs a real hypervisor: set GPUTRAVEL_LIBVIRT_URI, "
                    "GPUTRAVEL_LIBVIRT_DOMAIN and GPUTRAVEL_GPU_BDF (and "
                    "optionally GPUTRAVEL_LIBVIRT_DOMAIN2) via --test_env";
  }
  LibvirtBackendOptions o;
  o.uri = uri;
  o.gpus = {{"gpu0", bdf, ""}};
  o.domains = {domain};
  if (domain2 != nullptr) o.domains.insert(domain2);
  absl::StatusOr<std::unique_ptr<LibvirtBackend>> b =
      LibvirtBackend::Create(o);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*b)->DomainsHolding("gpu0")->empty())
      << "the GPU is already attached somewhere; detach it first";
  // P8: a name outside the configured domains never reaches libvirt, even
  // on a real hypervisor where a VM of that name may run.
  absl::Status refused = (*b)->Move("gpu0", "", "gputravel-not-configured");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
  EXPECT_TRUE((*b)->DomainsHolding("gpu0")->empty());
  ASSERT_TRUE((*b)->Move("gpu0", "", domain).ok());
  EXPECT_EQ(*(*b)->DomainsHolding("gpu0"), std::vector<std::string>{domain});
  std::string last = domain;
  if (domain2 != nullptr) {
    absl::Status s = (*b)->Move("gpu0", domain, domain2);
    EXPECT_TRUE(s.ok()) << s;
    if (s.ok()) last = domain2;
    EXPECT_EQ(*(*b)->DomainsHolding("gpu0"), std::vector<std::string>{last});
  }
  absl::Status s = (*b)->Move("gpu0", last, "");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE((*b)->DomainsHolding("gpu0")->empty());
}

}  // namespace
}  // namespace gputravel
