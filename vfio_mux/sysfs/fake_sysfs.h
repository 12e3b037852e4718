#ifndef GPUTRAVEL_VFIO_MUX_SYSFS_FAKE_SYSFS_H_
#define GPUTRAVEL_VFIO_MUX_SYSFS_FAKE_SYSFS_H_

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "vfio_mux/sysfs/sysfs_fs.h"

namespace gputravel {

// One PCI function in the fake tree.
struct FakePciDevice {
  std::string bdf;  // canonical, e.g. "0000:98:00.0"
  std::string vendor = "0x10de";
  std::string device = "0x2331";         // H100 PCIe
  std::string class_code = "0x030200";   // 3D controller
  std::string driver;                    // bound at creation; "" = none
  std::string native_driver = "nvidia";  // what drivers_probe picks with no override
  std::string iommu_group = "1";
  std::string reset_method = "flr bus";  // the kernel's default list
};

// A fake kernel for tests: a temporary directory laid out like sysfs (and a
// /proc for the holder scan), plus a SysfsFs whose writes act on it the way
// the PCI core does. Reads go to the real files, so the code under test walks
// real directories and symbolic links.
//
// Layout under root():
//   devices/pci0000:00/BDF/{vendor,device,class,driver_override,reset_method,
//                           reset,driver->,iommu_group->,vfio-dev/vfioN/dev}
//   bus/pci/devices/BDF -> ../../../devices/pci0000:00/BDF
//   bus/pci/drivers/NAME/{bind,unbind,BDF->}
//   bus/pci/drivers_probe
//   kernel/iommu_groups/N/devices/BDF -> ...
//   class/vfio/N/dev  (once a device of group N binds to vfio-pci)
// and under proc_root(): PID/comm, PID/fd/N -> target.
//
// Kernel behaviour modelled: unbind removes the driver link (ENODEV if that
// driver does not hold the device); drivers_probe binds to driver_override if
// set, else to the native driver, if that driver is loaded (its directory
// exists: removing it models rmmod) and the device is unbound; driver_override reads "(null)" when
// cleared by "\n"; reset and reset_method exist only for a device created
// with a reset method; reset_method takes "", "default" or names of methods
// that work now (EINVAL otherwise: the kernel probes each method when it is
// written, and "default" lists only those that work now, maybe none) and
// reads empty when disabled; reset takes "1", counts, and fails ENOTTY
// unless a listed method works now.
class FakeSysfs : public SysfsFs {
 public:
  // Builds an empty tree (no drivers, no devices) under a new /tmp directory.
  static absl::StatusOr<std::shared_ptr<FakeSysfs>> Create();
  ~FakeSysfs() override;  // removes the tree

  const std::string& root() const { return root_; }
  const std::string& proc_root() const { return proc_root_; }
  // ROOT/bus/pci/devices/BDF, the path the code under test uses.
  std::string DevicePath(const std::string& bdf) const;

  // A loaded driver: bus/pci/drivers/NAME with bind and unbind.
  absl::Status AddDriver(const std::string& name);
  // A device; its `driver` (if any) must have been added.
  absl::Status AddDevice(const FakePciDevice& device);
  // A process whose open files point at `fd_targets` (e.g. "/dev/vfio/1").
  absl::Status AddProcess(int pid, const std::string& comm,
                          const std::vector<std::string>& fd_targets);

  // Fault injection.
  // Every write to `path` (as the code writes it; compared after resolving
  // links) fails with `err` until ClearFaults.
  void FailWrites(const std::string& path, int err);
  // Listing /proc/PID/fd fails EACCES (a process of another user, read
  // without CAP_SYS_PTRACE).
  void DenyProcessFiles(int pid);
  // Unbind writes for `bdf` succeed but the driver stays bound.
  void NeverUnbind(const std::string& bdf);
  // Unbind writes for `bdf` block until ReleaseHangs(), then unbind (as when
  // vfio-pci waits for userspace to close the device).
  void HangUnbind(const std::string& bdf);
  // Every write to `path` (compared as for FailWrites) blocks until
  // ReleaseHangs(), then acts (as when the kernel waits for a device).
  void HangWrites(const std::string& path);
  void ReleaseHangs();
  // drivers_probe writes for `bdf` succeed but no driver binds (as when
  // vfio-pci cannot reserve a BAR a host framebuffer holds).
  void IgnoreProbe(const std::string& bdf);
  // From now on `method` fails the kernel's probe for `bdf`, as "bus" does
  // once another function shares the device's bus: still listed if it was,
  // refused (EINVAL) when written, left out by "default", and a reset whose
  // listed methods all fail is ENOTTY. Not undone by ClearFaults.
  void BreakResetMethod(const std::string& bdf, const std::string& method);
  void ClearFaults();
  // Rebinds behind the code's back (another admin, a udev rule).
  absl::Status ForceBind(const std::string& bdf, const std::string& driver);

  // Observations.
  int reset_count(const std::string& bdf);
  std::string driver(const std::string& bdf);
  std::string driver_override(const std::string& bdf);
  std::string reset_method(const std::string& bdf);
  // "PATH <- DATA" for every write attempted, in order.
  std::vector<std::string> writes();
  // Waits until `n` writes are held at once (HangWrites, HangUnbind), or
  // `timeout` passes: false then.
  bool AwaitHeldWrites(int n, absl::Duration timeout);

  // SysfsFs.
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::Status WriteFile(const std::string& path,
                         absl::string_view data) override;
  absl::StatusOr<std::string> ReadLink(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(
      const std::string& path) override;
  bool Exists(const std::string& path) override;
  // For ROOT's proc fds: the VFIO node the link text names, wherever the
  // process saw it (".../root/dev/vfio/42", "/dev/vfio/42 (deleted)"), as
  // the kernel knows the open file; for other paths the real stat.
  absl::StatusOr<uint64_t> CharDeviceNumber(const std::string& path) override;

 private:
  struct Device {
    std::string dir;  // canonical devices/pci0000:00/BDF
    std::string driver;
    std::string native_driver;
    std::string override_driver;
    std::string supported_resets;
    std::string reset_method;
    std::set<std::string> broken_resets;  // fail the kernel's probe now
    bool has_reset_files = true;
    int reset_count = 0;
    int index = 0;
    std::string iommu_group;
    bool never_unbind = false;
    bool hang_unbind = false;
    bool ignore_probe = false;
  };

  explicit FakeSysfs(std::string top);
  absl::Status WriteLocked(const std::string& path, const std::string& canon,
                           absl::string_view data)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BindLocked(const std::string& bdf, Device& d,
                          const std::string& driver)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status UnbindLocked(const std::string& bdf, Device& d)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SyncFilesLocked(const Device& d)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A held write: waits for ReleaseHangs, counted meanwhile.
  void HoldUntilReleased() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string top_;  // the mkdtemp directory
  const std::string root_;
  const std::string proc_root_;
  std::shared_ptr<SysfsFs> real_;

  absl::Mutex mu_;
  std::map<std::string, Device> devices_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> drivers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> write_faults_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> hanging_writes_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> denied_dirs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> writes_ ABSL_GUARDED_BY(mu_);
  bool hangs_released_ ABSL_GUARDED_BY(mu_) = false;
  int held_writes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_SYSFS_FAKE_SYSFS_H_
