#include "vfio_mux/libvirt/libvirt_backend.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdlib.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/log.h"
#include "vfio_mux/libvirt/hostdev_xml.h"
#include "vfio_mux/mux_policy.h"
#include "vfio_mux/libvirt/libvirt_event_loop.h"
#include "vfio_mux/sysfs/pci_address.h"

namespace gputravel {
namespace {

constexpr absl::string_view kVfioPci = "vfio-pci";

struct DomainFree {
  void operator()(virDomainPtr d) const {
    if (d != nullptr) virDomainFree(d);
  }
};
using DomainPtr = std::unique_ptr<virDomain, DomainFree>;

struct CharFree {
  void operator()(char* p) const { free(p); }
};

// The calling thread's last libvirt error as a Status. libvirt's error codes
// map onto Status codes so the MUX can tell "cannot do that here"
// (Unimplemented) from "not now" (FailedPrecondition) and "cannot reach"
// (Unavailable).
absl::Status LibvirtError(absl::string_view what, const std::string& uri) {
  virErrorPtr e = virGetLastError();
  const int code = e != nullptr ? e->code : VIR_ERR_INTERNAL_ERROR;
  const std::string msg = e != nullptr && e->message != nullptr
                              ? e->message
                              : "unknown libvirt error";
  absl::StatusCode sc;
  switch (code) {
    case VIR_ERR_NO_SUPPORT:
      sc = absl::StatusCode::kUnimplemented;
      break;
    case VIR_ERR_NO_DOMAIN:
      sc = absl::StatusCode::kNotFound;
      break;
    case VIR_ERR_OPERATION_INVALID:
    case VIR_ERR_OPERATION_FAILED:
      sc = absl::StatusCode::kFailedPrecondition;
      break;
    case VIR_ERR_OPERATION_TIMEOUT:
      sc = absl::StatusCode::kDeadlineExceeded;
      break;
    case VIR_ERR_XML_ERROR:
    case VIR_ERR_XML_DETAIL:
    case VIR_ERR_CONFIG_UNSUPPORTED:
    case VIR_ERR_INVALID_ARG:
      sc = absl::StatusCode::kInvalidArgument;
      break;
    case VIR_ERR_NO_CONNECT:
    case VIR_ERR_SYSTEM_ERROR:
    case VIR_ERR_RPC:
    case VIR_ERR_AUTH_FAILED:
    case VIR_ERR_AUTH_CANCELLED:
    case VIR_ERR_AUTH_UNAVAILABLE:
      sc = absl::StatusCode::kUnavailable;
      break;
    default:
      sc = absl::StatusCode::kInternal;
  }
  virResetLastError();
  return absl::Status(
      sc, absl::StrCat(what, " (libvirt URI '", uri, "'): ", msg));
}

// Appends what to do to a libvirt error from a hot-plug call.
absl::Status HotplugError(absl::Status s, absl::string_view domain) {
  if (absl::IsUnimplemented(s)) {
    return absl::UnimplementedError(absl::StrCat(
        s.message(),
        "; the libvirt driver behind this URI cannot hot-plug devices into a "
        "running domain (the test driver cannot): use a QEMU URI such as "
        "qemu:///system"));
  }
  return absl::Status(
      s.code(),
      absl::StrCat(s.message(), "; see /var/log/libvirt/qemu/", domain,
                   ".log and `journalctl -u libvirtd -u virtqemud`"));
}

struct RemovalWaiter {
  explicit RemovalWaiter(std::string a) : alias(std::move(a)) {}
  const std::string alias;
  absl::Mutex mu;
  bool removed ABSL_GUARDED_BY(mu) = false;
  bool failed ABSL_GUARDED_BY(mu) = false;
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return removed || failed;
  }
};

// Runs on the event loop thread. The opaque pointer is a heap shared_ptr
// freed by libvirt (FreeWaiter) once the callback can no longer run.
// Both have the void return of virConnectDomainEventDeviceRemovedCallback and
// virConnectDomainEventDeviceRemovalFailedCallback, which libvirt calls them
// as through VIR_DOMAIN_EVENT_CALLBACK.
void OnDeviceRemoved(virConnectPtr, virDomainPtr, const char* alias,
                     void* opaque) {
  auto& w = *static_cast<std::shared_ptr<RemovalWaiter>*>(opaque);
  absl::MutexLock lock(&w->mu);
  if (alias != nullptr && w->alias == alias) w->removed = true;
}

void OnDeviceRemovalFailed(virConnectPtr, virDomainPtr, const char* alias,
                           void* opaque) {
  auto& w = *static_cast<std::shared_ptr<RemovalWaiter>*>(opaque);
  absl::MutexLock lock(&w->mu);
  if (alias != nullptr && w->alias == alias) w->failed = true;
}

void FreeWaiter(void* opaque) {
  delete static_cast<std::shared_ptr<RemovalWaiter>*>(opaque);
}

// Subscribes a detach to its domain's DEVICE_REMOVED and
// DEVICE_REMOVAL_FAILED events, and deregisters them on every path out of it.
class EventSubscription {
 public:
  EventSubscription(virConnectPtr conn, virDomainPtr dom,
                    const std::shared_ptr<RemovalWaiter>& w)
      : conn_(conn) {
    ids_[0] = virConnectDomainEventRegisterAny(
        conn, dom, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
        VIR_DOMAIN_EVENT_CALLBACK(OnDeviceRemoved),
        new std::shared_ptr<RemovalWaiter>(w), FreeWaiter);
    if (ids_[0] < 0) RecordError();
    ids_[1] = virConnectDomainEventRegisterAny(
        conn, dom, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVAL_FAILED,
        VIR_DOMAIN_EVENT_CALLBACK(OnDeviceRemovalFailed),
        new std::shared_ptr<RemovalWaiter>(w), FreeWaiter);
    if (ids_[1] < 0) RecordError();
    virResetLastError();
  }
  ~EventSubscription() {
    for (int id : ids_) {
      if (id >= 0) virConnectDomainEventDeregisterAny(conn_, id);
    }
    virResetLastError();
  }
  EventSubscription(const EventSubscription&) = delete;
  EventSubscription& operator=(const EventSubscription&) = delete;

