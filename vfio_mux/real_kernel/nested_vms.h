#ifndef GPUTRAVEL_VFIO_MUX_REAL_KERNEL_NESTED_VMS_H_
#define GPUTRAVEL_VFIO_MUX_REAL_KERNEL_NESTED_VMS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct _virConnect;

namespace gputravel {

// How a nested VM's root ports signal hot-plug to its guest.
enum class PciHotplug {
  // Native PCIe hot-plug (QEMU's `-global
  // ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off`): with no guest OS
  // the slot stays powered off, so QEMU completes an unplug at once and
  // libvirt sends DEVICE_REMOVED.
  kNativePcie,
  // QEMU's default for q35 (7.2): ACPI hot-plug, where an unplug waits for
  // the guest's ACPI eject. A guest that runs no OS never answers: libvirt
  // accepts the detach request and no DEVICE_REMOVED ever comes.
  kAcpi,
};

// A q35 domain that boots nothing (no disk; it would sit in its firmware),
// with 64 MiB and two pcie-root-ports for a hot-plugged device: a stand-in
// for a holder's or the orchestrator's TD. No USB controller, no balloon.
std::string MinimalDomainXml(const std::string& name, PciHotplug hotplug);

// One device event libvirt delivered.
struct DeviceEvent {
  std::string domain;
  std::string kind;  // "added", "removed" or "removal-failed"
  std::string alias;
  absl::Time time;
  // Position among the events recorded: libvirt delivers one connection's
  // events in the order it emits them.
  size_t seq = 0;
};

// The nested VMs of the libvirt guest tests, through the real libvirtd in
// the guest (qemu:///system): defines and starts domains, destroys them, and
// records every device event libvirt sends on its own connection (registered
// before any domain starts; the MUX's own connection gets its copies
// independently, so a test waits for a copy here). Domains are started paused: their QEMU, its PCI
// topology and hot-plug are real, and no firmware spins on the guest's CPU
// (TCG in TCG). Test-only.
class NestedVms {
 public:
  static absl::StatusOr<std::unique_ptr<NestedVms>> Connect(const std::string& uri);
  // Connect, then define a MinimalDomainXml for each (name, hot-plug) and
  // start them all (Start).
  static absl::StatusOr<std::unique_ptr<NestedVms>> Launch(
      const std::string& uri, const std::vector<std::pair<std::string, PciHotplug>>& domains);
  ~NestedVms();
  NestedVms(const NestedVms&) = delete;
  NestedVms& operator=(const NestedVms&) = delete;

  // Defines a persistent domain from `xml`; libvirt's error otherwise.
  absl::Status Define(const std::string& xml);
  // Starts defined domains, paused, all at once; waits for all of them.
  absl::Status Start(const std::vector<std::string>& names);
  // Destroys (powers off) a running domain.
  absl::Status Destroy(const std::string& name);
  bool IsActive(const std::string& name);
  absl::StatusOr<std::string> LiveXml(const std::string& name);
  // The pid of the domain's QEMU (libvirt's /run/libvirt/qemu/NAME.pid).
  absl::StatusOr<int> QemuPid(const std::string& name);

  // Called on libvirt's event loop thread for each device event.
  void Record(const std::string& domain, const std::string& kind, const std::string& alias);
  // The events recorded so far, in order.
  std::vector<DeviceEvent> Events();
  // Waits (at most `timeout`) for an event of `kind` for `alias` on `domain`
  // recorded at or after `since`; whether one came.
  bool WaitForEvent(const std::string& domain, const std::string& kind,
                    const std::string& alias, absl::Time since, absl::Duration timeout);

 private:
  explicit NestedVms(_virConnect* conn) : conn_(conn) {}
  absl::Status Error(const std::string& what);

  _virConnect* conn_;
  std::vector<int> callback_ids_;
  absl::Mutex mu_;
  std::vector<DeviceEvent> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_REAL_KERNEL_NESTED_VMS_H_
