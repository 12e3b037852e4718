#ifndef GPUTRAVEL_VFIO_MUX_SYSFS_SYSFS_FS_H_
#define GPUTRAVEL_VFIO_MUX_SYSFS_SYSFS_FS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gputravel {

// The six file operations the sysfs backend needs. Injectable so tests can
// put a fake kernel behind them (vfio_mux/sysfs/fake_sysfs.h); everything the
// backend learns about the machine goes through here.
//
// Errors carry the path and the errno text; the status code follows errno
// (absl::ErrnoToStatusCode), so ENOENT is NotFound, EBUSY FailedPrecondition, and so on.
class SysfsFs {
 public:
  virtual ~SysfsFs() = default;

  // The whole file.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // Exactly one write(2) of `data` to an existing file (no O_CREAT): a sysfs
  // attribute acts once per write call and reports failure through that
  // call's errno. The real file system opens it O_TRUNC, as the shell's
  // `echo VALUE > ATTR` does (sysfs ignores it; a plain file, as in
  // deploy/host/prepare_host_test.sh's fake tree, then holds just the value).
  // May block for as long as the kernel does.
  virtual absl::Status WriteFile(const std::string& path,
                                 absl::string_view data) = 0;
  // The target of a symbolic link, as stored (often relative).
  virtual absl::StatusOr<std::string> ReadLink(const std::string& path) = 0;
  // Entry names, sorted, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> ListDir(
      const std::string& path) = 0;
  // Whether the path exists (following symbolic links).
  virtual bool Exists(const std::string& path) = 0;
  // The device number (st_rdev) of the character device that `path` leads
  // to, following links (for /proc/PID/fd/N: the open file itself, whatever
  // name it was opened by); 0 when it is not a character device.
  virtual absl::StatusOr<uint64_t> CharDeviceNumber(const std::string& path) = 0;
};

// The error every SysfsFs returns for a failed system call: "<what> <path>:
// <strerror> (errno N)", code from absl::ErrnoToStatusCode, and the errno
// attached so callers can tell ENOTTY from EIO without parsing text.
absl::Status SysfsErrnoError(int err, absl::string_view what,
                             absl::string_view path);
// The errno attached by SysfsErrnoError, or 0.
int SysfsErrno(const absl::Status& status);
// Thread-safe strerror.
std::string ErrnoText(int err);

// The real file system. Stateless; one shared instance.
std::shared_ptr<SysfsFs> RealSysfsFs();

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_SYSFS_SYSFS_FS_H_
