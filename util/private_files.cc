#include "util/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gputravel {
namespace {

std::string Mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

}  // namespace

absl::Status RequirePrivateDirectory(const std::string& dir, const std::string& what) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError("cannot read " + what + " " + dir + ": " +
                                         std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(what + " " + dir + " is not a directory");
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    return absl::FailedPreconditionError(
        what + " " + dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by this "
        "daemon's user (uid " + std::to_string(::geteuid()) + ") or root: its owner could "
        "replace the daemon's state; chown it to the daemon's user");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(
        what + " " + dir + " may be written by group or others (mode " + Mode(st.st_mode) +
        "): they could replace the daemon's state; chmod 700 " + dir);
  }
  return absl::OkStatus();
}

absl::Status MakeFilePrivate(const std::string& path, bool create) {
  int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
  if (fd < 0) {
    if (errno == ENOENT && !create) return absl::OkStatus();
    return absl::FailedPreconditionError("cannot open " + path + " to make it private: " +
                                         std::strerror(errno));
  }
  const int rc = ::fchmod(fd, 0600);
  const int e = errno;
  ::close(fd);
  if (rc != 0) {
    return absl::FailedPreconditionError("cannot make " + path + " mode 0600: " +
                                         std::strerror(e));
  }
  return absl::OkStatus();
}

}  // namespace gputravel
