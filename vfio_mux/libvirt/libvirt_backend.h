#ifndef GPUTRAVEL_VFIO_MUX_LIBVIRT_LIBVIRT_BACKEND_H_
#define GPUTRAVEL_VFIO_MUX_LIBVIRT_LIBVIRT_BACKEND_H_

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "vfio_mux/routing_backend.h"
#include "vfio_mux/sysfs/pci_sysfs.h"
#include "vfio_mux/sysfs/sysfs_fs.h"

// libvirt's handle, kept out of this header so that users of the backend do
// not need <libvirt/libvirt.h>.
struct _virConnect;

namespace gputravel {

// One GPU under the MUX's control.
struct LibvirtGpuConfig {
  std::string name;   // the MUX's name for it ("gpu0"); empty: the BDF
  std::string bdf;    // host PCI address, "0000:98:00.0"
  std::string alias;  // hostdev alias; empty: DefaultHostdevAlias(name)
};

struct LibvirtBackendOptions {
  // libvirt connection URI ("qemu:///system", "qemu+ssh://host/system",
  // "test:///default" for tests).
  std::string uri = "qemu:///system";
  std::vector<LibvirtGpuConfig> gpus;  // at least one
  // The only MUX domains this backend attaches to or detaches from (the MUX
  // configuration's "domains"); any other is refused (DomainNotConfigured)
  // before libvirt is asked anything about it.
  std::set<std::string> domains;
  // MUX domain name -> libvirt domain name, for configured domains whose VM
  // is named otherwise; a configured domain not listed here is its own
  // libvirt name. Every key must be a configured domain.
  std::map<std::string, std::string> domain_names;
  // How long a guest may take to release a device after a detach request
  // (the guest OS must acknowledge the PCI hot-unplug).
  absl::Duration detach_timeout = absl::Seconds(30);
  // Upper bound between checks that the domain still runs while waiting;
  // the DEVICE_REMOVED event ends the wait at once.
  absl::Duration poll_interval = absl::Milliseconds(250);
  // Check through sysfs, before each attach, that the GPU is bound to
  // vfio-pci (managed='no' needs it), its IOMMU group is viable and its
  // reset is disabled (disabling it if needed); Reset also goes through
  // sysfs. Off only where the MUX cannot see the host's sysfs (tests, remote
  // URIs); then Reset is unavailable.
  bool check_sysfs = true;
  // Attach only to a running domain whose live XML says it is a TDX guest
  // (<launchSecurity type='tdx'>). Off only for drivers that cannot express
  // it (libvirt's test driver).
  bool require_tdx = true;
  PciSysfsOptions sysfs;
};

// Routing by libvirt hostdev hot-plug: Move detaches the GPU from the `from`
// VM and attaches it to the `to` VM: the detach confirmed by libvirt's event,
// the attach in the live domain XML.
//
//   detach: find the hostdev by host BDF in `from`'s live XML (absent:
//     nothing to do); subscribe to DEVICE_REMOVED / DEVICE_REMOVAL_FAILED
//     (refused if libvirt cannot deliver them); virDomainDetachDeviceAlias
//     with the live alias, VIR_DOMAIN_AFFECT_LIVE (QEMU refusing it because
//     an earlier request is still pending counts as sent). Done only when the
//     DEVICE_REMOVED event for that alias arrives (then confirmed in the
//     live XML) or the domain stops; the API's return says only that the
//     request was sent, which it also says when the guest never answers.
//     No event within detach_timeout: DEADLINE_EXCEEDED, the GPU still
//     attached to `from`.
//   attach: refuse while any other running domain's live XML lists the
//     GPU; sysfs checks; refuse a domain whose live XML is not a TDX guest
//     (require_tdx); virDomainAttachDeviceFlags(<hostdev managed='no'>,
//     VIR_DOMAIN_AFFECT_LIVE); confirm in the live XML. Attaching to a domain
//     that already has it is a no-op, so a retried Move converges.
// Only the live state is touched: the persistent definitions stay as the
// operator wrote them (they should not list the GPU; see
// deploy/libvirt/tdx-guest.xml).
class LibvirtBackend : public RoutingBackend {
 public:
  // Validates the config, starts the libvirt event loop, connects to `uri`
  // and (with check_sysfs) inspects every GPU.
  static absl::StatusOr<std::unique_ptr<LibvirtBackend>> Create(
      LibvirtBackendOptions options,
      std::shared_ptr<SysfsFs> fs = RealSysfsFs());
  ~LibvirtBackend() override;

  std::string Name() const override { return "libvirt"; }
  absl::StatusOr<std::vector<GpuDevice>> ListGpus() override;
  absl::Status Move(const std::string& gpu, const std::string& from_domain,
                    const std::string& to_domain) override;
  // Function reset through sysfs with reset_method restored for the reset
  // and disabled again after it. Needs check_sysfs. Only for a GPU bound to
  // vfio-pci that is either held by no process, or attached (per libvirt's
  // live XML) to a configured domain and to nothing else: a GPU the host's
  // driver or an unconfigured VM uses is refused untouched.
  absl::Status Reset(const std::string& gpu) override;

  // The running libvirt domains whose live XML lists the GPU.
  absl::StatusOr<std::vector<std::string>> DomainsHolding(
      const std::string& gpu);
  // The live XML of a MUX domain (after the domain_names mapping).
  absl::StatusOr<std::string> LiveXml(const std::string& domain);

 private:
  // The configured GPUs are fixed at Create; what the backend learns about
  // each is guarded by that GPU's lock, which GPUs of one IOMMU group share.
  // Moves and resets of one GPU are serialized (two must never both see it
  // free); no lock covers two groups, so one GPU's slow detach or reset never
  // delays another's.
  struct Gpu {
    std::string bdf;
    std::string alias;
    absl::Mutex* mu = nullptr;  // owned by group_locks_
    std::string saved_resets ABSL_GUARDED_BY(mu);
  };
  // A counted reference to the shared connection (libvirt connections may
  // be used from several threads at once); the deleter drops it.
  struct ConnUnref {
    void operator()(_virConnect* c) const;
  };
  using ConnRef = std::unique_ptr<_virConnect, ConnUnref>;

  explicit LibvirtBackend(LibvirtBackendOptions options,
                          std::shared_ptr<SysfsFs> fs);
  // The connection, reopened first when libvirtd went away.
  absl::StatusOr<ConnRef> Connection();
  absl::StatusOr<Gpu*> Find(const std::string& gpu);
  // The libvirt name of a configured domain; DomainNotConfigured otherwise.
  absl::StatusOr<std::string> LibvirtName(const std::string& domain) const;
  absl::StatusOr<std::vector<std::string>> DomainsHoldingBdf(
      _virConnect* conn, const std::string& bdf);
  absl::Status DetachLocked(_virConnect* conn, const std::string& name,
                            const Gpu& g, const std::string& domain)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  absl::Status AttachLocked(_virConnect* conn, const std::string& name, Gpu& g,
                            const std::string& domain)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  absl::Status CheckSysfsLocked(const std::string& name, Gpu& g)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);

  const LibvirtBackendOptions options_;
  PciSysfs sysfs_;
  absl::Mutex conn_mu_;
  _virConnect* conn_ ABSL_GUARDED_BY(conn_mu_) = nullptr;
  // Written only by Create; read without a lock afterwards.
  std::map<std::string, std::unique_ptr<absl::Mutex>> group_locks_;  // by IOMMU group
  std::map<std::string, Gpu> gpus_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_LIBVIRT_LIBVIRT_BACKEND_H_
