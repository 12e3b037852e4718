#ifndef GPUTRAVEL_UTIL_SUBPROCESS_H_
#define GPUTRAVEL_UTIL_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace gputravel {

// A child process with stdout/stderr appended to a log file. The destructor
// terminates it (SIGTERM, then SIGKILL), so no daemon outlives its owner.
class Subprocess {
 public:
  Subprocess() = default;
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  absl::Status Start(const std::vector<std::string>& argv, const std::string& log_path);
  bool Running();
  // SIGTERM, wait up to `grace_ms`, then SIGKILL. Returns the exit status
  // (as from waitpid) or -1 if it was not running.
  int Terminate(int grace_ms = 5000);
  // SIGKILL at once, and reaps it: Running() is false on return (crash tests).
  void Kill();
  pid_t pid() const { return pid_; }
  int exit_status() const { return status_; }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

// Waits until `path` exists or `process` dies or `timeout_ms` passes.
absl::Status WaitForFile(const std::string& path, Subprocess* process,
                         const std::string& what, int timeout_ms);

// The last `max_bytes` of a log file (for error messages).
std::string LogTail(const std::string& path, size_t max_bytes = 2000);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_SUBPROCESS_H_
