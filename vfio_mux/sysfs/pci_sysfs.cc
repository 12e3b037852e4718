#include "vfio_mux/sysfs/pci_sysfs.h"

#include <errno.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "util/log.h"
#include "vfio_mux/sysfs/pci_address.h"

namespace gputravel {
namespace {

constexpr absl::string_view kNvidiaVendor = "0x10de";
constexpr absl::string_view kVfioPci = "vfio-pci";

std::string Trim(absl::string_view s) {
  return std::string(absl::StripAsciiWhitespace(s));
}

std::string Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path
                                                      : path.substr(slash + 1));
}

// Whitespace-normalized, so "flr  bus\n" equals "flr bus".
std::string NormalizeList(absl::string_view s) {
  std::vector<absl::string_view> parts =
      absl::StrSplit(s, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  return absl::StrJoin(parts, " ");
}

bool IsNvidiaGpu(const PciDeviceInfo& d) {
  return d.vendor == kNvidiaVendor && absl::StartsWith(d.class_code, "0x03");
}

// Prefixes a lower-level error with the device and the step, keeping its code
// (so EBUSY stays FailedPrecondition, ENOENT NotFound), and appends what to do.
absl::Status StepError(const absl::Status& cause, absl::string_view bdf,
                       absl::string_view step, absl::string_view advice) {
  return absl::Status(cause.code(),
                      absl::StrCat("GPU ", bdf, ": ", step, " failed: ",
                                   cause.message(), "; ", advice));
}

struct PendingWrite {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  // Given up on by its caller: the thread clears its PendingWrites entry.
  bool abandoned ABSL_GUARDED_BY(mu) = false;
  absl::Status status ABSL_GUARDED_BY(mu);
};

}  // namespace

// Writes given up on but still blocked in the kernel: BDF -> paths.
struct PciSysfs::PendingWrites {
  absl::Mutex mu;
  std::map<std::string, std::set<std::string>> by_bdf ABSL_GUARDED_BY(mu);
};

PciSysfs::PciSysfs(PciSysfsOptions options, std::shared_ptr<SysfsFs> fs)
    : options_(std::move(options)),
      fs_(std::move(fs)),
      pending_(std::make_shared<PendingWrites>()) {}

absl::Status PciSysfs::CheckNoWritePending(absl::string_view bdf) {
  absl::MutexLock lock(&pending_->mu);
  auto it = pending_->by_bdf.find(std::string(bdf));
  if (it == pending_->by_bdf.end() || it->second.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "GPU ", bdf, ": an earlier write to ", *it->second.begin(),
      " outlived its timeout and is still pending in the kernel; nothing more "
      "is done to the device until it returns (see `dmesg`; a device that does "
      "not come back needs a secondary bus reset or a host reboot), retry later"));
}

std::string PciSysfs::DevicePath(absl::string_view bdf) const {
  return absl::StrCat(options_.sysfs_root, "/bus/pci/devices/", bdf);
}

absl::StatusOr<std::string> PciSysfs::CurrentDriver(const std::string& bdf) {
  absl::StatusOr<std::string> link = fs_->ReadLink(DevicePath(bdf) + "/driver");
  if (absl::IsNotFound(link.status())) return std::string();
  if (!link.ok()) {
    return StepError(link.status(), bdf, "reading the bound driver",
                     "check that the MUX runs as root with sysfs mounted");
  }
  return Basename(*link);
}

absl::StatusOr<PciDeviceInfo> PciSysfs::Inspect(absl::string_view bdf_in) {
  absl::StatusOr<std::string> bdf = CanonicalBdf(bdf_in);
  if (!bdf.ok()) return bdf.status();
  const std::string dir = DevicePath(*bdf);
  if (!fs_->Exists(dir)) {
    return absl::NotFoundError(absl::StrCat(
        "PCI device ", *bdf, " not found: ", dir,
        " does not exist; check the BDF with `lspci -D -d 10de:` (a removed "
        "device comes back with `echo 1 > /sys/bus/pci/rescan`)"));
  }
  PciDeviceInfo info;
  info.bdf = *bdf;
  const std::pair<const char*, std::string*> attrs[] = {
      {"vendor", &info.vendor},
      {"device", &info.device},
      {"class", &info.class_code}};
  for (const auto& [name, out] : attrs) {
    absl::StatusOr<std::string> v = fs_->ReadFile(absl::StrCat(dir, "/", name));
    if (!v.ok()) {
      return StepError(v.status(), *bdf, absl::StrCat("reading ", name),
                       "the device may be going away; check dmesg");
    }
    *out = absl::AsciiStrToLower(Trim(*v));
  }
  absl::StatusOr<std::string> driver = CurrentDriver(*bdf);
  if (!driver.ok()) return driver.status();
  info.driver = *driver;
  absl::StatusOr<std::string> group = fs_->ReadLink(dir + "/iommu_group");
  if (group.ok()) {
    info.iommu_group = Basename(*group);
  } else if (!absl::IsNotFound(group.status())) {
    return StepError(group.status(), *bdf, "reading the IOMMU group",
                     "check that the MUX runs as root");
  }
  return info;
}

