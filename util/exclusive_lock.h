#ifndef GPUTRAVEL_UTIL_EXCLUSIVE_LOCK_H_
#define GPUTRAVEL_UTIL_EXCLUSIVE_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gputravel {

// An exclusive lock on a daemon's durable state, held for as long as the
// object lives (a daemon keeps it for its whole life). It is flock(2) on a
// lock file: the kernel drops it when the process ends, however it ends, so
// a crash never leaves a lock behind and a stale lock file is just a file.
// The file holds the holder's pid, for the refusal's message.
//
// Two daemons on one state (a second orchestrator on a state_dir, a second
// MUX on a journal) would each act on it as its own: the second's start-up
// recovery would undo the first's live work.
class ExclusiveLock {
 public:
  // Takes the lock on `lock_path` (created 0600, or made 0600), without
  // waiting. Held by another process (or another ExclusiveLock of this
  // one): FAILED_PRECONDITION "PATH is locked by pid N: another WHAT is
  // running on this state", where `what` names the daemon's state (e.g.
  // "orchestrator on state_dir /var/lib/gputravel"). A lock path that is not
  // a plain file with one link (a planted hard link): FAILED_PRECONDITION,
  // nothing written. Other errors name the path and errno.
  static absl::StatusOr<std::unique_ptr<ExclusiveLock>> Acquire(const std::string& lock_path,
                                                                const std::string& what);
  ~ExclusiveLock();
  ExclusiveLock(const ExclusiveLock&) = delete;
  ExclusiveLock& operator=(const ExclusiveLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  ExclusiveLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_EXCLUSIVE_LOCK_H_
