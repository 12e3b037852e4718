#ifndef GPUTRAVEL_CLI_CAMPAIGN_COMMANDS_H_
#define GPUTRAVEL_CLI_CAMPAIGN_COMMANDS_H_

#include <vector>

#include "cli/command_context.h"

namespace gputravel::cli {

// The commands that change a campaign: create, start, pause, resume, cancel.
std::vector<CommandInfo> CampaignCommands();

}  // namespace gputravel::cli

#endif  // GPUTRAVEL_CLI_CAMPAIGN_COMMANDS_H_