absl::StatusOr<PciDeviceInfo> PciSysfs::InspectNvidiaGpu(
    absl::string_view bdf) {
  absl::StatusOr<PciDeviceInfo> info = Inspect(bdf);
  if (!info.ok()) return info.status();
  if (!IsNvidiaGpu(*info)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PCI device ", info->bdf, " at ", DevicePath(info->bdf),
        " is not an NVIDIA GPU (vendor ", info->vendor, ", class ",
        info->class_code, "; expected vendor 0x10de and class 0x03xxxx): fix "
        "the BDF (in the MUX config, or given to `vfio_mux prepare`; `lspci -D "
        "-d 10de:` lists NVIDIA devices)"));
  }
  return info;
}

absl::StatusOr<std::vector<PciDeviceInfo>> PciSysfs::DiscoverNvidiaGpus() {
  const std::string dir = options_.sysfs_root + "/bus/pci/devices";
  absl::StatusOr<std::vector<std::string>> names = fs_->ListDir(dir);
  if (!names.ok()) {
    return absl::Status(
        names.status().code(),
        absl::StrCat("discovering GPUs: ", names.status().message(),
                     "; is sysfs mounted and sysfs_root (",
                     options_.sysfs_root, ") right?"));
  }
  std::vector<PciDeviceInfo> gpus;
  for (const std::string& name : *names) {
    if (!ParsePciAddress(name).ok()) continue;
    // A cheap vendor read first: a host has hundreds of PCI functions.
    absl::StatusOr<std::string> vendor =
        fs_->ReadFile(absl::StrCat(dir, "/", name, "/vendor"));
    if (!vendor.ok() || absl::AsciiStrToLower(Trim(*vendor)) != kNvidiaVendor) {
      continue;
    }
    absl::StatusOr<PciDeviceInfo> info = Inspect(name);
    if (!info.ok()) return info.status();
    if (IsNvidiaGpu(*info)) gpus.push_back(*std::move(info));
  }
  return gpus;
}

absl::Status PciSysfs::CheckGroupViable(absl::string_view bdf) {
  return CheckGroup(bdf, /*count_self_as_bound=*/false);
}

absl::Status PciSysfs::CheckGroupViableOnceBound(absl::string_view bdf) {
  return CheckGroup(bdf, /*count_self_as_bound=*/true);
}

absl::Status PciSysfs::CheckGroup(absl::string_view bdf,
                                  bool count_self_as_bound) {
  absl::StatusOr<PciDeviceInfo> info = Inspect(bdf);
  if (!info.ok()) return info.status();
  const std::string dir = DevicePath(info->bdf);
  if (info->iommu_group.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", info->bdf, " has no IOMMU group (", dir,
        "/iommu_group is missing): the IOMMU is off; boot the host with "
        "intel_iommu=on iommu=pt and enable VT-d in the firmware"));
  }
  const std::string members_dir = dir + "/iommu_group/devices";
  absl::StatusOr<std::vector<std::string>> members = fs_->ListDir(members_dir);
  if (!members.ok()) {
    return StepError(members.status(), info->bdf,
                     absl::StrCat("listing IOMMU group ", info->iommu_group),
                     "check that the MUX runs as root");
  }
  std::vector<std::string> offenders;
  for (const std::string& member : *members) {
    absl::StatusOr<PciDeviceInfo> m = Inspect(member);
    if (!m.ok()) return m.status();
    if (count_self_as_bound && m->bdf == info->bdf) continue;
    if (m->driver.empty() || m->driver == kVfioPci) continue;
    // Bridges and root ports stay with pcieport; VFIO tolerates them.
    if (absl::StartsWith(m->class_code, "0x0604")) continue;
    offenders.push_back(absl::StrCat(m->bdf, " (class ", m->class_code,
                                     ") is bound to ", m->driver));
  }
  if (!offenders.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "IOMMU group ", info->iommu_group, " of GPU ", info->bdf,
        " is not viable: ", absl::StrJoin(offenders, "; "),
        ". Every device in ", members_dir,
        " must be bound to vfio-pci or to no driver: bind each to vfio-pci "
        "(deploy/host/prepare_host.sh --bdf BDF) or unbind it"));
  }
  return absl::OkStatus();
}