  // Whether both events will be delivered; otherwise libvirt's reason.
  bool ok() const { return ids_[0] >= 0 && ids_[1] >= 0; }
  const std::string& error() const { return error_; }

 private:
  void RecordError() {
    virErrorPtr e = virGetLastError();
    if (error_.empty()) {
      error_ = e != nullptr && e->message != nullptr ? e->message
                                                     : "unknown libvirt error";
    }
  }

  virConnectPtr conn_;
  int ids_[2] = {-1, -1};
  std::string error_;
};

absl::StatusOr<std::string> DomainXml(virDomainPtr dom, const std::string& name,
                                      const std::string& uri) {
  std::unique_ptr<char, CharFree> xml(virDomainGetXMLDesc(dom, 0));
  if (xml == nullptr) {
    return LibvirtError(
        absl::StrCat("reading the live XML of domain '", name, "'"), uri);
  }
  return std::string(xml.get());
}

absl::StatusOr<bool> XmlHasBdf(const std::string& xml, const std::string& bdf,
                               const std::string& domain,
                               std::string* alias = nullptr) {
  absl::StatusOr<std::vector<PciHostdev>> hostdevs = ParsePciHostdevs(xml);
  if (!hostdevs.ok()) {
    return absl::Status(hostdevs.status().code(),
                        absl::StrCat("domain '", domain,
                                     "': ", hostdevs.status().message()));
  }
  for (const PciHostdev& h : *hostdevs) {
    if (h.bdf == bdf) {
      if (alias != nullptr) *alias = h.alias;
      return true;
    }
  }
  return false;
}

// "pid 123 (qemu-system-x86), pid 456 (...)".
std::string HolderList(const std::vector<VfioHolder>& holders) {
  std::vector<std::string> who;
  for (const VfioHolder& h : holders) who.push_back(absl::StrCat("pid ", h.pid, " (", h.comm, ")"));
  return absl::StrJoin(who, ", ");
}

std::string QuotedList(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const std::string& n : names) q.push_back(absl::StrCat("'", n, "'"));
  return absl::StrJoin(q, ", ");
}

}  // namespace

