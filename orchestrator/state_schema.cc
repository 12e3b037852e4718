#include "orchestrator/state_schema.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "orchestrator/sqlite_db.h"
#include "util/status_macros.h"

namespace gputravel {
namespace {



// Version 1 schema. Every table is STRICT so a type error in the engine is
// refused by SQLite instead of being stored silently.
//
// counters: named monotonic counters.
//   name   "trip": the last trip id / fencing token handed out.
//   value  last value issued (0 = none yet); only ever incremented.
// campaigns: one row per campaign.
//   name              campaign name (key; names in every error message).
//   request_id        client's idempotency token for CreateCampaign; unique.
//   spec_json         the validated spec as received; compared verbatim to
//                     decide whether a repeated create is the same request.
//   gpu               the GPU the campaign runs on.
//   rounds            passes over every holder's dataset.
//   state             created|running|pausing|paused|cancelling|completed|
//                     failed|cancelled (schema 7: pausing).
//   error             why the campaign failed or was cancelled ("" if none).
//   buffer_id         device dataset buffer in use, 0 = none.
//   model             latest checkpoint, written with the trip that trained
//                     it (empty = no training yet); from schema 5 sealed
//                     (orchestrator/checkpoint_seal.h) under a key kept
//                     outside the database, bound to the campaign and
//                     model_trip.
//   model_trip        (schema 5) the trip whose training wrote `model`; 0
//                     with no model, and for a model a version before 5
//                     wrote in the clear, which StateStore::Open seals.
//   created_ms        creation time, Unix ms.
//   updated_ms        last change to the row, Unix ms.
//   trips_ok          trips finished ok.
//   trips_failed      trips finished failed.
//   trips_aborted     trips finished aborted (recovery, cancellation).
//   bytes_provisioned bytes provisioned by ok trips.
//   last_loss         latest reported training loss (NULL before any).
//   last_eval_loss    (schema 4) latest reported held-out loss.
//   terms             (schema 4) training terms (serialized
//                     v1::TrainingTerms), fixed at create; empty before.
//   last_holder       holder of the latest trip started (round-robin).
// holders: one row per (campaign, holder).
//   campaign, name    key; campaign references campaigns.
//   position          order in the spec (round-robin order).
//   dataset_bytes     size of the holder's dataset (> 0).
//   cursor_offset     start of the next window to train; < dataset_bytes.
//   round             completed passes over the dataset.
//   state             active|done|failed|skipped (schema 6: skipped).
//   error             why the holder failed ("" if none).
//   trips, bytes      ok trips of this holder and their provisioned bytes.
// trips: one row per trip, inserted at "planned" before anything happens.
//   id                trip id from counters "trip" (also the fencing token).
//   campaign, holder  references holders.
//   window_offset, window_length   the dataset window [offset, offset+length).
//   round             holder round the window belongs to.
//   step              planned|route_out|provision|route_back|rekey|train|
//                     scrub (in progress) or done|aborted (final). Committed
//                     before the step's side effect is performed.
//   outcome           "" while running, then ok|failed|aborted.
//   error             why the trip failed or was aborted.
//   bytes, chunks     what the holder reported provisioning.
//   digest_match      device digest equalled the holder's digest.
//   scrub_verified    buffer zeroed and read back as zeros.
//   rekeyed           fresh key agreement replaced the holder's key.
//   trained           loss and checkpoint committed (RecordTrained).
//   loss              training loss on this window (NULL if not trained);
//                     never served.
//   eval_loss         (schema 4) held-out loss after this window; never
//                     served.
//   reported_loss, reported_eval_loss   (schema 4) what may be reported: set
//                     on a trip that completed a block of the terms.
//   provision_seconds holder's provisioning time.
//   started_ms        BeginTrip time; ended_ms FinishTrip time (0 = running).
//   gpu_session, first_counter, counter_count   (schema 2) the copy-engine
//                     counter window handed to the holder, recorded with
//                     step route_out; 0 before.
//   duration_us       (schema 2) whole trip, monotonic clock; 0 = unknown.
//   trainer_checkpoint  (schema 8) with an external trainer
//                     (proto/trainer.proto): the SHA-256 of the checkpoint
//                     it reported with this window, committed with
//                     trained = 1; empty otherwise.
//   trainer_tokens    (schema 8) the tokens of this window the external
//                     trainer reported (and the orchestrator delivered).
// events: append-only log that watchers stream.
//   seq               AUTOINCREMENT: increasing, never reused.
//   campaign          campaign ("" for daemon-wide events).
//   trip              trip id, 0 if none.
//   kind              campaign_state|buffer|holder_state|trip_started|step|
//                     provisioned|trained|trip_finished|error|recovery|...
//   step              trip step for trip events; new state for
//                     campaign_state/holder_state events.
//   message           human-readable detail (never secrets).
//   bytes             bytes concerned (window or provisioned), 0 if none.
//   loss, eval_loss   reported losses of "trained"/"trip_finished" events of
//                     a trip that completed a block, else NULL (eval_loss:
//                     schema 4).
//   time_ms           when the event was committed, Unix ms.
constexpr char kSchemaV1[] = R"sql(
CREATE TABLE counters (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL CHECK (value >= 0)
) STRICT;
INSERT INTO counters (name, value) VALUES ('trip', 0);

CREATE TABLE campaigns (
  name TEXT PRIMARY KEY,
  request_id TEXT NOT NULL UNIQUE,
  spec_json TEXT NOT NULL,
  gpu TEXT NOT NULL,
  rounds INTEGER NOT NULL CHECK (rounds >= 1),
  state TEXT NOT NULL CHECK (state IN ('created', 'running', 'paused',
      'cancelling', 'completed', 'failed', 'cancelled')),
  error TEXT NOT NULL DEFAULT '',
  buffer_id INTEGER NOT NULL DEFAULT 0,
  model BLOB NOT NULL DEFAULT x'',
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  trips_ok INTEGER NOT NULL DEFAULT 0,
  trips_failed INTEGER NOT NULL DEFAULT 0,
  trips_aborted INTEGER NOT NULL DEFAULT 0,
  bytes_provisioned INTEGER NOT NULL DEFAULT 0,
  last_loss REAL,
  last_holder TEXT NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE holders (
  campaign TEXT NOT NULL REFERENCES campaigns (name),
  name TEXT NOT NULL,
  position INTEGER NOT NULL,
  dataset_bytes INTEGER NOT NULL CHECK (dataset_bytes > 0),
  cursor_offset INTEGER NOT NULL DEFAULT 0
      CHECK (cursor_offset >= 0 AND cursor_offset < dataset_bytes),
  round INTEGER NOT NULL DEFAULT 0 CHECK (round >= 0),
  state TEXT NOT NULL CHECK (state IN ('active', 'done', 'failed')),
  error TEXT NOT NULL DEFAULT '',
  trips INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (campaign, name)
) STRICT;

CREATE TABLE trips (
  id INTEGER PRIMARY KEY CHECK (id > 0),
  campaign TEXT NOT NULL,
  holder TEXT NOT NULL,
  window_offset INTEGER NOT NULL CHECK (window_offset >= 0),
  window_length INTEGER NOT NULL CHECK (window_length > 0),
  round INTEGER NOT NULL,
  step TEXT NOT NULL CHECK (step IN ('planned', 'route_out', 'provision',
      'route_back', 'rekey', 'train', 'scrub', 'done', 'aborted')),
  outcome TEXT NOT NULL DEFAULT ''
      CHECK (outcome IN ('', 'ok', 'failed', 'aborted')),
  error TEXT NOT NULL DEFAULT '',
  bytes INTEGER NOT NULL DEFAULT 0,
  chunks INTEGER NOT NULL DEFAULT 0,
  digest_match INTEGER NOT NULL DEFAULT 0,
  scrub_verified INTEGER NOT NULL DEFAULT 0,
  rekeyed INTEGER NOT NULL DEFAULT 0,
  trained INTEGER NOT NULL DEFAULT 0,
  loss REAL,
  provision_seconds REAL NOT NULL DEFAULT 0,
  started_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL DEFAULT 0,
  FOREIGN KEY (campaign, holder) REFERENCES holders (campaign, name)
) STRICT;
CREATE INDEX trips_by_campaign ON trips (campaign, id);
CREATE INDEX trips_unfinished ON trips (id)
    WHERE step NOT IN ('done', 'aborted');

CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  campaign TEXT NOT NULL,
  trip INTEGER NOT NULL DEFAULT 0,
  kind TEXT NOT NULL,
  step TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '',
  bytes INTEGER NOT NULL DEFAULT 0,
  loss REAL,
  time_ms INTEGER NOT NULL
) STRICT;
CREATE INDEX events_by_campaign ON events (campaign, seq);
)sql";

// Version 1 -> 2: the trip's counter window (it replaced a state file per
// GPU) and its measured duration.
constexpr char kMigrateV1ToV2[] = R"sql(
ALTER TABLE trips ADD COLUMN gpu_session INTEGER NOT NULL DEFAULT 0
    CHECK (gpu_session >= 0);
ALTER TABLE trips ADD COLUMN first_counter INTEGER NOT NULL DEFAULT 0
    CHECK (first_counter >= 0 AND first_counter <= 4294967295);
ALTER TABLE trips ADD COLUMN counter_count INTEGER NOT NULL DEFAULT 0
    CHECK (counter_count >= 0 AND counter_count <= 4294967295);
ALTER TABLE trips ADD COLUMN duration_us INTEGER NOT NULL DEFAULT 0
    CHECK (duration_us >= 0);
)sql";