absl::Status PciSysfs::TimedWrite(const std::string& bdf,
                                  const std::string& path,
                                  absl::string_view data) {
  {
    absl::MutexLock lock(&pending_->mu);
    auto it = pending_->by_bdf.find(bdf);
    if (it != pending_->by_bdf.end() && it->second.count(path) != 0) {
      return absl::UnavailableError(absl::StrCat(
          "writing '", absl::CHexEscape(data), "' to ", path,
          " refused: an earlier write to it is still pending in the kernel"));
    }
  }
  // The write runs on its own thread because the kernel may block it
  // indefinitely (vfio-pci unbind waits for userspace, a reset waits for the
  // device). On timeout the thread is left to the kernel, holding its own
  // references, and recorded in pending_ until the write returns; otherwise
  // it is joined, so no thread outlives a write that finished.
  auto w = std::make_shared<PendingWrite>();
  std::thread writer([w, fs = fs_, registry = pending_, bdf, path,
                      data = std::string(data)]() {
    absl::Status s = fs->WriteFile(path, data);
    bool abandoned;
    {
      absl::MutexLock lock(&w->mu);
      w->status = s;
      w->done = true;
      abandoned = w->abandoned;
    }
    if (!abandoned) return;
    absl::MutexLock lock(&registry->mu);
    auto it = registry->by_bdf.find(bdf);
    if (it == registry->by_bdf.end()) return;
    it->second.erase(path);
    if (it->second.empty()) registry->by_bdf.erase(it);
  });
  {
    absl::MutexLock lock(&w->mu);
    if (!w->mu.AwaitWithTimeout(absl::Condition(&w->done), options_.driver_timeout)) {
      w->abandoned = true;
      {
        absl::MutexLock registry_lock(&pending_->mu);
        pending_->by_bdf[bdf].insert(path);
      }
      writer.detach();
      return absl::DeadlineExceededError(absl::StrCat(
          "writing '", absl::CHexEscape(data), "' to ", path,
          " did not return within ", absl::FormatDuration(options_.driver_timeout),
          "; the write stays pending in the kernel and may still complete"));
    }
  }
  writer.join();
  absl::MutexLock lock(&w->mu);
  return w->status;
}

absl::Status PciSysfs::BoundedWrite(const std::string& path,
                                    absl::string_view data,
                                    const std::string& bdf,
                                    absl::string_view step) {
  absl::Status s = TimedWrite(bdf, path, data);
  if (absl::IsDeadlineExceeded(s) && SysfsErrno(s) == 0) {
    return absl::DeadlineExceededError(absl::StrCat(
        "GPU ", bdf, ": ", step, ": ", s.message(),
        "; the kernel is waiting for the device's users to let go (find them "
        "with `fuser -v /dev/vfio/*` or `lsof /dev/nvidia*` and stop them)"));
  }
  if (!s.ok()) {
    return StepError(s, bdf, step, "see `dmesg` for the kernel's reason");
  }
  return absl::OkStatus();
}

absl::Status PciSysfs::WaitForDriver(const std::string& bdf,
                                     absl::string_view want,
                                     absl::string_view step,
                                     std::string* last) {
  const absl::Time deadline = absl::Now() + options_.driver_timeout;
  for (;;) {
    absl::StatusOr<std::string> driver = CurrentDriver(bdf);
    if (!driver.ok()) return driver.status();
    *last = *driver;
    if (*driver == want) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "GPU ", bdf, ": ", step, ": driver link ", DevicePath(bdf),
          "/driver still reads '", *driver, "' after ",
          absl::FormatDuration(options_.driver_timeout)));
    }
    absl::SleepFor(options_.poll_interval);
  }
}