LibvirtBackend::LibvirtBackend(LibvirtBackendOptions options,
                               std::shared_ptr<SysfsFs> fs)
    : options_(std::move(options)), sysfs_(options_.sysfs, std::move(fs)) {}

LibvirtBackend::~LibvirtBackend() {
  absl::MutexLock lock(&conn_mu_);
  if (conn_ != nullptr) virConnectClose(conn_);
}

void LibvirtBackend::ConnUnref::operator()(_virConnect* c) const {
  if (c != nullptr) virConnectClose(c);
}

absl::StatusOr<std::unique_ptr<LibvirtBackend>> LibvirtBackend::Create(
    LibvirtBackendOptions options, std::shared_ptr<SysfsFs> fs) {
  if (options.gpus.empty()) {
    return absl::InvalidArgumentError(
        "libvirt backend: no GPUs in the MUX config; list each GPU with its "
        "host BDF");
  }
  for (const std::string& d : options.domains) {
    absl::Status s = ValidateMuxName("domain", d);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("libvirt backend: ", s.message()));
    }
  }
  for (const auto& [mux_name, libvirt_name] : options.domain_names) {
    if (options.domains.count(mux_name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "libvirt backend: domain_names maps '", mux_name,
          "', which is not in the MUX configuration's \"domains\"; list it "
          "there or drop the mapping"));
    }
    if (libvirt_name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "libvirt backend: domain_names maps '", mux_name, "' to an empty name"));
    }
  }
  std::unique_ptr<LibvirtBackend> b(
      new LibvirtBackend(std::move(options), std::move(fs)));
  std::set<std::string> bdfs, aliases;
  for (size_t i = 0; i < b->options_.gpus.size(); ++i) {
    const LibvirtGpuConfig& c = b->options_.gpus[i];
    absl::StatusOr<std::string> bdf = CanonicalBdf(c.bdf);
    if (!bdf.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("libvirt backend: GPU #", i, " ('", c.name,
                       "') in the MUX config: ", bdf.status().message()));
    }
    Gpu g;
    g.bdf = *bdf;
    const std::string name = c.name.empty() ? *bdf : c.name;
    absl::Status valid = ValidateMuxName("GPU", name);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "libvirt backend: GPU #", i, " in the MUX config: ", valid.message()));
    }
    g.alias = c.alias.empty() ? DefaultHostdevAlias(name) : c.alias;
    absl::Status s = ValidateHostdevAlias(g.alias);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "libvirt backend: GPU '", name, "' in the MUX config: ", s.message()));
    }
    if (b->gpus_.count(name) || !bdfs.insert(g.bdf).second ||
        !aliases.insert(g.alias).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "libvirt backend: GPU '", name, "' (", g.bdf, ", alias ", g.alias,
          ") repeats a name, BDF or alias in the MUX config; each must be "
          "unique"));
    }
    b->gpus_[name] = g;
  }
  absl::Status s = EnsureLibvirtEventLoop();
  if (!s.ok()) return s;
  absl::StatusOr<ConnRef> conn = b->Connection();
  if (!conn.ok()) return conn.status();
  for (auto& [name, g] : b->gpus_) {
    // GPUs of one IOMMU group share a lock (their sysfs steps must not
    // interleave); without sysfs each GPU locks alone.
    std::string group = "bdf " + g.bdf;
    if (b->options_.check_sysfs) {
      absl::StatusOr<PciDeviceInfo> info = b->sysfs_.InspectNvidiaGpu(g.bdf);
      if (!info.ok()) return info.status();
      if (!info->iommu_group.empty()) group = info->iommu_group;
    }
    std::unique_ptr<absl::Mutex>& lock = b->group_locks_[group];
    if (lock == nullptr) lock = std::make_unique<absl::Mutex>();
    g.mu = lock.get();
  }
  return b;
}

