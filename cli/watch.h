#ifndef GPUTRAVEL_CLI_WATCH_H_
#define GPUTRAVEL_CLI_WATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cli/command_context.h"
#include "proto/orchestrator.pb.h"

namespace gputravel::cli {

// Following a campaign's event stream (WatchCampaign) until it reaches a
// final state: event lines, JSON lines and progress bars (cli/progress.h).
struct WatchOptions {
  int64_t after_seq = 0;
  bool print_events = true;      // Human lines (recorded events only).
  bool json_lines = false;       // Every event as one JSON object per line.
  int64_t print_from_ms = 0;     // Human lines only for events at/after this time.
  bool progress = true;          // Bars when a terminal is attached.
  // Besides the final states, states that end the watch once the campaign
  // is in one of them (a recorded event of such a state that the campaign
  // has since left does not).
  std::vector<v1::CampaignState> stop_states;
};

struct WatchResult {
  int exit = kExitOk;  // Non-zero: already reported.
  // The final state, or the stop state the watch ended in.
  v1::CampaignState final_state = v1::CAMPAIGN_STATE_UNSPECIFIED;
  v1::Campaign campaign;  // Final campaign, if it could be read.
  bool have_campaign = false;
  std::string last_message;  // Message of the last CAMPAIGN_STATE/ERROR event.
};

// Streams the events of campaign `name`; errors are reported through `ctx`
// (WatchResult::exit).
WatchResult Watch(CommandContext& ctx, const std::string& name, const WatchOptions& o);

// The `watch` command on its flags (NAME, --after_seq, --until, --json,
// --no_progress): follows the campaign until it ends and returns the
// command's exit code with the result. `quiet` prints nothing on stdout (no
// events, bars or final line); errors still go to stderr.
struct FollowResult {
  int exit = kExitOk;
  WatchResult watch;
};
FollowResult FollowCampaign(CommandContext& ctx, bool quiet);

// The `watch` command.
CommandInfo WatchCommand();

}  // namespace gputravel::cli

#endif  // GPUTRAVEL_CLI_WATCH_H_