absl::Status PciSysfs::Unbind(const std::string& bdf,
                              const std::string& driver) {
  const std::string step = absl::StrCat("unbinding from ", driver);
  GT_LOG(3, "GPU ", bdf, ": ", step);
  absl::Status s = BoundedWrite(UnbindPath(bdf), bdf, bdf, step);
  if (!s.ok()) return s;
  std::string last;
  s = WaitForDriver(bdf, "", step, &last);
  if (absl::IsDeadlineExceeded(s)) {
    return absl::FailedPreconditionError(absl::StrCat(
        s.message(), ": driver ", last,
        " accepted the unbind but will not let go of the device; stop what "
        "uses it (nvidia-persistenced, a display server, `fuser -v "
        "/dev/nvidia*`; for vfio-pci the VM or process holding /dev/vfio/*) "
        "and retry"));
  }
  return s;
}

absl::Status PciSysfs::Probe(const std::string& bdf, absl::string_view want) {
  const std::string step = absl::StrCat("probing for ", want);
  GT_LOG(3, "GPU ", bdf, ": ", step);
  absl::Status s = BoundedWrite(ProbePath(), bdf, bdf, step);
  if (!s.ok()) return s;
  std::string last;
  s = WaitForDriver(bdf, want, step, &last);
  if (!absl::IsDeadlineExceeded(s)) return s;
  if (last.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        s.message(), ": ", want,
        " did not claim the device; see `dmesg` (a host framebuffer holding "
        "the BAR, a device stuck in D3cold)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      s.message(), ": ", last, " claimed the device instead of ", want,
      "; driver_override was not honoured, check ", DevicePath(bdf),
      "/driver_override and udev rules"));
}

std::string PciSysfs::UnbindPath(const std::string& bdf) const {
  return DevicePath(bdf) + "/driver/unbind";
}

std::string PciSysfs::ProbePath() const {
  return options_.sysfs_root + "/bus/pci/drivers_probe";
}

absl::StatusOr<std::vector<PciSysfsWrite>> PciSysfs::PlanBindToVfio(
    absl::string_view bdf_in) {
  absl::StatusOr<PciDeviceInfo> info = InspectNvidiaGpu(bdf_in);
  if (!info.ok()) return info.status();
  const std::string& bdf = info->bdf;
  std::vector<PciSysfsWrite> plan;
  // The override goes first so that, between unbind and probe, no other
  // driver (nvidia via udev) can claim the device.
  plan.push_back({PciSysfsWrite::Kind::kSetDriverOverride,
                  DevicePath(bdf) + "/driver_override", std::string(kVfioPci),
                  "setting driver_override to vfio-pci", std::string(kVfioPci)});
  if (info->driver == kVfioPci) return plan;
  if (!info->driver.empty()) {
    plan.push_back({PciSysfsWrite::Kind::kUnbind, UnbindPath(bdf), bdf,
                    absl::StrCat("unbinding from ", info->driver), info->driver});
  }
  plan.push_back({PciSysfsWrite::Kind::kProbe, ProbePath(), bdf,
                  absl::StrCat("probing for ", kVfioPci), std::string(kVfioPci)});
  return plan;
}

absl::Status PciSysfs::SetDriverOverride(const PciSysfsWrite& w,
                                         const std::string& bdf) {
  absl::Status s = TimedWrite(bdf, w.path, w.data);
  if (!s.ok()) {
    return StepError(s, bdf, w.step, "see `dmesg`; the MUX must run as root");
  }
  absl::StatusOr<std::string> readback = fs_->ReadFile(w.path);
  if (!readback.ok()) {
    return StepError(readback.status(), bdf, "reading driver_override back",
                     "see `dmesg`");
  }
  if (Trim(*readback) != w.data) {
    return absl::InternalError(absl::StrCat(
        "GPU ", bdf, ": wrote '", w.data, "' to ", w.path, " but it reads '",
        Trim(*readback), "'; another agent (udev, libvirt managed='yes') is "
        "changing it, stop it and retry"));
  }
  return absl::OkStatus();
}

