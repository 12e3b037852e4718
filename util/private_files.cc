#include "util/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "util/files.h"

namespace gputravel {
namespace {

std::string Mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(m & 07777));
  return buf;
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
  const std::string dir = DirectoryOf(path);
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
  // A leftover (a crash before the rename, or a file someone planted) is
  // removed, never written into: the new file is this process's own.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return Unavailable("remove", tmp, errno);
  absl::Status s = WriteFileAndSync(tmp, contents, O_EXCL);
  if (!s.ok()) return s;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Unavailable("rename " + tmp + " to", path, e);
  }
  return SyncDirectoryOf(path);
}

namespace {

// The path to `dir`, resolved a name at a time as the kernel resolves it:
// every directory a name is looked up in (including through ".." and the
// targets of symbolic links) must be a trusted owner's and writable by
// nobody else, or sticky, and every symbolic link met must be a trusted
// owner's. Otherwise whoever may write such a directory, or made such a
// link, could make the same path name another state (an old copy of it, or
// a new empty one) at the daemon's next start.
absl::Status RequireTrustedPathTo(const std::string& dir, const std::string& what) {
  std::string path = dir;
  if (path.empty() || path[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) {
      return absl::FailedPreconditionError("cannot resolve " + what + " " + dir + ": " +
                                           std::strerror(errno));
    }
    path = std::string(cwd) + "/" + path;
  }
  std::deque<std::string> names = absl::StrSplit(path, '/', absl::SkipEmpty());
  std::string at = "/";  // the directory resolved so far
  int links = 0;
  while (!names.empty()) {
    const std::string name = names.front();
    names.pop_front();
    if (name == ".") continue;
    struct stat st;
    if (::stat(at.c_str(), &st) != 0) {
      return absl::FailedPreconditionError("cannot read " + at + ", on the way to " + what +
                                           " " + dir + ": " + std::strerror(errno));
    }
    if (!IsTrustedOwner(st.st_uid)) {
      return absl::FailedPreconditionError(
          at + ", on the way to " + what + " " + dir + ", is owned by uid " +
          std::to_string(st.st_uid) + ": its owner could move " + what + " aside; put it "
          "under directories of this daemon's user or root");
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
      return absl::FailedPreconditionError(
          at + ", on the way to " + what + " " + dir + ", may be written by group or others "
          "(mode " + Mode(st.st_mode) + "): they could move " + what + " aside; chmod go-w " +
          at + " (or +t)");
    }
    if (name == "..") {
      at = DirectoryOf(at);
      continue;
    }
    const std::string next = at == "/" ? "/" + name : at + "/" + name;
    if (::lstat(next.c_str(), &st) != 0) {
      return absl::FailedPreconditionError("cannot read " + next + ", on the way to " + what +
                                           " " + dir + ": " + std::strerror(errno));
    }
    if (!S_ISLNK(st.st_mode)) {
      at = next;
      continue;
    }
    if (!IsTrustedOwner(st.st_uid)) {
      return absl::FailedPreconditionError(
          what + " " + dir + " goes through " + next + ", a symbolic link that uid " +
          std::to_string(st.st_uid) + " made: it could point at any state; use a path "
          "without it");
    }
    if (++links > 40) {
      return absl::FailedPreconditionError("cannot resolve " + what + " " + dir + ": " +
                                           std::strerror(ELOOP));
    }
    char target[PATH_MAX];
    const ssize_t n = ::readlink(next.c_str(), target, sizeof(target) - 1);
    if (n < 0) {
      return absl::FailedPreconditionError("cannot read the link " + next + ", on the way to " +
                                           what + " " + dir + ": " + std::strerror(errno));
    }
    const std::string to(target, static_cast<size_t>(n));
    std::vector<std::string> more = absl::StrSplit(to, '/', absl::SkipEmpty());
    names.insert(names.begin(), more.begin(), more.end());
    if (!to.empty() && to[0] == '/') at = "/";
  }
  return absl::OkStatus();
}

}  // namespace

bool IsTrustedOwner(uid_t uid) { return uid == ::geteuid() || uid == 0; }

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
  if (!IsTrustedOwner(st.st_uid)) {
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
  // The directory's own entry: without trailing "/" or "/." (its parent is
  // what makes the entry durable).
  std::string entry = dir;
  for (bool trimmed = true; trimmed && entry.size() > 1;) {
    trimmed = false;
    if (entry.back() == '/') {
      entry.pop_back();
      trimmed = true;
    } else if (entry.size() > 2 && entry.compare(entry.size() - 2, 2, "/.") == 0) {
      entry.resize(entry.size() - 2);
      trimmed = true;
    }
  }
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
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::FailedPreconditionError("cannot stat " + path + ": " + std::strerror(e));
  }
  if (!IsTrustedOwner(st.st_uid)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        path + " is owned by uid " + std::to_string(st.st_uid) + ", not by this daemon's "
        "user (uid " + std::to_string(::geteuid()) + ") or root: its owner could read or "
        "change the daemon's state; restore it as this user");
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