absl::StatusOr<LibvirtBackend::ConnRef> LibvirtBackend::Connection() {
  absl::MutexLock lock(&conn_mu_);
  if (conn_ != nullptr) {
    if (virConnectIsAlive(conn_) == 1) {
      virConnectRef(conn_);
      return ConnRef(conn_);
    }
    // libvirtd restarted or the keepalive lapsed: a fresh connection (calls
    // still running on the old one keep it until they finish).
    virConnectClose(conn_);
    conn_ = nullptr;
  }
  conn_ = virConnectOpen(options_.uri.c_str());
  if (conn_ == nullptr) {
    absl::Status e = LibvirtError("connecting", options_.uri);
    return absl::Status(
        e.code(),
        absl::StrCat(e.message(),
                     "; is libvirtd (or virtqemud) running, is the URI right, "
                     "and may the MUX use libvirt's socket "
                     "(/run/libvirt/libvirt-sock)?"));
  }
  // Notices a dead daemon within ~15 s; local drivers report "unsupported",
  // which is fine.
  virConnectSetKeepAlive(conn_, 5, 3);
  virResetLastError();
  virConnectRef(conn_);
  return ConnRef(conn_);
}

absl::StatusOr<LibvirtBackend::Gpu*> LibvirtBackend::Find(const std::string& gpu) {
  auto it = gpus_.find(gpu);
  if (it == gpus_.end()) {
    std::vector<std::string> names;
    for (const auto& [name, g] : gpus_) names.push_back(name);
    return absl::NotFoundError(absl::StrCat("libvirt backend: unknown GPU '",
                                            gpu, "'; configured: ",
                                            absl::StrJoin(names, ", ")));
  }
  return &it->second;
}

absl::StatusOr<std::string> LibvirtBackend::LibvirtName(
    const std::string& domain) const {
  if (options_.domains.count(domain) == 0) return DomainNotConfigured(domain);
  auto it = options_.domain_names.find(domain);
  return it == options_.domain_names.end() ? domain : it->second;
}

