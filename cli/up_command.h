#ifndef GPUTRAVEL_CLI_UP_COMMAND_H_
#define GPUTRAVEL_CLI_UP_COMMAND_H_

namespace gputravel {

// `gputravel up DIR`: starts the daemons of the deployment `gputravel init`
// wrote to DIR, in order, and keeps them running until SIGTERM or Ctrl-C.
// Returns the process exit code: 0 stopped by a signal, 1 if the deployment
// cannot start or a daemon exits by itself, 2 on bad usage.
int UpCommand(int argc, char** argv);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_UP_COMMAND_H_
