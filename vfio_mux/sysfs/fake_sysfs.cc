#include "vfio_mux/sysfs/fake_sysfs.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

namespace fs = std::filesystem;

// Same wording as the real SysfsFs, so tests see what production would print.
absl::Status WriteError(int err, const std::string& path,
                        absl::string_view data) {
  return SysfsErrnoError(
      err, absl::StrCat("writing '", absl::CHexEscape(data), "' to"), path);
}

// Resolves links in the directory part only: the attribute itself is a plain
// file, and "driver/unbind" must resolve to the driver's own unbind file.
std::string Canonical(const std::string& path) {
  fs::path p(path);
  char buf[PATH_MAX];
  if (realpath(p.parent_path().c_str(), buf) == nullptr) return "";
  return (fs::path(buf) / p.filename()).string();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("fake: cannot write ", path));
  return absl::OkStatus();
}

absl::Status Symlink(const std::string& target, const std::string& link) {
  std::error_code ec;
  fs::create_symlink(target, link, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("fake: symlink ", link, " -> ", target, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("fake: mkdir ", dir, ": ", ec.message()));
  }
  return absl::OkStatus();
}

// Device numbers of the fake VFIO nodes: /dev/vfio/N is (group major, N),
// /dev/vfio/devices/vfioN is (cdev major, N).
constexpr unsigned int kVfioGroupMajor = 240;
constexpr unsigned int kVfioCdevMajor = 239;

std::string Trim(absl::string_view s) {
  return std::string(absl::StripAsciiWhitespace(s));
}

}  // namespace

absl::StatusOr<std::shared_ptr<FakeSysfs>> FakeSysfs::Create() {
  const std::string made = MakeTestDir("gputravel_fake_sysfs.");
  char real[PATH_MAX];
  if (realpath(made.c_str(), real) == nullptr) {
    return absl::InternalError(absl::StrCat("fake: realpath ", made));
  }
  std::shared_ptr<FakeSysfs> f(new FakeSysfs(real));
  for (const char* dir : {"/devices/pci0000:00", "/bus/pci/devices",
                          "/bus/pci/drivers", "/kernel/iommu_groups"}) {
    absl::Status s = MakeDirs(f->root_ + dir);
    if (!s.ok()) return s;
  }
  absl::Status s = MakeDirs(f->proc_root_);
  if (!s.ok()) return s;
  s = WriteText(f->root_ + "/bus/pci/drivers_probe", "");
  if (!s.ok()) return s;
  return f;
}

FakeSysfs::FakeSysfs(std::string top)
    : top_(std::move(top)),
      root_(top_ + "/sys"),
      proc_root_(top_ + "/proc"),
      real_(RealSysfsFs()) {}

FakeSysfs::~FakeSysfs() {
  std::error_code ec;
  fs::remove_all(top_, ec);
}

std::string FakeSysfs::DevicePath(const std::string& bdf) const {
  return root_ + "/bus/pci/devices/" + bdf;
}

absl::Status FakeSysfs::AddDriver(const std::string& name) {
  absl::MutexLock lock(&mu_);
  std::string dir = root_ + "/bus/pci/drivers/" + name;
  absl::Status s = MakeDirs(dir);
  if (!s.ok()) return s;
  for (const char* f : {"/bind", "/unbind", "/new_id"}) {
    s = WriteText(dir + f, "");
    if (!s.ok()) return s;
  }
  drivers_.insert(name);
  return absl::OkStatus();
}

absl::Status FakeSysfs::AddDevice(const FakePciDevice& dev) {
  absl::MutexLock lock(&mu_);
  if (devices_.count(dev.bdf)) {
    return absl::AlreadyExistsError(absl::StrCat("fake: device ", dev.bdf));
  }
  Device d;
  d.dir = root_ + "/devices/pci0000:00/" + dev.bdf;
  d.native_driver = dev.native_driver;
  d.supported_resets = dev.reset_method;
  d.reset_method = dev.reset_method;
  d.index = static_cast<int>(devices_.size());
  d.iommu_group = dev.iommu_group;
  absl::Status s = MakeDirs(d.dir);
  if (!s.ok()) return s;
  // The kernel shows reset and reset_method only for a device that had a
  // reset method when it was found.
  d.has_reset_files = !dev.reset_method.empty();
  std::vector<std::pair<const char*, std::string>> files = {
      {"vendor", dev.vendor + "\n"}, {"device", dev.device + "\n"},
      {"class", dev.class_code + "\n"}};
  if (d.has_reset_files) files.push_back({"reset", ""});
  for (const auto& [name, text] : files) {
    s = WriteText(d.dir + "/" + name, text);
    if (!s.ok()) return s;
  }
  std::string group_dir = root_ + "/kernel/iommu_groups/" + dev.iommu_group;
  s = MakeDirs(group_dir + "/devices");
  if (!s.ok()) return s;
  s = Symlink("../../../kernel/iommu_groups/" + dev.iommu_group,
              d.dir + "/iommu_group");
  if (!s.ok()) return s;
  s = Symlink("../../../../devices/pci0000:00/" + dev.bdf,
              group_dir + "/devices/" + dev.bdf);
  if (!s.ok()) return s;
  s = Symlink("../../../devices/pci0000:00/" + dev.bdf,
              root_ + "/bus/pci/devices/" + dev.bdf);
  if (!s.ok()) return s;
  Device& stored = devices_[dev.bdf] = d;
  s = SyncFilesLocked(stored);
  if (!s.ok()) return s;
  if (!dev.driver.empty()) return BindLocked(dev.bdf, stored, dev.driver);
  return absl::OkStatus();
}

