#ifndef GPUTRAVEL_CLI_CAMPAIGN_COMMANDS_H_
#define GPUTRAVEL_CLI_CAMPAIGN_COMMANDS_H_

#include <string>
#include <vector>

#include "cli/command_context.h"
#include "proto/orchestrator.pb.h"

namespace gputravel::cli {

// What `create` did: the orchestrator's answer and whether --start started
// the campaign.
struct CreateResult {
  int exit = kExitOk;  // Non-zero: already reported through the context.
  std::string request_id;
  // Set once CreateCampaign answered (also when the start then failed).
  bool registered = false;
  v1::CreateCampaignResponse response;
  bool started = false;
};

// The `create` command without its output: checks SPEC (the first
// positional argument) and --request_id, connects, registers the campaign
// and, with --start, starts it.
CreateResult CreateCampaign(CommandContext& ctx);
// What `create` prints for `r` (human text, or JSON with --json).
void PrintCreated(CommandContext& ctx, const CreateResult& r);

// The commands that change a campaign: create, start, pause, resume, cancel.
std::vector<CommandInfo> CampaignCommands();

}  // namespace gputravel::cli

#endif  // GPUTRAVEL_CLI_CAMPAIGN_COMMANDS_H_
