#ifndef GPUTRAVEL_CLI_SERVE_UNTIL_STOPPED_H_
#define GPUTRAVEL_CLI_SERVE_UNTIL_STOPPED_H_

#include <string>

#include "cli/emulated_stack.h"

namespace gputravel {

// Keeps `stack` serving until SIGTERM or SIGINT (then stops its daemons and
// returns 0) or until one of its daemons exits by itself (then reports which,
// with the end of its log, on stderr as "<program>: ...", stops the others
// and returns 1). Installs the signal handlers itself.
int ServeUntilStopped(EmulatedStack& stack, const std::string& program);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_SERVE_UNTIL_STOPPED_H_
