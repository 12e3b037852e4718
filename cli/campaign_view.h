#ifndef GPUTRAVEL_CLI_CAMPAIGN_VIEW_H_
#define GPUTRAVEL_CLI_CAMPAIGN_VIEW_H_

#include <cstdint>
#include <string>

#include "proto/orchestrator.pb.h"

namespace gputravel::cli {

// How the client commands show the orchestrator's answers to a person. Every
// name and message from the server is made terminal-safe.

std::string U64(uint64_t v);

// "2025-01-31T12:00:00Z" (with_ms: "2025-01-31T12:00:00.123Z"), UTC; "-" for 0.
std::string FormatTime(int64_t unix_ms, bool with_ms);
// A training loss with four decimals.
std::string FormatLoss(double loss);
// The state's proto name ("RUNNING"), or its number if it has none.
std::string StateName(v1::CampaignState s);
// COMPLETED, FAILED or CANCELLED.
bool IsFinal(v1::CampaignState s);
// Bytes provisioned of the total as a percentage; "-" while the total is not
// known.
std::string ProgressText(const v1::Campaign& c);
// " (waiting for its GPU[, held by campaign X])" for a RUNNING campaign
// that does not hold its GPU yet; "" otherwise.
std::string WaitingText(const v1::Campaign& c);

// The campaign as "Key          value" lines.
std::string CampaignSummary(const v1::Campaign& c);
// The holders table of `status` (with_campaign: `holders`, every campaign).
// What the orchestrator verified of each holder's TD at its latest trip, a
// table (HOLDER, FORMAT, TCB, VERIFIED, MRTD, RTMR3); "" when no holder has
// been attested yet.
std::string AttestationTable(const google::protobuf::RepeatedPtrField<v1::HolderStatus>& hs);

std::string HoldersTable(const google::protobuf::RepeatedPtrField<v1::HolderStatus>& hs,
                         bool with_campaign);
// Every trip of the campaign (status --trips).
std::string TripsTable(const v1::Campaign& c);
// One event as a line of `watch` (without the newline).
std::string EventLine(const v1::Event& e);

}  // namespace gputravel::cli

#endif  // GPUTRAVEL_CLI_CAMPAIGN_VIEW_H_