absl::StatusOr<std::vector<GpuDevice>> LibvirtBackend::ListGpus() {
  std::vector<GpuDevice> out;
  for (const auto& [name, g] : gpus_) {
    GpuDevice d{name, g.bdf, "", ""};
    if (options_.check_sysfs) {
      absl::StatusOr<PciDeviceInfo> info = sysfs_.Inspect(g.bdf);
      if (!info.ok()) return info.status();
      d.iommu_group = info->iommu_group;
      d.driver = info->driver;
    }
    out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<std::string> LibvirtBackend::LiveXml(const std::string& domain) {
  absl::StatusOr<std::string> mapped = LibvirtName(domain);
  if (!mapped.ok()) return mapped.status();
  absl::StatusOr<ConnRef> conn = Connection();
  if (!conn.ok()) return conn.status();
  const std::string& name = *mapped;
  DomainPtr dom(virDomainLookupByName(conn->get(), name.c_str()));
  if (dom == nullptr) {
    return LibvirtError(absl::StrCat("looking up domain '", name, "'"),
                        options_.uri);
  }
  return DomainXml(dom.get(), name, options_.uri);
}

absl::StatusOr<std::vector<std::string>> LibvirtBackend::DomainsHolding(
    const std::string& gpu) {
  absl::StatusOr<Gpu*> g = Find(gpu);
  if (!g.ok()) return g.status();
  absl::StatusOr<ConnRef> conn = Connection();
  if (!conn.ok()) return conn.status();
  return DomainsHoldingBdf(conn->get(), (*g)->bdf);
}

absl::StatusOr<std::vector<std::string>> LibvirtBackend::DomainsHoldingBdf(
    _virConnect* conn, const std::string& bdf) {
  virDomainPtr* doms = nullptr;
  int n = virConnectListAllDomains(conn, &doms,
                                   VIR_CONNECT_LIST_DOMAINS_ACTIVE);
  if (n < 0) {
    return LibvirtError("listing running domains", options_.uri);
  }
  std::vector<DomainPtr> owned;
  for (int i = 0; i < n; ++i) owned.emplace_back(doms[i]);
  free(doms);
  std::vector<std::string> holders;
  for (const DomainPtr& dom : owned) {
    const char* cname = virDomainGetName(dom.get());
    const std::string name = cname != nullptr ? cname : "?";
    std::unique_ptr<char, CharFree> xml(virDomainGetXMLDesc(dom.get(), 0));
    if (xml == nullptr) {
      virErrorPtr e = virGetLastError();
      // Shut down since the listing: it holds nothing any more.
      if (e != nullptr && e->code == VIR_ERR_NO_DOMAIN) {
        virResetLastError();
        continue;
      }
      return LibvirtError(
          absl::StrCat("reading the live XML of domain '", name, "'"),
          options_.uri);
    }
    absl::StatusOr<bool> has = XmlHasBdf(xml.get(), bdf, name);
    if (!has.ok()) return has.status();
    if (*has) holders.push_back(name);
  }
  std::sort(holders.begin(), holders.end());
  return holders;
}

absl::Status LibvirtBackend::DetachLocked(_virConnect* conn,
                                          const std::string& gpu_name,
                                          const Gpu& g,
                                          const std::string& domain) {
  absl::StatusOr<std::string> mapped = LibvirtName(domain);
  if (!mapped.ok()) return mapped.status();
  const std::string& name = *mapped;
  const std::string what = absl::StrCat("detaching GPU ", gpu_name, " (", g.bdf,
                                        ") from domain '", name, "'");
  DomainPtr dom(virDomainLookupByName(conn, name.c_str()));
  if (dom == nullptr && virGetLastErrorCode() == VIR_ERR_NO_DOMAIN) {
    // A domain that no longer exists (a transient TD that was shut down or
    // crashed) holds no device; refusing would fail every later move of
    // this GPU, the route home included. A typo cannot hide the GPU: an
    // attach, or an unroute, still scans every running domain's live XML.
    virResetLastError();
    return absl::OkStatus();
  }
  if (dom == nullptr) {
    absl::Status e = LibvirtError(what, options_.uri);
    return absl::Status(
        e.code(), absl::StrCat(e.message(), "; check `virsh -c ", options_.uri,
                               " list --all` and the MUX config's domain "
                               "names"));
  }
  if (virDomainIsActive(dom.get()) != 1) {
    virResetLastError();
    return absl::OkStatus();  // a stopped domain holds no live device
  }
  absl::StatusOr<std::string> xml = DomainXml(dom.get(), name, options_.uri);
  if (!xml.ok()) return xml.status();
  std::string live_alias;
  absl::StatusOr<bool> has = XmlHasBdf(*xml, g.bdf, name, &live_alias);
  if (!has.ok()) return has.status();
  if (!*has) return absl::OkStatus();

  // A detach is done only on libvirt's DEVICE_REMOVED event for the live
  // hostdev's alias (QEMU freed the device after the guest let go), or when
  // the domain stops (its QEMU, the only holder, is gone). Never on the API's
  // return: virDomainDetachDeviceAlias returns once the request is sent, and
  // returns the same when the guest never answers (ACPI hot-plug into a
  // guest that runs no OS, or whose OS ignores the eject). The live XML is
  // read again after the event, to confirm.
  if (live_alias.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the live XML gives the hostdev no alias, so its removal event "
              "cannot be recognised; check `virsh -c ",
        options_.uri, " dumpxml ", name, "`"));
  }
  // Subscribed before the request, so a fast removal cannot be missed.
  auto waiter = std::make_shared<RemovalWaiter>(live_alias);
  EventSubscription events(conn, dom.get(), waiter);
  if (!events.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": cannot subscribe to libvirt's device-removed event (libvirt "
              "URI '",
        options_.uri, "'): ", events.error(),
        "; the MUX counts a detach as done only on that event, so nothing "
        "was detached"));
  }
  // QEMU refuses a second unplug request while an earlier one waits for the
  // guest ("Device ... is already in the process of unplug", which libvirt
  // passes on as an internal error): that request stands, so its event is
  // waited for as for a new one.
  bool earlier_request = false;
  if (virDomainDetachDeviceAlias(dom.get(), live_alias.c_str(),
                                 VIR_DOMAIN_AFFECT_LIVE) < 0) {
    absl::Status e = LibvirtError(what, options_.uri);
    if (!absl::StrContains(e.message(), "already in the process of unplug")) {
      return HotplugError(e, name);
    }
    earlier_request = true;
    GT_LOG(2, what, ": an earlier detach request is still pending; waiting for its event");
  }

  const absl::Time deadline = absl::Now() + options_.detach_timeout;
  for (;;) {
    bool removed, failed;
    {
      absl::MutexLock lock(&waiter->mu);
      removed = waiter->removed;
      failed = waiter->failed;
    }
    if (removed) {
      xml = DomainXml(dom.get(), name, options_.uri);
      if (!xml.ok()) return xml.status();
      has = XmlHasBdf(*xml, g.bdf, name);
      if (!has.ok()) return has.status();
      if (!*has) return absl::OkStatus();
      return absl::InternalError(absl::StrCat(
          what, ": libvirt reported hostdev '", live_alias,
          "' removed but the live XML still lists the GPU; check `virsh -c ",
          options_.uri, " dumpxml ", name, "` before moving it"));
    }
    if (failed) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": the guest refused to release the device "
                "(DEVICE_REMOVAL_FAILED for alias '",
          live_alias,
          "'); the GPU is still attached. Stop the guest's GPU users (or "
          "shut the guest down) and retry"));
    }
    const int active = virDomainIsActive(dom.get());
    if (active == 0 ||
        (active < 0 && virGetLastErrorCode() == VIR_ERR_NO_DOMAIN)) {
      virResetLastError();
      GT_LOG(1, what, ": the domain stopped before the device-removed event; "
                      "a stopped domain holds no device");
      return absl::OkStatus();
    }
    if (active < 0) {
      return LibvirtError(absl::StrCat(what, ": checking that the domain runs"),
                          options_.uri);
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": no device-removed event for hostdev '", live_alias,
          "' within ", absl::FormatDuration(options_.detach_timeout),
          earlier_request ? ", with an earlier detach request still pending"
                          : ", although libvirt accepted the request",
          ": the guest has not "
          "acknowledged the PCI hot-unplug (no OS or hot-plug driver running, "
          "or ACPI hot-plug that the guest does not answer). The GPU stays "
          "attached to '",
          name,
          "' and the MUX keeps it routed there; the request stays pending "
          "in libvirt. Retry the move, or shut the guest down"));
    }
    waiter->mu.LockWhenWithTimeout(
        absl::Condition(waiter.get(), &RemovalWaiter::Done),
        std::min(options_.poll_interval, deadline - now));
    waiter->mu.Unlock();
  }
}