absl::Status FakeSysfs::AddProcess(int pid, const std::string& comm,
                                   const std::vector<std::string>& fd_targets) {
  std::string dir = absl::StrCat(proc_root_, "/", pid);
  absl::Status s = MakeDirs(dir + "/fd");
  if (!s.ok()) return s;
  s = WriteText(dir + "/comm", comm + "\n");
  if (!s.ok()) return s;
  // fds 0-2 point elsewhere, as in a real process.
  for (int fd = 0; fd < 3; ++fd) {
    s = Symlink("/dev/null", absl::StrCat(dir, "/fd/", fd));
    if (!s.ok()) return s;
  }
  int fd = 3;
  for (const std::string& target : fd_targets) {
    s = Symlink(target, absl::StrCat(dir, "/fd/", fd++));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void FakeSysfs::BreakResetMethod(const std::string& bdf, const std::string& method) {
  absl::MutexLock lock(&mu_);
  devices_[bdf].broken_resets.insert(method);
}

void FakeSysfs::FailWrites(const std::string& path, int err) {
  absl::MutexLock lock(&mu_);
  write_faults_[path] = err;
  std::string canon = Canonical(path);
  if (!canon.empty()) write_faults_[canon] = err;
}

void FakeSysfs::NeverUnbind(const std::string& bdf) {
  absl::MutexLock lock(&mu_);
  devices_[bdf].never_unbind = true;
}

void FakeSysfs::HangUnbind(const std::string& bdf) {
  absl::MutexLock lock(&mu_);
  devices_[bdf].hang_unbind = true;
  hangs_released_ = false;
}

void FakeSysfs::DenyProcessFiles(int pid) {
  absl::MutexLock lock(&mu_);
  denied_dirs_.insert(absl::StrCat(proc_root_, "/", pid, "/fd"));
}

void FakeSysfs::HangWrites(const std::string& path) {
  absl::MutexLock lock(&mu_);
  hanging_writes_.insert(path);
  std::string canon = Canonical(path);
  if (!canon.empty()) hanging_writes_.insert(canon);
  hangs_released_ = false;
}

void FakeSysfs::ReleaseHangs() {
  absl::MutexLock lock(&mu_);
  hangs_released_ = true;
}

void FakeSysfs::IgnoreProbe(const std::string& bdf) {
  absl::MutexLock lock(&mu_);
  devices_[bdf].ignore_probe = true;
}

void FakeSysfs::ClearFaults() {
  absl::MutexLock lock(&mu_);
  write_faults_.clear();
  hanging_writes_.clear();
  for (auto& [bdf, d] : devices_) {
    d.never_unbind = false;
    d.hang_unbind = false;
    d.ignore_probe = false;
  }
}

absl::Status FakeSysfs::ForceBind(const std::string& bdf,
                                  const std::string& driver) {
  absl::MutexLock lock(&mu_);
  auto it = devices_.find(bdf);
  if (it == devices_.end()) return absl::NotFoundError(bdf);
  if (!it->second.driver.empty()) {
    absl::Status s = UnbindLocked(bdf, it->second);
    if (!s.ok()) return s;
  }
  if (driver.empty()) return absl::OkStatus();
  return BindLocked(bdf, it->second, driver);
}

int FakeSysfs::reset_count(const std::string& bdf) {
  absl::MutexLock lock(&mu_);
  return devices_[bdf].reset_count;
}

std::string FakeSysfs::driver(const std::string& bdf) {
  absl::MutexLock lock(&mu_);
  return devices_[bdf].driver;
}

std::string FakeSysfs::driver_override(const std::string& bdf) {
  absl::MutexLock lock(&mu_);
  return devices_[bdf].override_driver;
}

std::string FakeSysfs::reset_method(const std::string& bdf) {
  absl::MutexLock lock(&mu_);
  return devices_[bdf].reset_method;
}

std::vector<std::string> FakeSysfs::writes() {
  absl::MutexLock lock(&mu_);
  return writes_;
}

bool FakeSysfs::AwaitHeldWrites(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto held = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_writes_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&held), timeout);
}

