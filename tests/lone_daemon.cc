#include "tests/lone_daemon.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "util/files.h"
#include "util/subprocess.h"

namespace gputravel {

LoneDaemonExit RunDaemonToExit(const std::string& binary, const std::string& config,
                               const std::string& log) {
  Subprocess p;
  LoneDaemonExit out;
  if (!p.Start({binary, "--config=" + config}, log).ok()) return out;
  for (int i = 0; i < 1200 && p.Running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (p.Running()) {
    p.Terminate();
  } else if (WIFEXITED(p.exit_status())) {
    out.exit_code = WEXITSTATUS(p.exit_status());
  }
  out.log = ReadFile(log).value_or("");
  return out;
}

std::string DaemonBinary(const std::string& bin_dir, const std::string& runfiles_path) {
  const std::string in_runfiles = bin_dir + "/" + runfiles_path;
  if (::access(in_runfiles.c_str(), X_OK) == 0) return in_runfiles;
  return bin_dir + "/" + runfiles_path.substr(runfiles_path.find('/') + 1);
}

}  // namespace gputravel