// Version 2 -> 3: the GPU (serial) a trip's window and a campaign's buffer
// are on.
constexpr char kMigrateV2ToV3[] = R"sql(
ALTER TABLE trips ADD COLUMN gpu_serial TEXT NOT NULL DEFAULT '';
ALTER TABLE campaigns ADD COLUMN buffer_gpu_serial TEXT NOT NULL DEFAULT '';
)sql";

// Version 3 -> 4: training terms, held-out losses, and what was reported.
// Version 3 served each window's own loss (events, last_loss): those are
// no longer served (trips.loss keeps them inside the TD).
constexpr char kMigrateV3ToV4[] = R"sql(
ALTER TABLE campaigns ADD COLUMN terms BLOB NOT NULL DEFAULT x'';
ALTER TABLE campaigns ADD COLUMN last_eval_loss REAL;
ALTER TABLE trips ADD COLUMN eval_loss REAL;
ALTER TABLE trips ADD COLUMN reported_loss REAL;
ALTER TABLE trips ADD COLUMN reported_eval_loss REAL;
ALTER TABLE events ADD COLUMN eval_loss REAL;
ALTER TABLE trips ADD COLUMN attestation BLOB NOT NULL DEFAULT x'';
ALTER TABLE holders ADD COLUMN attestation BLOB NOT NULL DEFAULT x'';
UPDATE events SET loss = NULL;
UPDATE campaigns SET last_loss = NULL;
)sql";

