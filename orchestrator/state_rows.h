#ifndef GPUTRAVEL_ORCHESTRATOR_STATE_ROWS_H_
#define GPUTRAVEL_ORCHESTRATOR_STATE_ROWS_H_

// How the state store's rows (state_store.h) read from their tables
// (state_schema.cc): one column list and decoder per row type. Part of the
// store; each function runs inside the caller's lock (and transaction, where
// several reads must agree).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "orchestrator/sqlite_db.h"
#include "orchestrator/state_store.h"

namespace gputravel {

// Name of the trip-id counter row (table counters).
inline constexpr char kTripCounter[] = "trip";

// NotFound names the campaign. The checkpoint is not read (StateStore::GetCheckpoint).
absl::StatusOr<CampaignRow> LoadCampaign(SqliteDb& db, const std::string& name);
// Every campaign, by creation.
absl::StatusOr<std::vector<CampaignRow>> LoadCampaigns(SqliteDb& db);
// NotFound names the holder and the campaign.
absl::StatusOr<HolderRow> LoadHolder(SqliteDb& db, const std::string& campaign,
                                     const std::string& name);
// A campaign's holders by position.
absl::StatusOr<std::vector<HolderRow>> LoadHolders(SqliteDb& db, const std::string& campaign);
absl::StatusOr<TripRow> LoadTrip(SqliteDb& db, uint64_t trip_id);
// A campaign's trips by id.
absl::StatusOr<std::vector<TripRow>> LoadTrips(SqliteDb& db, const std::string& campaign);
// Trips not done or aborted, by id.
absl::StatusOr<std::vector<TripRow>> LoadUnfinishedTrips(SqliteDb& db);
// Events with seq > after_seq, oldest first, at most `limit`, of `campaign`
// or, with campaign "", of all.
absl::StatusOr<std::vector<EventRow>> LoadEvents(SqliteDb& db, const std::string& campaign,
                                                 int64_t after_seq, int limit);

// How the store's messages name things and stamp events.
int64_t NowMs();                             // Unix time in milliseconds
std::string Quoted(absl::string_view s);     // "s", in double quotes
std::string TripName(const TripRow& t);      // trip N (campaign "C", holder "H")
// An event of `campaign` (trip 0 = none) stamped `now`.
EventRow StampedEvent(const std::string& campaign, uint64_t trip, const char* kind,
                      const std::string& step, const std::string& message, int64_t now);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_STATE_ROWS_H_