absl::Status PciSysfs::BindToVfio(absl::string_view bdf_in) {
  absl::StatusOr<std::vector<PciSysfsWrite>> plan = PlanBindToVfio(bdf_in);
  if (!plan.ok()) return plan.status();
  const std::string bdf = *CanonicalBdf(bdf_in);
  const std::string vfio_dir =
      absl::StrCat(options_.sysfs_root, "/bus/pci/drivers/", kVfioPci);
  if (!fs_->Exists(vfio_dir)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", bdf, ": cannot bind to vfio-pci: ", vfio_dir,
        " does not exist, the vfio-pci module is not loaded; run `modprobe "
        "vfio-pci` (`vfio_mux prepare` does)"));
  }
  for (const PciSysfsWrite& w : *plan) {
    absl::Status s;
    switch (w.kind) {
      case PciSysfsWrite::Kind::kSetDriverOverride:
        s = SetDriverOverride(w, bdf);
        break;
      case PciSysfsWrite::Kind::kUnbind:
        s = Unbind(bdf, w.driver);
        break;
      case PciSysfsWrite::Kind::kProbe:
        s = Probe(bdf, w.driver);
        break;
    }
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status PciSysfs::ReturnToHost(absl::string_view bdf_in) {
  absl::StatusOr<PciDeviceInfo> info = InspectNvidiaGpu(bdf_in);
  if (!info.ok()) return info.status();
  const std::string& bdf = info->bdf;
  const std::string override_path = DevicePath(bdf) + "/driver_override";
  // "\n" clears the override; an empty write would not reach the kernel.
  absl::Status s = TimedWrite(bdf, override_path, "\n");
  if (!s.ok()) {
    return StepError(s, bdf, "clearing driver_override",
                     "see `dmesg`; the MUX must run as root");
  }
  absl::StatusOr<std::string> readback = fs_->ReadFile(override_path);
  if (!readback.ok()) {
    return StepError(readback.status(), bdf, "reading driver_override back",
                     "see `dmesg`");
  }
  std::string value = Trim(*readback);
  if (!value.empty() && value != "(null)") {
    return absl::InternalError(absl::StrCat(
        "GPU ", bdf, ": cleared ", override_path, " but it reads '", value,
        "'; another agent is changing it, stop it and retry"));
  }
  if (!info->driver.empty()) {
    s = Unbind(bdf, info->driver);
    if (!s.ok()) return s;
  }
  s = BoundedWrite(ProbePath(), bdf, bdf, "probing for the native driver");
  if (!s.ok()) return s;
  absl::StatusOr<std::string> driver = CurrentDriver(bdf);
  if (!driver.ok()) return driver.status();
  if (*driver == kVfioPci) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", bdf, ": after clearing driver_override vfio-pci claimed the "
        "device again; remove its ID from the vfio-pci.ids= kernel/module "
        "option and retry"));
  }
  // No driver is fine: the native driver may simply not be loaded.
  return absl::OkStatus();
}

absl::StatusOr<std::string> PciSysfs::ReadResetMethod(
    absl::string_view bdf_in) {
  absl::StatusOr<PciDeviceInfo> info = Inspect(bdf_in);
  if (!info.ok()) return info.status();
  const std::string path = DevicePath(info->bdf) + "/reset_method";
  if (!fs_->Exists(path)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", info->bdf, ": ", path,
        " does not exist; reset control needs Linux 5.15 or later (and a "
        "device with at least one reset method). Without it vfio-pci resets "
        "the GPU on every release and the CC session cannot survive a move"));
  }
  absl::StatusOr<std::string> v = fs_->ReadFile(path);
  if (!v.ok()) {
    return StepError(v.status(), info->bdf, "reading reset_method",
                     "the MUX must run as root");
  }
  return NormalizeList(*v);
}