void FakeSysfs::HoldUntilReleased() {
  ++held_writes_;
  mu_.Await(absl::Condition(&hangs_released_));
  --held_writes_;
}

absl::StatusOr<std::string> FakeSysfs::ReadFile(const std::string& path) {
  return real_->ReadFile(path);
}

absl::StatusOr<std::string> FakeSysfs::ReadLink(const std::string& path) {
  return real_->ReadLink(path);
}

absl::StatusOr<std::vector<std::string>> FakeSysfs::ListDir(
    const std::string& path) {
  {
    absl::MutexLock lock(&mu_);
    if (denied_dirs_.count(path) != 0) {
      return SysfsErrnoError(EACCES, "cannot list", path);
    }
  }
  return real_->ListDir(path);
}

bool FakeSysfs::Exists(const std::string& path) { return real_->Exists(path); }

absl::StatusOr<uint64_t> FakeSysfs::CharDeviceNumber(const std::string& path) {
  if (!absl::StartsWith(path, proc_root_ + "/")) return real_->CharDeviceNumber(path);
  absl::StatusOr<std::string> text = real_->ReadLink(path);
  if (!text.ok()) return text.status();
  absl::string_view t = *text;
  absl::ConsumeSuffix(&t, " (deleted)");
  const size_t at = t.rfind("/dev/vfio/");
  if (at == absl::string_view::npos) return uint64_t{0};
  absl::string_view node = t.substr(at + strlen("/dev/vfio/"));
  unsigned int n = 0;
  if (absl::ConsumePrefix(&node, "devices/vfio") && absl::SimpleAtoi(node, &n)) {
    return static_cast<uint64_t>(makedev(kVfioCdevMajor, n));
  }
  if (absl::SimpleAtoi(node, &n)) return static_cast<uint64_t>(makedev(kVfioGroupMajor, n));
  return uint64_t{0};
}

absl::Status FakeSysfs::WriteFile(const std::string& path,
                                  absl::string_view data) {
  absl::MutexLock lock(&mu_);
  writes_.push_back(absl::StrCat(path, " <- ", absl::CHexEscape(data)));
  std::string canon = Canonical(path);
  for (const std::string& key : {path, canon}) {
    auto f = write_faults_.find(key);
    if (f != write_faults_.end()) return WriteError(f->second, path, data);
  }
  if (hanging_writes_.count(path) != 0 || hanging_writes_.count(canon) != 0) {
    HoldUntilReleased();
  }
  if (canon.empty() || !fs::exists(canon)) {
    return WriteError(ENOENT, path, data);
  }
  return WriteLocked(path, canon, data);
}

