#ifndef GPUTRAVEL_VFIO_MUX_SYSFS_SYSFS_BACKEND_H_
#define GPUTRAVEL_VFIO_MUX_SYSFS_SYSFS_BACKEND_H_

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "vfio_mux/routing_backend.h"
#include "vfio_mux/sysfs/pci_sysfs.h"
#include "vfio_mux/sysfs/sysfs_fs.h"

namespace gputravel {

// One GPU under the MUX's control.
struct SysfsGpuConfig {
  std::string name;  // the MUX's name for it ("gpu0"); empty: the BDF
  std::string bdf;   // "0000:98:00.0"
};

struct SysfsBackendOptions {
  PciSysfsOptions sysfs;  // sysfs_root, proc_root, timeouts
  // GPUs to route: at least one. Only these are ever touched; no GPU is
  // routable for being found under sysfs_root.
  std::vector<SysfsGpuConfig> gpus;
  // The only domains Move routes to (the MUX configuration's "domains").
  std::set<std::string> domains;
  // Bind every GPU to vfio-pci and disable its reset at Create (Prepare,
  // the sequence `vfio_mux prepare` and deploy/host/prepare_host.sh run). Off: Create only inspects, and Move
  // fails until the host has been prepared.
  bool prepare_on_start = false;
};

// Routing on a single host by vfio-pci binding alone.
//
// The GPU stays bound to vfio-pci the whole time; which VFIO consumer (a VM's
// QEMU, a holder process) opens /dev/vfio/GROUP is decided outside this
// process. So here a "domain" is bookkeeping: Move(gpu, from, to)
//   1. checks that `from` matches the domain this backend last recorded (none
//      recorded, e.g. after a restart: the MUX's route table is trusted);
//   2. checks the GPU is still an NVIDIA GPU bound to vfio-pci, its IOMMU
//      group is viable, and reset_method is empty, disabling it if something
//      re-enabled it, so the next release by a consumer does not reset the
//      GPU and end its CC session;
//   3. checks that no process holds the GPU's VFIO group or cdev open, i.e.
//      the `from` consumer has really let go (skipped only when from == to
//      names a domain: confirming "unrouted" scans as well);
//   4. records `to`.
// A `to` domain that is not configured is refused (DomainNotConfigured)
// before any of it.
// It never unbinds during Move: rebinding would reset the GPU. The libvirt
// backend is the one that actually attaches the GPU to a VM.
class SysfsBackend : public RoutingBackend {
 public:
  // Validates the configuration and inspects every GPU (missing or
  // non-NVIDIA devices fail here, not at the first Move).
  static absl::StatusOr<std::unique_ptr<SysfsBackend>> Create(
      SysfsBackendOptions options, std::shared_ptr<SysfsFs> fs = RealSysfsFs());

  std::string Name() const override { return "sysfs"; }
  absl::StatusOr<std::vector<GpuDevice>> ListGpus() override;
  absl::Status Move(const std::string& gpu, const std::string& from_domain,
                    const std::string& to_domain) override;
  // Only for a GPU bound to vfio-pci that no process holds open (a consumer
  // lets go first): restores reset_method, writes reset, and disables
  // reset_method again. A GPU with the host's driver, or one a process
  // holds, is refused untouched.
  absl::Status Reset(const std::string& gpu) override;

  // PrepareGpuForVfio (vfio_mux/sysfs/vfio_preparation.h): checks the IOMMU
  // group, binds `gpu` to vfio-pci, disables its reset (remembering the
  // kernel's list for Reset and Release). Idempotent.
  absl::Status Prepare(const std::string& gpu);
  // End of a campaign: restores reset_method (the saved list, or what the
  // kernel finds works now if it refuses that) and hands the GPU back to its
  // native driver. Refused while a VFIO consumer holds it.
  absl::Status Release(const std::string& gpu);
  // The domain recorded by the last Move ("" = unrouted or unknown).
  std::string RecordedDomain(const std::string& gpu);

  PciSysfs& sysfs() { return sysfs_; }

 private:
  // The configured GPUs are fixed at Create; what the backend learns about
  // each is guarded by that GPU's lock, which GPUs of one IOMMU group share
  // (their sysfs steps must not interleave). No lock covers two groups, so a
  // slow write or holder scan for one GPU never delays another's.
  struct Gpu {
    std::string bdf;
    absl::Mutex* mu = nullptr;  // owned by group_locks_
    std::string domain ABSL_GUARDED_BY(mu);          // recorded by Move
    bool domain_known ABSL_GUARDED_BY(mu) = false;   // false until the first Move
    std::string saved_resets ABSL_GUARDED_BY(mu);    // reset_method before we disabled it
  };

  SysfsBackend(SysfsBackendOptions options, std::shared_ptr<SysfsFs> fs);
  absl::StatusOr<Gpu*> Find(const std::string& gpu);
  absl::Status DisableResetLocked(const std::string& name, Gpu& g)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  absl::Status PrepareLocked(Gpu& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);
  absl::Status CheckNoHoldersLocked(const std::string& name, const Gpu& g,
                                    const std::string& from_domain)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(g.mu);

  const SysfsBackendOptions options_;
  PciSysfs sysfs_;
  // Written only by Create; read without a lock afterwards.
  std::map<std::string, std::unique_ptr<absl::Mutex>> group_locks_;  // by IOMMU group
  std::map<std::string, Gpu> gpus_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_SYSFS_SYSFS_BACKEND_H_
