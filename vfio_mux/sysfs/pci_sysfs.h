#ifndef GPUTRAVEL_VFIO_MUX_SYSFS_PCI_SYSFS_H_
#define GPUTRAVEL_VFIO_MUX_SYSFS_PCI_SYSFS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "vfio_mux/sysfs/sysfs_fs.h"

namespace gputravel {

struct PciSysfsOptions {
  // Where sysfs is mounted; tests point it at a fake tree.
  std::string sysfs_root = "/sys";
  // Where procfs is mounted, for finding processes that hold a VFIO device.
  std::string proc_root = "/proc";
  // How long a driver may take to let go of (unbind) or claim (probe) a
  // device, and how long one sysfs write may block. vfio-pci's unbind blocks
  // until userspace closes the device, which may be never.
  absl::Duration driver_timeout = absl::Seconds(10);
  absl::Duration poll_interval = absl::Milliseconds(20);
};

// What sysfs says about one PCI function.
struct PciDeviceInfo {
  std::string bdf;          // canonical
  std::string vendor;       // "0x10de"
  std::string device;       // "0x2331"
  std::string class_code;   // "0x030200"
  std::string driver;       // bound driver, "" when none
  std::string iommu_group;  // "42", "" when the IOMMU is off
};

// One sysfs write of a sequence, as PciSysfs makes it.
struct PciSysfsWrite {
  enum class Kind {
    kSetDriverOverride,  // read back
    kUnbind,             // then wait for the driver link to go
    kProbe,              // then wait for the driver link to name `driver`
  };
  Kind kind;
  std::string path;
  std::string data;
  std::string step;    // "unbinding from nvidia", for messages
  std::string driver;  // kUnbind: the driver let go of; kProbe: the one wanted
};

// A process that has a VFIO device file of the GPU open.
struct VfioHolder {
  int pid = 0;
  std::string comm;  // process name, e.g. "qemu-system-x86"
  std::string path;  // the fd's link text, e.g. "/dev/vfio/42" (for logs)
};

// The PCI sysfs operations the routing backends need, each verified by
// reading sysfs back (a write that the kernel accepted is not proof that the
// device changed state: drivers_probe succeeds even when nothing binds).
// Thread-safe; its only state is the set of writes still pending in the
// kernel.
class PciSysfs {
 public:
  explicit PciSysfs(PciSysfsOptions options,
                    std::shared_ptr<SysfsFs> fs = RealSysfsFs());

  const PciSysfsOptions& options() const { return options_; }

  // Every NVIDIA display/3D controller (vendor 0x10de, class 0x03xxxx) under
  // ROOT/bus/pci/devices, sorted by BDF.
  absl::StatusOr<std::vector<PciDeviceInfo>> DiscoverNvidiaGpus();
  // Any PCI function. NotFound if ROOT/bus/pci/devices/BDF does not exist.
  absl::StatusOr<PciDeviceInfo> Inspect(absl::string_view bdf);
  // Inspect, plus FailedPrecondition unless it is an NVIDIA GPU.
  absl::StatusOr<PciDeviceInfo> InspectNvidiaGpu(absl::string_view bdf);

  // OK if every function in the device's IOMMU group is bound to vfio-pci or
  // to no driver (PCI bridges, class 0x0604, may keep theirs): only then can
  // VFIO hand the group to a consumer.
  absl::Status CheckGroupViable(absl::string_view bdf);
  // The same rule with the device itself counted as bound to vfio-pci: will
  // the group be viable once BindToVfio has run? Checked before the first
  // write, so a group that cannot work is refused with nothing changed.
  absl::Status CheckGroupViableOnceBound(absl::string_view bdf);

  // The writes BindToVfio makes for the device as it is now, in order:
  // driver_override, then (unless already on vfio-pci) unbind from the
  // current driver if any, and drivers_probe. Reads only.
  absl::StatusOr<std::vector<PciSysfsWrite>> PlanBindToVfio(absl::string_view bdf);

  // driver_override=vfio-pci, unbind the current driver, drivers_probe, and
  // wait for the driver link to read vfio-pci: PlanBindToVfio's writes, each
  // checked as its kind says. Needs the vfio-pci module. Idempotent.
  absl::Status BindToVfio(absl::string_view bdf);
  // Clears driver_override, unbinds, drivers_probe: the native driver (if
  // loaded) takes the device back. Idempotent.
  absl::Status ReturnToHost(absl::string_view bdf);

