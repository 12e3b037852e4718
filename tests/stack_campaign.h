#ifndef GPUTRAVEL_TESTS_STACK_CAMPAIGN_H_
#define GPUTRAVEL_TESTS_STACK_CAMPAIGN_H_

// A campaign of an emulated stack driven and watched over the orchestrator
// API as its operator: for tests that break a daemon under a running
// campaign and check what the API says.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "proto/orchestrator.grpc.pb.h"

namespace gputravel {

// Creates campaign `spec` under `name` (request id "r-NAME"), as
// CreateCampaign answers it.
grpc::Status CreateNamedCampaign(v1::Orchestrator::Stub* stub, nlohmann::json spec,
                                 const std::string& name);

// Starts, pauses, resumes or cancels (`what`: "start", "pause", "resume",
// anything else) campaign `name`; `*out` is the campaign answered.
grpc::Status ControlCampaign(v1::Orchestrator::Stub* stub, const std::string& what,
                             const std::string& name, v1::Campaign* out);

// Resumes campaign `name` as its operator, asking again (for up to
// `seconds`) while the orchestrator refuses (recovery is still making an
// interrupted trip safe); whether it was resumed.
bool ResumeCampaign(EmulatedStack* stack, const std::string& name, double seconds = 30);

// Creates the stack's campaign (CampaignSpec(), named "demo") with
// `request_id` and starts it.
absl::Status CreateAndStartCampaign(EmulatedStack* stack, const std::string& request_id);

// The campaign as GetCampaign answers (a failed call is a test failure).
v1::Campaign GetStackCampaign(EmulatedStack* stack, const std::string& name,
                              bool include_trips = false);

// Asks for the campaign until `done` holds for it (true), or `seconds`
// pass (false): a bounded wait on a condition. `*last`: the latest answer.
bool WaitForCampaign(EmulatedStack* stack, const std::string& name, double seconds,
                     const std::function<bool(const v1::Campaign&)>& done, v1::Campaign* last);

// The campaign's recorded events after `after_seq` (WatchCampaign's replay
// and what follows, live progress left out), read until the stream ends (a
// final campaign), `until` holds for the event just read (a campaign that
// is not final: its stream waits for more), or `seconds` pass; `until`
// was met if it holds for the last event returned.
std::vector<v1::Event> RecordedEvents(
    EmulatedStack* stack, const std::string& name,
    const std::function<bool(const v1::Event&)>& until = nullptr, int64_t after_seq = 0,
    double seconds = 20);

// Expects of a campaign's recorded events that every trip was planned only
// after the one before it finished (its buffer scrubbed and verified, or
// recovery made it safe): no holder's trip overlaps the previous one's.
void ExpectTripsOneAtATime(const std::vector<v1::Event>& events);

}  // namespace gputravel

#endif  // GPUTRAVEL_TESTS_STACK_CAMPAIGN_H_