absl::Status PciSysfs::WriteResetMethod(absl::string_view bdf_in,
                                        absl::string_view methods) {
  absl::StatusOr<std::string> before = ReadResetMethod(bdf_in);
  if (!before.ok()) return before.status();
  const std::string bdf = *CanonicalBdf(bdf_in);
  const std::string want = NormalizeList(methods);
  const std::string path = DevicePath(bdf) + "/reset_method";
  // The kernel treats "\n" as the empty list.
  absl::Status s = TimedWrite(bdf, path, want.empty() ? "\n" : want);
  if (!s.ok()) {
    return StepError(
        s, bdf, absl::StrCat("writing '", want, "' to reset_method"),
        "EINVAL means a method that does not work for the device now: the "
        "kernel probes each method when it is written, so one listed earlier "
        "may be refused (a bus reset needs the device alone on its bus); "
        "`dmesg` names it; write 'default' for what works now");
  }
  absl::StatusOr<std::string> after = ReadResetMethod(bdf);
  if (!after.ok()) return after.status();
  // "default" probes every method again: the kernel's answer is whatever
  // works now, which may be none.
  const bool ok = want == "default" || *after == want;
  if (!ok) {
    return absl::InternalError(absl::StrCat(
        "GPU ", bdf, ": wrote '", want, "' to ", path, " but it reads '",
        *after,
        "'; the kernel skips methods the device does not support (see "
        "`dmesg`), or another agent changed it; write a method listed before "
        "reset was disabled, or 'default'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PciSysfs::DisableReset(absl::string_view bdf) {
  absl::StatusOr<std::string> current = ReadResetMethod(bdf);
  if (!current.ok()) return current.status();
  if (current->empty()) return std::string();
  absl::Status s = WriteResetMethod(bdf, "");
  if (!s.ok()) return s;
  return *current;
}

absl::Status PciSysfs::FunctionReset(absl::string_view bdf_in) {
  absl::StatusOr<PciDeviceInfo> info = InspectNvidiaGpu(bdf_in);
  if (!info.ok()) return info.status();
  const std::string path = DevicePath(info->bdf) + "/reset";
  absl::Status s = TimedWrite(info->bdf, path, "1");
  if (SysfsErrno(s) == ENOTTY) {
    // The kernel answers ENOTTY both when reset_method is empty and when
    // every listed method fails its probe at reset time.
    absl::StatusOr<std::string> listed = ReadResetMethod(info->bdf);
    if (listed.ok() && !listed->empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GPU ", info->bdf, ": function reset via ", path,
          " refused: none of the enabled reset methods (", *listed,
          ") works for the device now (a bus reset needs the device alone on "
          "its bus; `dmesg` may say more); write 'default' to reset_method to "
          "see what works"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", info->bdf, ": function reset via ", path,
        " refused: no reset method is enabled (reset_method is empty); "
        "restore reset_method (write 'default') before resetting"));
  }
  if (!s.ok()) {
    return StepError(s, info->bdf, "function reset",
                     "see `dmesg`; a GPU that does not come back from reset "
                     "needs a secondary bus reset or a host reboot");
  }
  return absl::OkStatus();
}

absl::Status PciSysfs::ResetKeepingResetDisabled(absl::string_view bdf,
                                                 absl::string_view methods) {
  absl::Status s =
      WriteResetMethod(bdf, methods.empty() ? "default" : methods);
  if (absl::IsInvalidArgument(s) && !methods.empty()) {
    // The saved list no longer probes (the kernel re-checks each method when
    // it is written): reset with what works now, if anything does.
    absl::Status fallback = WriteResetMethod(bdf, "default");
    absl::StatusOr<std::string> now =
        fallback.ok() ? ReadResetMethod(bdf) : absl::StatusOr<std::string>(fallback);
    if (now.ok() && !now->empty()) {
      s = absl::OkStatus();
    } else if (now.ok()) {
      s = absl::FailedPreconditionError(absl::StrCat(
          s.message(), "; and 'default' found no reset method that works now, "
          "so the GPU cannot be reset until that changes"));
    }
  }
  if (s.ok()) s = FunctionReset(bdf);
  absl::Status again = WriteResetMethod(bdf, "");
  if (!s.ok()) return s;
  return again;
}

absl::StatusOr<std::vector<VfioHolder>> PciSysfs::FindVfioHolders(
    absl::string_view bdf_in) {
  absl::StatusOr<PciDeviceInfo> info = Inspect(bdf_in);
  if (!info.ok()) return info.status();
  // Each VFIO node of the device: its usual name, and its device number as
  // the kernel gives it in sysfs (ROOT/class/vfio/GROUP/dev, ROOT/bus/pci/
  // devices/BDF/vfio-dev/vfioN/dev). A holder is recognised by the number:
  // the name a process's fd link shows depends on its root (a chrooted VMM
  // shows ".../root/dev/vfio/42") and on the node still existing ("/dev/vfio/42
  // (deleted)"), and the MUX's own /dev (PrivateDevices) has no VFIO nodes.
  struct Target {
    std::string path;
    uint64_t rdev = 0;  // 0: the kernel has no such node (yet)
  };
  std::vector<Target> targets;
  auto add = [&](std::string path, const std::string& dev_attr) -> absl::Status {
    Target t{std::move(path), 0};
    absl::StatusOr<std::string> dev = fs_->ReadFile(dev_attr);
    if (dev.ok()) {
      std::pair<std::string, std::string> mm = absl::StrSplit(Trim(*dev), ':');
      unsigned int major = 0, minor = 0;
      if (!absl::SimpleAtoi(mm.first, &major) || !absl::SimpleAtoi(mm.second, &minor)) {
        return absl::InternalError(absl::StrCat(
            "GPU ", info->bdf, ": ", dev_attr, " reads '", absl::CHexEscape(*dev),
            "', not MAJOR:MINOR; cannot tell which processes hold the device"));
      }
      t.rdev = makedev(major, minor);
    } else if (!absl::IsNotFound(dev.status())) {
      return StepError(dev.status(), info->bdf, "reading a VFIO node's device number",
                       "check that the MUX runs as root with sysfs mounted");
    }
    targets.push_back(std::move(t));
    return absl::OkStatus();
  };
  if (!info->iommu_group.empty()) {
    absl::Status s = add("/dev/vfio/" + info->iommu_group,
                         absl::StrCat(options_.sysfs_root, "/class/vfio/",
                                      info->iommu_group, "/dev"));
    if (!s.ok()) return s;
  }
  const std::string cdev_dir = DevicePath(info->bdf) + "/vfio-dev";
  absl::StatusOr<std::vector<std::string>> cdevs = fs_->ListDir(cdev_dir);
  if (cdevs.ok()) {
    for (const std::string& c : *cdevs) {
      absl::Status s = add("/dev/vfio/devices/" + c, absl::StrCat(cdev_dir, "/", c, "/dev"));
      if (!s.ok()) return s;
    }
  }
  absl::StatusOr<std::vector<std::string>> pids =
      fs_->ListDir(options_.proc_root);
  if (!pids.ok()) {
    return StepError(pids.status(), info->bdf,
                     "listing processes to find VFIO users",
                     "is procfs mounted and proc_root right?");
  }
  std::vector<VfioHolder> holders;
  for (const std::string& p : *pids) {
    int pid;
    if (!absl::SimpleAtoi(p, &pid)) continue;
    const std::string pdir = options_.proc_root + "/" + p;
    // Processes exit and fds close while we scan; only hits matter. A
    // process whose files the MUX may not read is another matter: the answer
    // would be "no holder" for a GPU that has one.
    absl::StatusOr<std::vector<std::string>> fds = fs_->ListDir(pdir + "/fd");
    if (!fds.ok()) {
      const int err = SysfsErrno(fds.status());
      if (err == EACCES || err == EPERM) {
        return absl::PermissionDeniedError(absl::StrCat(
            "GPU ", info->bdf, ": cannot tell which processes hold it: ",
            fds.status().message(),
            "; the holder scan needs CAP_SYS_PTRACE (the sysfs backend's "
            "systemd drop-in grants it)"));
      }
      continue;
    }
    for (const std::string& fd : *fds) {
      const std::string fd_path = pdir + "/fd/" + fd;
      absl::StatusOr<uint64_t> rdev = fs_->CharDeviceNumber(fd_path);
      absl::StatusOr<std::string> text = fs_->ReadLink(fd_path);
      const bool hit = std::any_of(targets.begin(), targets.end(), [&](const Target& t) {
        return (rdev.ok() && *rdev != 0 && *rdev == t.rdev) ||
               (text.ok() && *text == t.path);
      });
      if (!hit) continue;
      VfioHolder h;
      h.pid = pid;
      h.path = text.ok() ? *text : fd_path;
      absl::StatusOr<std::string> comm = fs_->ReadFile(pdir + "/comm");
      h.comm = comm.ok() ? Trim(*comm) : "?";
      holders.push_back(std::move(h));
      break;
    }
  }
  return holders;
}

}  // namespace gputravel
