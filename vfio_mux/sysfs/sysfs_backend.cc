#include "vfio_mux/sysfs/sysfs_backend.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/log.h"
#include "vfio_mux/mux_policy.h"
#include "vfio_mux/sysfs/pci_address.h"
#include "vfio_mux/sysfs/vfio_preparation.h"

namespace gputravel {
namespace {

constexpr absl::string_view kVfioPci = "vfio-pci";

std::string Quoted(const std::string& domain) {
  return domain.empty() ? "(unrouted)" : absl::StrCat("'", domain, "'");
}

}  // namespace

SysfsBackend::SysfsBackend(SysfsBackendOptions options,
                           std::shared_ptr<SysfsFs> fs)
    : options_(std::move(options)), sysfs_(options_.sysfs, std::move(fs)) {}

absl::StatusOr<std::unique_ptr<SysfsBackend>> SysfsBackend::Create(
    SysfsBackendOptions options, std::shared_ptr<SysfsFs> fs) {
  std::unique_ptr<SysfsBackend> b(
      new SysfsBackend(std::move(options), std::move(fs)));
  const std::vector<SysfsGpuConfig>& gpus = b->options_.gpus;
  if (gpus.empty()) {
    return absl::InvalidArgumentError(
        "sysfs backend: no GPUs in the MUX config; list each GPU the MUX may route "
        "({\"name\", \"bdf\"}, `lspci -D -d 10de:` shows the BDFs): no GPU is routable "
        "for merely being present");
  }
  for (const std::string& d : b->options_.domains) {
    absl::Status s = ValidateMuxName("domain", d);
    if (!s.ok()) return absl::InvalidArgumentError("sysfs backend: " + std::string(s.message()));
  }
  std::set<std::string> bdfs;
  for (size_t i = 0; i < gpus.size(); ++i) {
    absl::StatusOr<std::string> bdf = CanonicalBdf(gpus[i].bdf);
    if (!bdf.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sysfs backend: GPU #", i, " ('", gpus[i].name,
          "') in the MUX config: ", bdf.status().message()));
    }
    std::string name = gpus[i].name.empty() ? *bdf : gpus[i].name;
    absl::Status valid = ValidateMuxName("GPU", name);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sysfs backend: GPU #", i, " in the MUX config: ", valid.message()));
    }
    if (b->gpus_.count(name) || !bdfs.insert(*bdf).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sysfs backend: GPU '", name, "' (", *bdf,
          ") is listed twice in the MUX config; names and BDFs must be "
          "unique"));
    }
    absl::StatusOr<PciDeviceInfo> info = b->sysfs_.InspectNvidiaGpu(*bdf);
    if (!info.ok()) return info.status();
    // Without an IOMMU group (IOMMU off: Move refuses it) a GPU locks alone.
    std::unique_ptr<absl::Mutex>& lock =
        b->group_locks_[info->iommu_group.empty() ? "bdf " + *bdf : info->iommu_group];
    if (lock == nullptr) lock = std::make_unique<absl::Mutex>();
    Gpu& g = b->gpus_[name];
    g.bdf = *bdf;
    g.mu = lock.get();
  }
  if (b->options_.prepare_on_start) {
    for (auto& [name, g] : b->gpus_) {
      absl::MutexLock lock(g.mu);
      absl::Status s = b->PrepareLocked(g);
      if (!s.ok()) return s;
    }
  }
  return b;
}

absl::StatusOr<SysfsBackend::Gpu*> SysfsBackend::Find(const std::string& gpu) {
  auto it = gpus_.find(gpu);
  if (it == gpus_.end()) {
    std::vector<std::string> names;
    for (const auto& [name, g] : gpus_) names.push_back(name);
    return absl::NotFoundError(absl::StrCat(
        "sysfs backend: unknown GPU '", gpu, "'; configured: ",
        absl::StrJoin(names, ", ")));
  }
  return &it->second;
}

absl::StatusOr<std::vector<GpuDevice>> SysfsBackend::ListGpus() {
  std::vector<GpuDevice> out;
  for (const auto& [name, g] : gpus_) {
    absl::MutexLock lock(g.mu);
    absl::StatusOr<PciDeviceInfo> info = sysfs_.Inspect(g.bdf);
    if (!info.ok()) return info.status();
    out.push_back(GpuDevice{name, info->bdf, info->iommu_group, info->driver});
  }
  return out;
}

absl::Status SysfsBackend::DisableResetLocked(const std::string& name,
                                              Gpu& g) {
  absl::StatusOr<std::string> before = sysfs_.DisableReset(g.bdf);
  if (!before.ok()) return before.status();
  if (!before->empty()) g.saved_resets = *before;
  return absl::OkStatus();
}

absl::Status SysfsBackend::PrepareLocked(Gpu& g) {
  absl::StatusOr<VfioPreparation> p = PrepareGpuForVfio(sysfs_, g.bdf);
  if (!p.ok()) return p.status();
  if (!p->reset_methods.empty()) g.saved_resets = p->reset_methods;
  return absl::OkStatus();
}

absl::Status SysfsBackend::CheckNoHoldersLocked(const std::string& name,
                                                const Gpu& g,
                                                const std::string& from_domain) {
  absl::StatusOr<std::vector<VfioHolder>> holders =
      sysfs_.FindVfioHolders(g.bdf);
  if (!holders.ok()) return holders.status();
  if (holders->empty()) return absl::OkStatus();
  std::vector<std::string> who;
  for (const VfioHolder& h : *holders) {
    who.push_back(absl::StrCat("pid ", h.pid, " (", h.comm, ") via ", h.path));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "GPU ", name, " (", g.bdf, "): still open by ", absl::StrJoin(who, ", "),
      "; the consumer in ", Quoted(from_domain),
      " must close the device first (shut the VM down or detach its hostdev, "
      "or stop the process), then retry"));
}

