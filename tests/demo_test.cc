// `gputravel demo` is init, up, create and watch over the same code: after
// starting the deployment it writes, it runs the `create --start` and `watch`
// commands' own code and prints what they print, then the table of trips.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/operator_cli.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

TEST(DemoTest, CreatesAndFollowsItsCampaignWithTheCreateAndWatchCommands) {
  std::string out;
  ASSERT_EQ(RunCli({"demo", "--holders", "2"}, TestTmpDir() + "/demo.log", 600, &out), 0)
      << out;
  // In this order: create's output, watch's event lines and last line, the table.
  const std::vector<std::string> want = {
      "Starting the emulated stack: GPU, MUX, 2 holder(s), orchestrator...",
      "$ gputravel create ",
      "/campaign.json --start\n",
      "Request id: ",
      "Created campaign 'demo'.\n",
      "Started campaign 'demo'.\n",
      "State        RUNNING",  // "(waiting for its GPU)" until the worker takes it
      "$ gputravel watch demo\n",
      "CAMPAIGN_STATE  -           state RUNNING: started\n",
      "holder-a      TRIP_STARTED",
      "holder-a      SCRUBBED",
      "holder-b      TRIP_STARTED",
      "holder-b      SCRUBBED",
      "state COMPLETED: every active holder did every round\n",
      "Campaign 'demo' COMPLETED: 2 trips ok, 0 failed,",
      "Campaign 'demo' on the emulated H100-CC",
      "OK: every trip verified (digest, scrub, fresh re-key).\n",
  };
  size_t at = 0;
  for (const std::string& w : want) {
    size_t pos = out.find(w, at);
    ASSERT_NE(pos, std::string::npos) << "'" << w << "' missing after offset " << at << ":\n"
                                      << out;
    at = pos + w.size();
  }
}

}  // namespace
}  // namespace gputravel