absl::Status LibvirtBackend::CheckSysfsLocked(const std::string& gpu_name,
                                              Gpu& g) {
  absl::StatusOr<PciDeviceInfo> info = sysfs_.InspectNvidiaGpu(g.bdf);
  if (!info.ok()) return info.status();
  if (info->driver != kVfioPci) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", gpu_name, " (", g.bdf, ") is bound to '", info->driver,
        "', not vfio-pci; the hostdev is managed='no', so the host must be "
        "prepared first: deploy/host/prepare_host.sh --bdf ",
        g.bdf));
  }
  absl::Status s = sysfs_.CheckGroupViable(g.bdf);
  if (!s.ok()) return s;
  // QEMU's vfio release would otherwise reset the GPU at the next detach.
  absl::StatusOr<std::string> resets = sysfs_.DisableReset(g.bdf);
  if (!resets.ok()) return resets.status();
  if (!resets->empty()) g.saved_resets = *resets;
  return absl::OkStatus();
}

absl::Status LibvirtBackend::AttachLocked(_virConnect* conn,
                                          const std::string& gpu_name, Gpu& g,
                                          const std::string& domain) {
  absl::StatusOr<std::string> mapped = LibvirtName(domain);
  if (!mapped.ok()) return mapped.status();
  const std::string& name = *mapped;
  const std::string what = absl::StrCat("attaching GPU ", gpu_name, " (", g.bdf,
                                        ") to domain '", name, "'");
  absl::StatusOr<std::vector<std::string>> holders = DomainsHoldingBdf(conn, g.bdf);
  if (!holders.ok()) return holders.status();
  std::vector<std::string> others;
  for (const std::string& h : *holders) {
    if (h != name) others.push_back(h);
  }
  if (!others.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " refused: it is attached to running domain ",
        QuotedList(others),
        " and a PCI function can be passed to one VM at a time; detach it "
        "there first (Move from that domain), and if the MUX route table "
        "disagrees, trust libvirt's live XML"));
  }
  if (!holders->empty()) return absl::OkStatus();  // already there
  if (options_.check_sysfs) {
    absl::Status s = CheckSysfsLocked(gpu_name, g);
    if (!s.ok()) return s;
  }
  DomainPtr dom(virDomainLookupByName(conn, name.c_str()));
  if (dom == nullptr) {
    absl::Status e = LibvirtError(what, options_.uri);
    return absl::Status(
        e.code(), absl::StrCat(e.message(), "; check `virsh -c ", options_.uri,
                               " list --all` and the MUX config's domain "
                               "names"));
  }
  if (virDomainIsActive(dom.get()) != 1) {
    virResetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the domain is not running and live attach needs a running "
              "domain; start it (`virsh -c ",
        options_.uri, " start ", name, "`) and retry"));
  }
  if (options_.require_tdx) {
    absl::StatusOr<std::string> live = DomainXml(dom.get(), name, options_.uri);
    if (!live.ok()) return live.status();
    absl::StatusOr<std::string> launch = LaunchSecurityType(*live);
    if (!launch.ok()) return launch.status();
    if (*launch != "tdx") {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " refused: the domain is not a TDX guest (its live XML has ",
          launch->empty() ? "no <launchSecurity>"
                          : absl::StrCat("<launchSecurity type='", *launch, "'>"),
          "); the MUX passes the GPU only to TDs (deploy/libvirt/tdx-guest.xml)"));
    }
  }
  absl::StatusOr<std::string> dev = HostdevXml(g.bdf, g.alias);
  if (!dev.ok()) return dev.status();
  if (virDomainAttachDeviceFlags(dom.get(), dev->c_str(),
                                 VIR_DOMAIN_AFFECT_LIVE) < 0) {
    absl::Status e = HotplugError(LibvirtError(what, options_.uri), name);
    // QEMU cannot open a VFIO group that another process holds (libvirt
    // reports QEMU's EBUSY as an internal error): name the holder when the
    // scan can see it.
    if (options_.check_sysfs) {
      absl::StatusOr<std::vector<VfioHolder>> holders = sysfs_.FindVfioHolders(g.bdf);
      if (holders.ok() && !holders->empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            e.message(), ". The GPU's VFIO group is held open by ",
            HolderList(*holders),
            " outside libvirt, so QEMU cannot take it: stop that process"));
      }
    }
    return e;
  }
  absl::StatusOr<std::string> xml = DomainXml(dom.get(), name, options_.uri);
  if (!xml.ok()) return xml.status();
  absl::StatusOr<bool> has = XmlHasBdf(*xml, g.bdf, name);
  if (!has.ok()) return has.status();
  if (!*has) {
    return absl::InternalError(absl::StrCat(
        what, ": libvirt reported success but the live XML does not list the "
              "hostdev; check `virsh dumpxml ",
        name, "` and the QEMU log before retrying"));
  }
  return absl::OkStatus();
}