absl::Status SysfsBackend::Move(const std::string& gpu,
                                const std::string& from_domain,
                                const std::string& to_domain) {
  if (!to_domain.empty() && options_.domains.count(to_domain) == 0) {
    return DomainNotConfigured(to_domain);
  }
  absl::StatusOr<Gpu*> g = Find(gpu);
  if (!g.ok()) return g.status();
  Gpu& d = **g;
  absl::MutexLock lock(d.mu);
  absl::Status pending = sysfs_.CheckNoWritePending(d.bdf);
  if (!pending.ok()) return pending;
  if (d.domain_known && d.domain != from_domain) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", gpu, " (", d.bdf, "): move from ", Quoted(from_domain), " to ",
        Quoted(to_domain), " refused: this backend last routed it to ",
        Quoted(d.domain),
        "; the route table and the backend disagree, find out which "
        "consumer really holds the GPU before moving it"));
  }
  absl::StatusOr<PciDeviceInfo> info = sysfs_.InspectNvidiaGpu(d.bdf);
  if (!info.ok()) return info.status();
  if (info->driver != kVfioPci) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", gpu, " (", d.bdf, ") is bound to '", info->driver,
        "', not vfio-pci: the host is not prepared or something rebound it; "
        "run deploy/host/prepare_host.sh --bdf ", d.bdf,
        " (or set prepare_on_start) and retry"));
  }
  absl::Status s = sysfs_.CheckGroupViable(d.bdf);
  if (!s.ok()) return s;
  // Before anything can release the device: vfio-pci resets on release.
  s = DisableResetLocked(gpu, d);
  if (!s.ok()) return s;
  // A consumer keeps the GPU open while it stays in its domain; when the GPU
  // leaves one, or is confirmed unrouted, nothing may hold it.
  if (from_domain != to_domain || to_domain.empty()) {
    s = CheckNoHoldersLocked(gpu, d, from_domain);
    if (!s.ok()) return s;
  }
  GT_LOG(3, "GPU ", gpu, " (", d.bdf, "): on vfio-pci, group viable, reset disabled, ",
         "no holder left in '", from_domain, "'; now '", to_domain, "'");
  d.domain = to_domain;
  d.domain_known = true;
  return absl::OkStatus();
}

absl::Status SysfsBackend::Reset(const std::string& gpu) {
  absl::StatusOr<Gpu*> g = Find(gpu);
  if (!g.ok()) return g.status();
  Gpu& d = **g;
  absl::MutexLock lock(d.mu);
  // A reset still blocked in the kernel: the GPU is not back yet, and a
  // second writer would only queue behind the first (one more thread each).
  absl::Status pending = sysfs_.CheckNoWritePending(d.bdf);
  if (!pending.ok()) return pending;
  absl::StatusOr<PciDeviceInfo> info = sysfs_.InspectNvidiaGpu(d.bdf);
  if (!info.ok()) return info.status();
  if (info->driver != kVfioPci) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", gpu, " (", d.bdf, "): reset refused: it is bound to '",
        info->driver, "', not vfio-pci, so the host or another party uses it; "
        "the MUX resets only a GPU it holds for VFIO (prepare_host.sh --bdf ",
        d.bdf, ")"));
  }
  absl::Status s = CheckNoHoldersLocked(gpu, d, d.domain);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("reset refused: ", s.message()));
  }
  absl::StatusOr<std::string> current = sysfs_.ReadResetMethod(d.bdf);
  if (!current.ok()) return current.status();
  if (!current->empty()) d.saved_resets = *current;
  return sysfs_.ResetKeepingResetDisabled(d.bdf, d.saved_resets);
}

absl::Status SysfsBackend::Prepare(const std::string& gpu) {
  absl::StatusOr<Gpu*> g = Find(gpu);
  if (!g.ok()) return g.status();
  absl::MutexLock lock((*g)->mu);
  absl::Status s = sysfs_.CheckNoWritePending((*g)->bdf);
  if (!s.ok()) return s;
  return PrepareLocked(**g);
}

absl::Status SysfsBackend::Release(const std::string& gpu) {
  absl::StatusOr<Gpu*> g = Find(gpu);
  if (!g.ok()) return g.status();
  Gpu& d = **g;
  absl::MutexLock lock(d.mu);
  absl::Status s = sysfs_.CheckNoWritePending(d.bdf);
  if (!s.ok()) return s;
  s = CheckNoHoldersLocked(gpu, d, d.domain);
  if (!s.ok()) return s;
  s = sysfs_.WriteResetMethod(
      d.bdf, d.saved_resets.empty() ? "default" : d.saved_resets);
  // A saved method the kernel no longer accepts (it probes each one when
  // written): the host gets what works now.
  if (absl::IsInvalidArgument(s)) s = sysfs_.WriteResetMethod(d.bdf, "default");
  if (!s.ok()) return s;
  s = sysfs_.ReturnToHost(d.bdf);
  if (!s.ok()) return s;
  d.domain.clear();
  d.domain_known = false;
  return absl::OkStatus();
}

std::string SysfsBackend::RecordedDomain(const std::string& gpu) {
  auto it = gpus_.find(gpu);
  if (it == gpus_.end()) return "";
  absl::MutexLock lock(it->second.mu);
  return it->second.domain;
}

}  // namespace gputravel
