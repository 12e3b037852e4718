#ifndef GPUTRAVEL_ORCHESTRATOR_STATE_SCHEMA_H_
#define GPUTRAVEL_ORCHESTRATOR_STATE_SCHEMA_H_

// The orchestrator state database's schema: its tables and what each column
// means (state_schema.cc), the version kept in PRAGMA user_version, and the
// migrations that bring every earlier version up to it in place.

#include "absl/status/status.h"

namespace gputravel {

class SqliteDb;

// Version 2 added the trips' counter window and duration, version 3 the GPU
// serial of a trip's window and of a campaign's buffer, version 4 training
// terms, held-out losses and what was reported, version 5 the trip a
// (sealed) checkpoint belongs to, version 6 the holder state "skipped",
// version 7 the campaign state "pausing", version 8 an external trainer's
// report on each trip.
inline constexpr int kStateSchemaVersion = 8;

// Creates the schema in an empty database, or migrates an older one in
// place, in one write transaction (a failed migration leaves the old
// version), re-checking under the write lock in case another connection did
// it meanwhile. Refuses (FailedPrecondition) a database of a newer schema
// version, or one that has tables but no schema version (not a state
// database); DataLoss for a negative version.
absl::Status EnsureStateSchema(SqliteDb& db);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_STATE_SCHEMA_H_
