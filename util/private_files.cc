#include "util/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <cstdlib>

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

namespace {

// Whether uid may be trusted with a daemon's state: this process's user or
// root.
bool TrustedOwner(uid_t uid) { return uid == ::geteuid() || uid == 0; }

// The path to `dir`: every symbolic link on the way as given must be a
// trusted owner's (another's could point anywhere, e.g. at an old copy of
// the state), and every directory above the one it resolves to must be a
// trusted owner's and writable by nobody else, or sticky (whoever may write
// it may rename `dir`, or a directory on the way, aside, and the daemon's
// next start would find another state or none).
absl::Status RequireTrustedPathTo(const std::string& dir, const std::string& what) {
  std::string path = dir;
  if (path.empty() || path[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) {
      return absl::FailedPreconditionError("cannot resolve " + what + " " + dir + ": " +
                                           std::strerror(errno));
    }
    path = std::string(cwd) + "/" + path;
  }
  for (size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string prefix = path.substr(0, end);
    struct stat st;
    if (!prefix.empty() && prefix.back() != '/' && ::lstat(prefix.c_str(), &st) == 0 &&
        S_ISLNK(st.st_mode) && !TrustedOwner(st.st_uid)) {
      return absl::FailedPreconditionError(
          what + " " + dir + " goes through " + prefix + ", a symbolic link that uid " +
          std::to_string(st.st_uid) + " made: it could point at any state; use a path "
          "without it");
    }
    if (end == std::string::npos) break;
  }
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) {
    return absl::FailedPreconditionError("cannot resolve " + what + " " + dir + ": " +
                                         std::strerror(errno));
  }
  for (std::string above = DirOf(resolved);; above = DirOf(above)) {
    struct stat st;
    if (::stat(above.c_str(), &st) != 0) {
      return absl::FailedPreconditionError("cannot read " + above + ", above " + what + " " +
                                           dir + ": " + std::strerror(errno));
    }
    if (!TrustedOwner(st.st_uid)) {
      return absl::FailedPreconditionError(
          above + ", above " + what + " " + dir + ", is owned by uid " +
          std::to_string(st.st_uid) + ": its owner could move " + what + " aside; put it "
          "under directories of this daemon's user or root");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
      return absl::FailedPreconditionError(
          above + ", above " + what + " " + dir + ", may be written by group or others "
          "(mode " + Mode(st.st_mode) + "): they could move " + what + " aside; chmod go-w " +
          above + " (or +t)");
    }
    if (above == "/") break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RequirePrivateDirectory(const std::string& dir, const std::string& what) {
  absl::Status path = RequireTrustedPathTo(dir, what);
  if (!path.ok()) return path;
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
  if (::mkdir(entry.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError("cannot create " + what + " " + dir + ": " +
                                         std::strerror(errno));
  }
  absl::Status checked = RequirePrivateDirectory(dir, what);
  if (!checked.ok()) return checked;
  // On every start, not only the one that made it: a start that died
  // between its mkdir and this sync leaves the entry to this one.
  return SyncDirectoryOf(entry);
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