  // reset_method, whitespace-trimmed; "" means every reset is disabled.
  absl::StatusOr<std::string> ReadResetMethod(absl::string_view bdf);
  // Writes `methods` ("" disables, "default" restores the kernel's list, or
  // e.g. "flr bus") and reads it back. The kernel probes each method when it
  // is written: one it listed earlier may be refused now (InvalidArgument),
  // and "default" yields what works now, possibly nothing (read it back).
  absl::Status WriteResetMethod(absl::string_view bdf,
                                absl::string_view methods);
  // Disables every reset (WriteResetMethod(bdf, "")) unless reset_method is
  // already empty, and returns the list it found ("" when already disabled),
  // which restores it later.
  absl::StatusOr<std::string> DisableReset(absl::string_view bdf);
  // Writes "1" to reset. Fails (FailedPrecondition) while reset_method is
  // empty or none of its methods works for the device at reset time.
  absl::Status FunctionReset(absl::string_view bdf);
  // A reset for a GPU whose reset is kept disabled: enables `methods` (the
  // list saved before disabling, or "default"; when the kernel refuses the
  // saved list, what "default" finds works now), resets, and disables
  // reset_method again, also when the reset failed (an enabled reset_method
  // would let the next vfio-pci release wipe the next session).
  absl::Status ResetKeepingResetDisabled(absl::string_view bdf,
                                         absl::string_view methods);

  // Processes with the device's VFIO group (/dev/vfio/N) or VFIO cdev
  // (/dev/vfio/devices/vfioN) open, recognised by the open file's device
  // number (stat through /proc/PID/fd/N against the node's `dev` attribute in
  // sysfs), so a holder that opened the node under another root or whose node
  // was since removed is found too. Processes that vanish or whose fds cannot
  // be read are skipped; a process whose fds the MUX may not read (EACCES,
  // EPERM: no CAP_SYS_PTRACE) fails the scan (PERMISSION_DENIED) rather than
  // answering "no holder".
  absl::StatusOr<std::vector<VfioHolder>> FindVfioHolders(
      absl::string_view bdf);

  // UNAVAILABLE while an earlier write for the device (to its attributes, or
  // to a bus file naming it) outlived driver_timeout and is still blocked in
  // the kernel. Backends refuse a reset or move of such a GPU: the kernel is
  // still busy with it, and every retry would leave one more thread behind.
  // The refusal ends when the write returns.
  absl::Status CheckNoWritePending(absl::string_view bdf);

  // Paths, for messages and scripts.
  std::string DevicePath(absl::string_view bdf) const;

 private:
  struct PendingWrites;

  absl::StatusOr<std::string> CurrentDriver(const std::string& bdf);
  absl::Status CheckGroup(absl::string_view bdf, bool count_self_as_bound);
  absl::Status Unbind(const std::string& bdf, const std::string& driver);
  absl::Status Probe(const std::string& bdf, absl::string_view want);
  absl::Status SetDriverOverride(const PciSysfsWrite& w, const std::string& bdf);
  std::string UnbindPath(const std::string& bdf) const;
  std::string ProbePath() const;
  // One SysfsFs write for device `bdf`, given up after driver_timeout
  // (DEADLINE_EXCEEDED; the writer thread is then left to the kernel and
  // recorded as pending until it returns); every write of this class goes
  // through it. A second write to a path whose earlier write is still pending
  // is refused (UNAVAILABLE) without starting a thread.
  absl::Status TimedWrite(const std::string& bdf, const std::string& path,
                          absl::string_view data);
  absl::Status BoundedWrite(const std::string& path, absl::string_view data,
                            const std::string& bdf, absl::string_view step);
  absl::Status WaitForDriver(const std::string& bdf, absl::string_view want,
                             absl::string_view step, std::string* last);

  PciSysfsOptions options_;
  std::shared_ptr<SysfsFs> fs_;
  // Shared with the writer threads, which may outlive this object.
  std::shared_ptr<PendingWrites> pending_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_SYSFS_PCI_SYSFS_H_