// Version 4 -> 5: checkpoints are sealed, bound to the trip that wrote
// them. Rows keep their clear model with model_trip 0 until StateStore::Open,
// which has the key, seals them.
constexpr char kMigrateV4ToV5[] = R"sql(
ALTER TABLE campaigns ADD COLUMN model_trip INTEGER NOT NULL DEFAULT 0
    CHECK (model_trip >= 0);
)sql";

// Version 5 -> 6: a holder can be "skipped" (by an operator). SQLite cannot
// change a CHECK constraint in place: the table is rebuilt under the same
// name, rows kept, in the migration's transaction, with foreign keys off
// for it (SQLite's documented procedure: dropping the old table would
// otherwise orphan the trips' references) and checked before it commits.
constexpr char kMigrateV5ToV6[] = R"sql(
CREATE TABLE holders_v6 (
  campaign TEXT NOT NULL REFERENCES campaigns (name),
  name TEXT NOT NULL,
  position INTEGER NOT NULL,
  dataset_bytes INTEGER NOT NULL CHECK (dataset_bytes > 0),
  cursor_offset INTEGER NOT NULL DEFAULT 0
      CHECK (cursor_offset >= 0 AND cursor_offset < dataset_bytes),
  round INTEGER NOT NULL DEFAULT 0 CHECK (round >= 0),
  state TEXT NOT NULL CHECK (state IN ('active', 'done', 'failed', 'skipped')),
  error TEXT NOT NULL DEFAULT '',
  trips INTEGER NOT NULL DEFAULT 0,
  bytes INTEGER NOT NULL DEFAULT 0,
  attestation BLOB NOT NULL DEFAULT x'',
  PRIMARY KEY (campaign, name)
) STRICT;
INSERT INTO holders_v6 (campaign, name, position, dataset_bytes, cursor_offset, round, state,
                        error, trips, bytes, attestation)
  SELECT campaign, name, position, dataset_bytes, cursor_offset, round, state, error, trips,
         bytes, attestation FROM holders;
