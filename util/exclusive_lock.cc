#include "util/exclusive_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gputravel {
namespace {

std::string Errno(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

// The pid the holder wrote, or "" when unreadable.
std::string HolderPid(int fd) {
  char buf[32] = {0};
  ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "";
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return "";
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExclusiveLock>> ExclusiveLock::Acquire(
    const std::string& lock_path, const std::string& what) {
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    return absl::UnavailableError("cannot open lock file " + lock_path + " (" + what +
                                  "): " + Errno(e));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    std::string pid = e == EWOULDBLOCK ? HolderPid(fd) : "";
    ::close(fd);
    if (e != EWOULDBLOCK) {
      return absl::UnavailableError("cannot lock " + lock_path + " (" + what + "): " + Errno(e));
    }
    return absl::FailedPreconditionError(
        lock_path + " is locked by " + (pid.empty() ? "another process" : "pid " + pid) +
        ": another " + what + " is running on this state; stop it first (two daemons on "
        "one state would each act on it as their own)");
  }
  // A lock file is ours alone: a hard link planted to another file (the lock
  // may live in a shared directory) would otherwise be truncated below.
  struct stat st = {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    const bool linked = S_ISREG(st.st_mode) && st.st_nlink > 1;
    const std::string links = std::to_string(st.st_nlink);
    ::close(fd);
    return absl::FailedPreconditionError(
        lock_path + " (" + what + ") is " +
        (linked ? "a file with " + links + " hard links" : "not a plain file") +
        ": something else was planted at the lock path; remove it and start again");
  }
  // Ours now: whatever mode the file had, only its owner reads it.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::fchmod(fd, 0600) != 0 || ::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int e = errno;
    ::close(fd);
    return absl::UnavailableError("cannot write lock file " + lock_path + " (" + what +
                                  "): " + Errno(e));
  }
  return std::unique_ptr<ExclusiveLock>(new ExclusiveLock(fd, lock_path));
}

ExclusiveLock::~ExclusiveLock() {
  // The file stays (removing it would race with a daemon taking it now);
  // closing it releases the lock.
  ::close(fd_);
}

}  // namespace gputravel