absl::Status FakeSysfs::WriteLocked(const std::string& path,
                                    const std::string& canon,
                                    absl::string_view data) {
  const std::string value = Trim(data);
  const std::string drivers_dir = root_ + "/bus/pci/drivers/";

  if (canon == root_ + "/bus/pci/drivers_probe") {
    auto it = devices_.find(value);
    if (it == devices_.end()) return WriteError(ENODEV, path, data);
    Device& d = it->second;
    if (!d.driver.empty() || d.ignore_probe) return absl::OkStatus();
    const std::string& want =
        d.override_driver.empty() ? d.native_driver : d.override_driver;
    // Probing succeeds even when nothing binds; the caller must read back.
    if (want.empty() || !drivers_.count(want) ||
        !fs::exists(drivers_dir + want)) {
      return absl::OkStatus();
    }
    return BindLocked(value, d, want);
  }

  if (absl::StartsWith(canon, drivers_dir)) {
    std::vector<std::string> parts =
        absl::StrSplit(canon.substr(drivers_dir.size()), '/');
    if (parts.size() == 2 && (parts[1] == "unbind" || parts[1] == "bind")) {
      const std::string& drv = parts[0];
      auto it = devices_.find(value);
      if (it == devices_.end()) return WriteError(ENODEV, path, data);
      Device& d = it->second;
      if (parts[1] == "bind") {
        if (!d.driver.empty()) return WriteError(EBUSY, path, data);
        if (!d.override_driver.empty() && d.override_driver != drv) {
          return WriteError(ENODEV, path, data);
        }
        return BindLocked(value, d, drv);
      }
      if (d.driver != drv) return WriteError(ENODEV, path, data);
      if (d.hang_unbind) {
        HoldUntilReleased();
        if (d.driver != drv) return WriteError(ENODEV, path, data);
      }
      if (d.never_unbind) return absl::OkStatus();
      return UnbindLocked(value, d);
    }
  }

  for (auto& [bdf, d] : devices_) {
    if (fs::path(canon).parent_path() != d.dir) continue;
    const std::string attr = fs::path(canon).filename();
    if (attr == "driver_override") {
      d.override_driver = value;
      return SyncFilesLocked(d);
    }
    // Every method is probed when written and at reset time.
    std::vector<std::string> working;
    for (absl::string_view m : absl::StrSplit(d.supported_resets, ' ', absl::SkipEmpty())) {
      if (d.broken_resets.count(std::string(m)) == 0) working.emplace_back(m);
    }
    auto works = [&](const std::string& m) {
      return std::find(working.begin(), working.end(), m) != working.end();
    };
    if (attr == "reset_method" && d.has_reset_files) {
      if (value.empty()) {
        d.reset_method.clear();
      } else if (value == "default") {
        d.reset_method = absl::StrJoin(working, " ");
      } else {
        std::vector<std::string> wanted =
            absl::StrSplit(value, ' ', absl::SkipEmpty());
        for (const std::string& m : wanted) {
          if (!works(m)) return WriteError(EINVAL, path, data);
        }
        d.reset_method = absl::StrJoin(wanted, " ");
      }
      return SyncFilesLocked(d);
    }
    if (attr == "reset" && d.has_reset_files) {
      if (value != "1") return WriteError(EINVAL, path, data);
      std::vector<std::string> listed = absl::StrSplit(d.reset_method, ' ', absl::SkipEmpty());
      if (std::none_of(listed.begin(), listed.end(), works)) {
        return WriteError(ENOTTY, path, data);
      }
      ++d.reset_count;
      return absl::OkStatus();
    }
    // vendor, class, ...: read-only attributes.
    return WriteError(EACCES, path, data);
  }
  return WriteError(EACCES, path, data);
}

absl::Status FakeSysfs::BindLocked(const std::string& bdf, Device& d,
                                   const std::string& driver) {
  if (!drivers_.count(driver)) {
    return absl::FailedPreconditionError(
        absl::StrCat("fake: driver ", driver, " not added"));
  }
  absl::Status s = Symlink("../../../bus/pci/drivers/" + driver, d.dir + "/driver");
  if (!s.ok()) return s;
  s = Symlink("../../../../devices/pci0000:00/" + bdf,
              root_ + "/bus/pci/drivers/" + driver + "/" + bdf);
  if (!s.ok()) return s;
  if (driver == "vfio-pci") {
    const std::string cdev = absl::StrCat(d.dir, "/vfio-dev/vfio", d.index);
    s = MakeDirs(cdev);
    if (s.ok()) s = WriteText(cdev + "/dev", absl::StrCat(kVfioCdevMajor, ":", d.index, "\n"));
    if (!s.ok()) return s;
    unsigned int group = 0;
    if (absl::SimpleAtoi(d.iommu_group, &group)) {
      const std::string node = root_ + "/class/vfio/" + d.iommu_group;
      s = MakeDirs(node);
      if (s.ok()) s = WriteText(node + "/dev", absl::StrCat(kVfioGroupMajor, ":", group, "\n"));
      if (!s.ok()) return s;
    }
  }
  d.driver = driver;
  return absl::OkStatus();
}

absl::Status FakeSysfs::UnbindLocked(const std::string& bdf, Device& d) {
  std::error_code ec;
  fs::remove(d.dir + "/driver", ec);
  fs::remove(root_ + "/bus/pci/drivers/" + d.driver + "/" + bdf, ec);
  fs::remove_all(d.dir + "/vfio-dev", ec);
  d.driver.clear();
  return absl::OkStatus();
}

absl::Status FakeSysfs::SyncFilesLocked(const Device& d) {
  absl::Status s = WriteText(
      d.dir + "/driver_override",
      (d.override_driver.empty() ? std::string("(null)") : d.override_driver) +
          "\n");
  if (!s.ok() || !d.has_reset_files) return s;
  // An empty list reads as zero bytes, not "\n" (reset_method_show).
  return WriteText(d.dir + "/reset_method",
                   d.reset_method.empty() ? "" : d.reset_method + "\n");
}

}  // namespace gputravel
