#include "vfio_mux/real_kernel/nested_vms.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "vfio_mux/libvirt/libvirt_event_loop.h"

namespace gputravel {
namespace {

struct DomainFree {
  void operator()(virDomainPtr d) const {
    if (d != nullptr) virDomainFree(d);
  }
};
using DomainPtr = std::unique_ptr<virDomain, DomainFree>;

std::string LastError() {
  virErrorPtr e = virGetLastError();
  std::string msg = e != nullptr && e->message != nullptr ? e->message : "unknown libvirt error";
  virResetLastError();
  return msg;
}

template <const char* kKind>
void OnDeviceEvent(virConnectPtr, virDomainPtr dom, const char* alias, void* opaque) {
  const char* name = virDomainGetName(dom);
  static_cast<NestedVms*>(opaque)->Record(name != nullptr ? name : "?", kKind,
                                          alias != nullptr ? alias : "");
}

constexpr char kAdded[] = "added";
constexpr char kRemoved[] = "removed";
constexpr char kRemovalFailed[] = "removal-failed";

}  // namespace

std::string MinimalDomainXml(const std::string& name, PciHotplug hotplug) {
  const std::string native =
      hotplug == PciHotplug::kNativePcie
          ? "  <qemu:commandline>\n"
            "    <qemu:arg value='-global'/>\n"
            "    <qemu:arg value='ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off'/>\n"
            "  </qemu:commandline>\n"
          : "";
  return absl::StrCat(
      "<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n"
      "  <name>", name, "</name>\n"
      "  <memory unit='MiB'>64</memory>\n"
      "  <vcpu>1</vcpu>\n"
      "  <os><type arch='x86_64' machine='q35'>hvm</type></os>\n"
      "  <features><acpi/><apic/></features>\n"
      "  <on_poweroff>destroy</on_poweroff>\n"
      "  <devices>\n"
      "    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
      "    <controller type='pci' index='0' model='pcie-root'/>\n"
      "    <controller type='pci' index='1' model='pcie-root-port'/>\n"
      "    <controller type='pci' index='2' model='pcie-root-port'/>\n"
      "    <controller type='usb' model='none'/>\n"
      "    <memballoon model='none'/>\n"
      "  </devices>\n",
      native, "</domain>\n");
}

absl::StatusOr<std::unique_ptr<NestedVms>> NestedVms::Connect(const std::string& uri) {
  absl::Status loop = EnsureLibvirtEventLoop();
  if (!loop.ok()) return loop;
  virConnectPtr conn = virConnectOpen(uri.c_str());
  if (conn == nullptr) {
    return absl::UnavailableError(absl::StrCat("connecting to libvirt at ", uri,
                                               " in the guest: ", LastError()));
  }
  std::unique_ptr<NestedVms> vms(new NestedVms(conn));
  const std::pair<int, virConnectDomainEventGenericCallback> events[] = {
      {VIR_DOMAIN_EVENT_ID_DEVICE_ADDED, VIR_DOMAIN_EVENT_CALLBACK(OnDeviceEvent<kAdded>)},
      {VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED, VIR_DOMAIN_EVENT_CALLBACK(OnDeviceEvent<kRemoved>)},
      {VIR_DOMAIN_EVENT_ID_DEVICE_REMOVAL_FAILED,
       VIR_DOMAIN_EVENT_CALLBACK(OnDeviceEvent<kRemovalFailed>)},
  };
  for (const auto& [id, cb] : events) {
    int cid = virConnectDomainEventRegisterAny(conn, nullptr, id, cb, vms.get(), nullptr);
    if (cid < 0) return vms->Error("subscribing to device events");
    vms->callback_ids_.push_back(cid);
  }
  return vms;
}

absl::StatusOr<std::unique_ptr<NestedVms>> NestedVms::Launch(
    const std::string& uri, const std::vector<std::pair<std::string, PciHotplug>>& domains) {
  absl::StatusOr<std::unique_ptr<NestedVms>> vms = Connect(uri);
  if (!vms.ok()) return vms.status();
  std::vector<std::string> names;
  for (const auto& [name, hotplug] : domains) {
    absl::Status s = (*vms)->Define(MinimalDomainXml(name, hotplug));
    if (!s.ok()) return s;
    names.push_back(name);
  }
  absl::Status s = (*vms)->Start(names);
  if (!s.ok()) return s;
  return vms;
}

NestedVms::~NestedVms() {
  for (int id : callback_ids_) virConnectDomainEventDeregisterAny(conn_, id);
  virConnectClose(conn_);
}

absl::Status NestedVms::Error(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", LastError()));
}

absl::Status NestedVms::Define(const std::string& xml) {
  DomainPtr dom(virDomainDefineXML(conn_, xml.c_str()));
  if (dom == nullptr) return Error("defining a nested domain");
  return absl::OkStatus();
}

absl::Status NestedVms::Start(const std::vector<std::string>& names) {
  std::vector<std::string> errors(names.size());
  std::vector<std::thread> starts;
  for (size_t i = 0; i < names.size(); ++i) {
    starts.emplace_back([this, &names, &errors, i] {
      DomainPtr dom(virDomainLookupByName(conn_, names[i].c_str()));
      if (dom == nullptr || virDomainCreateWithFlags(dom.get(), VIR_DOMAIN_START_PAUSED) < 0) {
        errors[i] = absl::StrCat("starting nested domain '", names[i], "': ", LastError(),
                                 " (see /var/log/libvirt/qemu/", names[i], ".log)");
      }
    });
  }
  for (std::thread& t : starts) t.join();
  std::vector<std::string> failed;
  for (const std::string& e : errors) {
    if (!e.empty()) failed.push_back(e);
  }
  if (!failed.empty()) return absl::InternalError(absl::StrJoin(failed, "; "));
  return absl::OkStatus();
}

absl::Status NestedVms::Destroy(const std::string& name) {
  DomainPtr dom(virDomainLookupByName(conn_, name.c_str()));
  if (dom == nullptr || virDomainDestroy(dom.get()) < 0) {
    return Error(absl::StrCat("destroying nested domain '", name, "'"));
  }
  return absl::OkStatus();
}

bool NestedVms::IsActive(const std::string& name) {
  DomainPtr dom(virDomainLookupByName(conn_, name.c_str()));
  bool active = dom != nullptr && virDomainIsActive(dom.get()) == 1;
  virResetLastError();
  return active;
}

absl::StatusOr<std::string> NestedVms::LiveXml(const std::string& name) {
  DomainPtr dom(virDomainLookupByName(conn_, name.c_str()));
  if (dom == nullptr) return Error(absl::StrCat("looking up nested domain '", name, "'"));
  char* xml = virDomainGetXMLDesc(dom.get(), 0);
  if (xml == nullptr) return Error(absl::StrCat("reading the live XML of '", name, "'"));
  std::string out = xml;
  free(xml);
  return out;
}

absl::StatusOr<int> NestedVms::QemuPid(const std::string& name) {
  const std::string path = absl::StrCat("/run/libvirt/qemu/", name, ".pid");
  std::ifstream in(path);
  std::string text;
  int pid = 0;
  if (!std::getline(in, text) || !absl::SimpleAtoi(text, &pid) || pid <= 0) {
    return absl::NotFoundError(absl::StrCat("no QEMU pid in ", path));
  }
  return pid;
}

void NestedVms::Record(const std::string& domain, const std::string& kind,
                       const std::string& alias) {
  absl::MutexLock lock(&mu_);
  events_.push_back({domain, kind, alias, absl::Now(), events_.size()});
}

std::vector<DeviceEvent> NestedVms::Events() {
  absl::MutexLock lock(&mu_);
  return events_;
}

bool NestedVms::WaitForEvent(const std::string& domain, const std::string& kind,
                             const std::string& alias, absl::Time since,
                             absl::Duration timeout) {
  auto found = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const DeviceEvent& e : events_) {
      if (e.domain == domain && e.kind == kind && e.alias == alias && e.time >= since) {
        return true;
      }
    }
    return false;
  };
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&found), timeout);
}

}  // namespace gputravel