DROP TABLE holders;
ALTER TABLE holders_v6 RENAME TO holders;
)sql";

// Version 6 -> 7: a campaign can be "pausing" (a pause waits for the trip
// in flight). The campaigns table is rebuilt like the holders table for
// version 6, rows kept.
constexpr char kMigrateV6ToV7[] = R"sql(
CREATE TABLE campaigns_v7 (
  name TEXT PRIMARY KEY,
  request_id TEXT NOT NULL UNIQUE,
  spec_json TEXT NOT NULL,
  gpu TEXT NOT NULL,
  rounds INTEGER NOT NULL CHECK (rounds >= 1),
  state TEXT NOT NULL CHECK (state IN ('created', 'running', 'pausing', 'paused',
      'cancelling', 'completed', 'failed', 'cancelled')),
  error TEXT NOT NULL DEFAULT '',
  buffer_id INTEGER NOT NULL DEFAULT 0,
  model BLOB NOT NULL DEFAULT x'',
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  trips_ok INTEGER NOT NULL DEFAULT 0,
  trips_failed INTEGER NOT NULL DEFAULT 0,
  trips_aborted INTEGER NOT NULL DEFAULT 0,
  bytes_provisioned INTEGER NOT NULL DEFAULT 0,
  last_loss REAL,
  last_holder TEXT NOT NULL DEFAULT '',
  buffer_gpu_serial TEXT NOT NULL DEFAULT '',
  terms BLOB NOT NULL DEFAULT x'',
  last_eval_loss REAL,
  model_trip INTEGER NOT NULL DEFAULT 0 CHECK (model_trip >= 0)
) STRICT;
INSERT INTO campaigns_v7 (name, request_id, spec_json, gpu, rounds, state, error, buffer_id,
                          model, created_ms, updated_ms, trips_ok, trips_failed, trips_aborted,
                          bytes_provisioned, last_loss, last_holder, buffer_gpu_serial, terms,
                          last_eval_loss, model_trip)
  SELECT name, request_id, spec_json, gpu, rounds, state, error, buffer_id, model, created_ms,
         updated_ms, trips_ok, trips_failed, trips_aborted, bytes_provisioned, last_loss,
         last_holder, buffer_gpu_serial, terms, last_eval_loss, model_trip FROM campaigns;
DROP TABLE campaigns;
ALTER TABLE campaigns_v7 RENAME TO campaigns;
)sql";

// Version 7 -> 8: what an external trainer reported with a window, so that
// a repeated report is recognised (proto/trainer.proto ReportWindow).
constexpr char kMigrateV7ToV8[] = R"sql(
ALTER TABLE trips ADD COLUMN trainer_checkpoint BLOB NOT NULL DEFAULT x'';
ALTER TABLE trips ADD COLUMN trainer_tokens INTEGER NOT NULL DEFAULT 0
    CHECK (trainer_tokens >= 0);
)sql";

// PRAGMA arguments cannot be bound; this is kStateSchemaVersion spelled out.
constexpr char kSetUserVersion[] = "PRAGMA user_version = 8";
static_assert(kStateSchemaVersion == 8, "update kSetUserVersion and add a migration");

