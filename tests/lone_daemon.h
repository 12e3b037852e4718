#ifndef GPUTRAVEL_TESTS_LONE_DAEMON_H_
#define GPUTRAVEL_TESTS_LONE_DAEMON_H_

// One daemon binary run on its own, outside a stack, for tests of how it
// refuses to start.

#include <string>

namespace gputravel {

// How a daemon run ended.
struct LoneDaemonExit {
  int exit_code = -1;  // -1: did not exit by itself within a minute
  std::string log;     // its stdout and stderr
};

// Runs `binary --config=CONFIG` with its output in `log` and waits (a
// minute at most) for it to exit by itself; one that does not is stopped.
LoneDaemonExit RunDaemonToExit(const std::string& binary, const std::string& config,
                               const std::string& log);

// The daemon binary `runfiles_path` ("orchestrator/orchestrator") in
// `bin_dir` (cli/emulated_stack.h FindDaemonDir): in the Bazel runfiles
// layout, or by its file name in an installed one.
std::string DaemonBinary(const std::string& bin_dir, const std::string& runfiles_path);

}  // namespace gputravel

#endif  // GPUTRAVEL_TESTS_LONE_DAEMON_H_