absl::Status LibvirtBackend::Move(const std::string& gpu,
                                  const std::string& from_domain,
                                  const std::string& to_domain) {
  // Before libvirt is asked anything: the same refusal whether or not a VM
  // of that name exists.
  for (const std::string* d : {&from_domain, &to_domain}) {
    if (!d->empty()) {
      absl::StatusOr<std::string> mapped = LibvirtName(*d);
      if (!mapped.ok()) return mapped.status();
    }
  }
  absl::StatusOr<Gpu*> found = Find(gpu);
  if (!found.ok()) return found.status();
  Gpu& g = **found;
  absl::MutexLock lock(g.mu);
  if (options_.check_sysfs) {
    absl::Status pending = sysfs_.CheckNoWritePending(g.bdf);
    if (!pending.ok()) return pending;
  }
  absl::StatusOr<ConnRef> conn = Connection();
  if (!conn.ok()) return conn.status();
  absl::Status s;
  // Confirming a domain attaches (a no-op when the GPU is there, a repair
  // when it is not); confirming "unrouted" runs an unroute's check below, so
  // the table never records a GPU a VM holds as free.
  if (from_domain == to_domain && !to_domain.empty()) {
    return AttachLocked(conn->get(), gpu, g, to_domain);
  }
  if (!from_domain.empty()) {
    GT_LOG(3, "GPU ", gpu, " (", g.bdf, "): detaching from '", from_domain, "'");
    s = DetachLocked(conn->get(), gpu, g, from_domain);
    if (!s.ok()) return s;
  }
  if (!to_domain.empty()) {
    GT_LOG(3, "GPU ", gpu, " (", g.bdf, "): attaching to '", to_domain, "'");
    return AttachLocked(conn->get(), gpu, g, to_domain);
  }
  absl::StatusOr<std::vector<std::string>> holders = DomainsHoldingBdf(conn->get(), g.bdf);
  if (!holders.ok()) return holders.status();
  if (!holders->empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "unrouting GPU ", gpu, " (", g.bdf, ") from ",
        from_domain.empty() ? "(unrouted)" : "'" + from_domain + "'",
        ": it is still attached to running domain ", QuotedList(*holders),
        "; the MUX route table and libvirt disagree, move it from there"));
  }
  return absl::OkStatus();
}

