#ifndef GPUTRAVEL_CLI_QUERY_COMMANDS_H_
#define GPUTRAVEL_CLI_QUERY_COMMANDS_H_

#include <vector>

#include "cli/command_context.h"

namespace gputravel::cli {

// The commands that only read: status, list, holders, gpus.
std::vector<CommandInfo> QueryCommands();

}  // namespace gputravel::cli

#endif  // GPUTRAVEL_CLI_QUERY_COMMANDS_H_
