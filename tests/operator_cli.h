#ifndef GPUTRAVEL_TESTS_OPERATOR_CLI_H_
#define GPUTRAVEL_TESTS_OPERATOR_CLI_H_

// The `gputravel` CLI against a running emulated stack, as its operator:
// for tests that check what a user of the CLI sees from the real
// orchestrator.

#include <string>
#include <vector>

#include "cli/emulated_stack.h"

namespace gputravel {

// Runs `gputravel ARGS --endpoint ... --ca ... --cert ... --key ...` (the
// binary from the test's runfiles, the stack's operator identity), waiting
// at most `seconds`. Returns its exit status (-1 if it did not exit by
// itself) and puts its output (stdout and stderr) in `*out`. `endpoint`
// replaces the stack's orchestrator endpoint when not empty.
int RunOperatorCli(const EmulatedStack& stack, const std::vector<std::string>& args,
                   double seconds, std::string* out, const std::string& endpoint = "");

// Runs `gputravel ARGS` (the binary from the test's runfiles) with this
// process's environment, its output appended to `log`, waiting at most
// `seconds`. Returns its exit status (-1 if it did not exit by itself) and
// puts the log in `*out`. With `stop_once` set, a command that serves until
// stopped (`up --ready_file FILE`) is stopped (SIGTERM) once that file
// exists.
int RunCli(const std::vector<std::string>& args, const std::string& log, double seconds,
           std::string* out, const std::string& stop_once = "");

}  // namespace gputravel

#endif  // GPUTRAVEL_TESTS_OPERATOR_CLI_H_