absl::Status LibvirtBackend::Reset(const std::string& gpu) {
  absl::StatusOr<Gpu*> found = Find(gpu);
  if (!found.ok()) return found.status();
  Gpu& g = **found;
  absl::MutexLock lock(g.mu);
  if (!options_.check_sysfs) {
    return absl::UnimplementedError(absl::StrCat(
        "libvirt backend: Reset of GPU ", gpu, " (", g.bdf,
        ") needs sysfs access; enable check_sysfs in the MUX config"));
  }
  // A reset still blocked in the kernel: the GPU is not back yet, and a
  // second writer would only queue behind the first (one more thread each).
  absl::Status pending = sysfs_.CheckNoWritePending(g.bdf);
  if (!pending.ok()) return pending;
  absl::StatusOr<PciDeviceInfo> info = sysfs_.InspectNvidiaGpu(g.bdf);
  if (!info.ok()) return info.status();
  if (info->driver != kVfioPci) {
    return absl::FailedPreconditionError(absl::StrCat(
        "libvirt backend: reset of GPU ", gpu, " (", g.bdf,
        ") refused: it is bound to '", info->driver,
        "', not vfio-pci, so the host or another party uses it"));
  }
  // Who holds the GPU. libvirt's live XML first: attached to exactly one
  // configured domain, that VM's QEMU is its one holder (a VFIO group opens
  // once), and resetting it is the orchestrator's to ask. Attached to any
  // other VM: refused. Attached nowhere: only if no process holds it (the
  // scan refuses when it cannot see every process's files).
  absl::StatusOr<ConnRef> conn = Connection();
  if (!conn.ok()) return conn.status();
  absl::StatusOr<std::vector<std::string>> vms = DomainsHoldingBdf(conn->get(), g.bdf);
  if (!vms.ok()) return vms.status();
  if (!vms->empty()) {
    std::set<std::string> configured;
    for (const std::string& d : options_.domains) {
      absl::StatusOr<std::string> n = LibvirtName(d);
      if (n.ok()) configured.insert(*n);
    }
    if (vms->size() != 1 || configured.count((*vms)[0]) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "libvirt backend: reset of GPU ", gpu, " (", g.bdf,
          ") refused: libvirt lists it in ", QuotedList(*vms),
          ", not in exactly one configured domain"));
    }
  } else {
    absl::StatusOr<std::vector<VfioHolder>> holders =
        sysfs_.FindVfioHolders(g.bdf);
    if (!holders.ok()) {
      return absl::Status(holders.status().code(),
                          absl::StrCat("libvirt backend: reset of GPU ", gpu,
                                       " refused: ", holders.status().message()));
    }
    if (!holders->empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "libvirt backend: reset of GPU ", gpu, " (", g.bdf,
          ") refused: held open by ", HolderList(*holders),
          " while libvirt lists it in no running domain"));
    }
  }
  absl::StatusOr<std::string> current = sysfs_.ReadResetMethod(g.bdf);
  if (!current.ok()) return current.status();
  if (!current->empty()) g.saved_resets = *current;
  return sysfs_.ResetKeepingResetDisabled(g.bdf, g.saved_resets);
}

}  // namespace gputravel
