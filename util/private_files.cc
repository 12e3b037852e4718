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

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status Unavailable(const std::string& what, const std::string& path, int e) {
  return absl::UnavailableError("cannot " + what + " " + path + ": " + std::strerror(e));
}

// Writes all of `contents` to `fd` and fsyncs it; errno on failure, else 0.
int WriteAndSync(int fd, absl::string_view contents) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return ::fsync(fd) == 0 ? 0 : errno;
}

absl::Status SyncDirectoryOf(const std::string& path) {
  const std::string dir = DirOf(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Unavailable("open the directory of", path, errno);
  const int rc = ::fsync(fd);
  const int e = errno;
  ::close(fd);
  if (rc != 0) return Unavailable("sync the directory of", path, e);
  return absl::OkStatus();
}

// Writes `contents` to a new file `path` (flags add O_EXCL or O_TRUNC) and
// syncs it; removes it again if that fails.
absl::Status WriteFileAndSync(const std::string& path, absl::string_view contents, int flags) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | flags, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return absl::AlreadyExistsError(path + " already exists");
    return Unavailable("create", path, errno);
  }
  int e = ::fchmod(fd, 0600) == 0 ? 0 : errno;  // a leftover file keeps its mode
  if (e == 0) e = WriteAndSync(fd, contents);
  ::close(fd);
  if (e != 0) {
    ::unlink(path.c_str());
    return Unavailable("write", path, e);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CreatePrivateFileDurably(const std::string& path, absl::string_view contents) {
  absl::Status s = WriteFileAndSync(path, contents, O_EXCL);
  if (!s.ok()) return s;
  return SyncDirectoryOf(path);
}

absl::Status ReplacePrivateFileDurably(const std::string& path, absl::string_view contents) {
  const std::string tmp = path + ".tmp";
  absl::Status s = WriteFileAndSync(tmp, contents, O_TRUNC);
  if (!s.ok()) return s;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Unavailable("rename " + tmp + " to", path, e);
  }
  return SyncDirectoryOf(path);
}

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

absl::Status MakePrivateStateDirectory(const std::string& dir, const std::string& what) {
  std::string entry = dir;
  while (entry.size() > 1 && entry.back() == '/') entry.pop_back();
  if (::mkdir(entry.c_str(), 0700) == 0) {
    absl::Status synced = SyncDirectoryOf(entry);
    if (!synced.ok()) return synced;
  } else if (errno != EEXIST) {
    return absl::FailedPreconditionError("cannot create " + what + " " + dir + ": " +
                                         std::strerror(errno));
  }
  return RequirePrivateDirectory(dir, what);
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