absl::StatusOr<int64_t> ReadVersion(SqliteDb& db) {
  GT_ASSIGN_OR_RETURN(Stmt s, db.Prepare("PRAGMA user_version"));
  GT_ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.ColInt(0) : 0;
}

absl::Status CheckVersion(const SqliteDb& db, int64_t v) {
  if (v > kStateSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state database ", db.path(), " has schema version ", v,
        ", newer than this orchestrator's version ", kStateSchemaVersion,
        "; run a newer orchestrator or point state_dir at another directory"));
  }
  if (v < 0) {
    return absl::DataLossError(
        absl::StrCat("state database ", db.path(), " has a negative schema version ", v));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EnsureStateSchema(SqliteDb& db) {
  GT_ASSIGN_OR_RETURN(int64_t version, ReadVersion(db));
  GT_RETURN_IF_ERROR(CheckVersion(db, version));
  if (version == kStateSchemaVersion) return absl::OkStatus();

  // First open or an older schema: create or migrate under the write lock,
  // re-checking in case another process did it meanwhile. DDL is
  // transactional in SQLite: a failed migration leaves the old version.
  // Foreign keys are off for this connection while it migrates (a table is
  // rebuilt), checked before the commit, and on again whatever happens.
  GT_RETURN_IF_ERROR(db.Exec("PRAGMA foreign_keys = OFF"));
  absl::Status migrated = db.InTransaction([&]() -> absl::Status {
    GT_ASSIGN_OR_RETURN(int64_t v, ReadVersion(db));
    GT_RETURN_IF_ERROR(CheckVersion(db, v));
    if (v == kStateSchemaVersion) return absl::OkStatus();
    if (v == 0) {
      GT_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT count(*) FROM sqlite_schema "
                                             "WHERE name NOT LIKE 'sqlite_%'"));
      GT_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row && s.ColInt(0) != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "state database ", db.path(),
            " already has tables but no schema version: it is not an "
            "orchestrator state database; point state_dir at another directory"));
      }
      GT_RETURN_IF_ERROR(db.ExecScript(kSchemaV1, "creating the schema"));
    }
    if (v <= 1) {
      GT_RETURN_IF_ERROR(
          db.ExecScript(kMigrateV1ToV2, "migrating the schema from version 1 to 2"));
    }
    if (v <= 2) {
      GT_RETURN_IF_ERROR(
          db.ExecScript(kMigrateV2ToV3, "migrating the schema from version 2 to 3"));
    }
    if (v <= 3) {
      GT_RETURN_IF_ERROR(
          db.ExecScript(kMigrateV3ToV4, "migrating the schema from version 3 to 4"));
    }
    if (v <= 4) {
      GT_RETURN_IF_ERROR(
          db.ExecScript(kMigrateV4ToV5, "migrating the schema from version 4 to 5"));
    }
    if (v <= 5) {
      GT_RETURN_IF_ERROR(
          db.ExecScript(kMigrateV5ToV6, "migrating the schema from version 5 to 6"));
    }
    if (v <= 6) {
      GT_RETURN_IF_ERROR(
          db.ExecScript(kMigrateV6ToV7, "migrating the schema from version 6 to 7"));
    }
    if (v <= 7) {
      GT_RETURN_IF_ERROR(
          db.ExecScript(kMigrateV7ToV8, "migrating the schema from version 7 to 8"));
    }
    GT_ASSIGN_OR_RETURN(Stmt check, db.Prepare("PRAGMA foreign_key_check"));
    GT_ASSIGN_OR_RETURN(bool orphan, check.Step());
    if (orphan) {
      return absl::DataLossError(absl::StrCat(
          "state database ", db.path(), ": migrating to schema version ", kStateSchemaVersion,
          " found a row of table ", check.ColText(0),
          " whose reference is broken; nothing was changed"));
    }
    return db.Exec(kSetUserVersion);
  });
  absl::Status on = db.Exec("PRAGMA foreign_keys = ON");
  if (!migrated.ok()) return migrated;
  return on;
}

}  // namespace gputravel
