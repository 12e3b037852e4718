#include "orchestrator/state_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "orchestrator/schedule.h"
#include "proto/training.pb.h"
#include "trainer/training_policy.h"
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
//   state             created|running|paused|cancelling|completed|failed|
//                     cancelled.
//   error             why the campaign failed or was cancelled ("" if none).
//   buffer_id         device dataset buffer in use, 0 = none.
//   model             latest checkpoint, written with the trip that trained
//                     it (empty = no training yet).
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
//   state             active|done|failed.
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

// PRAGMA arguments cannot be bound; this is the compile-time constant
// kSchemaVersion, spelled out (checked by a static_assert below).
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
UPDATE events SET loss = NULL;
UPDATE campaigns SET last_loss = NULL;
)sql";

constexpr char kSetUserVersion[] = "PRAGMA user_version = 4";
static_assert(StateStore::kSchemaVersion == 4,
              "update kSetUserVersion and add a migration");

// Name of the trip-id counter row.
constexpr char kTripCounter[] = "trip";

// How long a writer waits for another connection's write lock.
constexpr int kBusyTimeoutMs = 5000;

constexpr uint64_t kMaxStored =
    static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

bool IsHolderState(absl::string_view s) {
  return s == kHolderActive || s == kHolderDone || s == kHolderFailed;
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

// Maps an SQLite failure to a status that says what was being done.
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  const char* file = sqlite3_db_filename(db, "main");
  std::string msg =
      absl::StrCat("state database ", file ? file : "?", ": ", what, ": ",
                   sqlite3_errmsg(db), " (sqlite code ", rc, ")");
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(absl::StrCat(
          msg,
          "; another process held the database longer than the busy "
          "timeout, retry"));
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(msg);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

// A borrowed, cached prepared statement; resets itself and clears its
// bindings when it goes out of scope, so the next user starts clean and no
// read transaction is left open. Parameters are bound in order.
class Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  Stmt(Stmt&& o) noexcept
      : db_(o.db_), s_(o.s_), next_(o.next_), status_(std::move(o.status_)) {
    o.s_ = nullptr;
  }
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt() {
    if (s_ != nullptr) {
      sqlite3_reset(s_);
      sqlite3_clear_bindings(s_);
    }
  }

  Stmt& Int(int64_t v) {
    Check(sqlite3_bind_int64(s_, ++next_, v));
    return *this;
  }
  // Unsigned values beyond int64 cannot be stored; refuse rather than wrap.
  Stmt& U64(uint64_t v) {
    if (v > kMaxStored) {
      if (status_.ok()) {
        status_ = absl::InvalidArgumentError(
            absl::StrCat("value ", v,
                         " does not fit the state database's "
                         "64-bit signed integers"));
      }
      ++next_;
      return *this;
    }
    return Int(static_cast<int64_t>(v));
  }
  Stmt& Real(double v) {
    Check(sqlite3_bind_double(s_, ++next_, v));
    return *this;
  }
  Stmt& OptReal(const std::optional<double>& v) {
    if (!v.has_value()) {
      Check(sqlite3_bind_null(s_, ++next_));
      return *this;
    }
    return Real(*v);
  }
  // SQLITE_TRANSIENT: the value may be a temporary.
  Stmt& Text(absl::string_view v) {
    Check(sqlite3_bind_text64(s_, ++next_, v.data(), v.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
    return *this;
  }
  // Binds without copying: `v` must outlive the statement's execution (used
  // for checkpoints, which may be large). data() is never null, so an empty
  // value is an empty blob, not NULL.
  Stmt& BlobRef(const std::string& v) {
    Check(sqlite3_bind_blob64(s_, ++next_, v.data(), v.size(), SQLITE_STATIC));
    return *this;
  }

  // Steps once: true when a row is available, false when done.
  absl::StatusOr<bool> Step() {
    if (!status_.ok()) return status_;
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, absl::StrCat("running ", sqlite3_sql(s_)));
  }
  // For statements that return no rows (INSERT, UPDATE, DDL).
  absl::Status Run() {
    GT_ASSIGN_OR_RETURN(bool row, Step());
    if (row) {
      return absl::InternalError(
          absl::StrCat("unexpected row from ", sqlite3_sql(s_)));
    }
    return absl::OkStatus();
  }

  int64_t ColInt(int i) { return sqlite3_column_int64(s_, i); }
  uint64_t ColU64(int i) {
    int64_t v = sqlite3_column_int64(s_, i);
    return v < 0 ? 0 : static_cast<uint64_t>(v);
  }
  bool ColBool(int i) { return sqlite3_column_int64(s_, i) != 0; }
  double ColReal(int i) { return sqlite3_column_double(s_, i); }
  std::optional<double> ColOptReal(int i) {
    if (sqlite3_column_type(s_, i) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(s_, i);
  }
  std::string ColText(int i) {
    const unsigned char* p = sqlite3_column_text(s_, i);
    int n = sqlite3_column_bytes(s_, i);
    return p == nullptr ? std::string()
                        : std::string(reinterpret_cast<const char*>(p), n);
  }
  std::string ColBlob(int i) {
    const void* p = sqlite3_column_blob(s_, i);
    int n = sqlite3_column_bytes(s_, i);
    return p == nullptr ? std::string()
                        : std::string(static_cast<const char*>(p), n);
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && status_.ok()) {
      status_ = SqliteError(db_, rc, "binding a parameter");
    }
  }

  sqlite3* db_;
  sqlite3_stmt* s_;
  int next_ = 0;
  absl::Status status_;
};

// Column lists shared by the loaders; the Read* functions follow the order.
#define GT_SS_CAMPAIGN_COLS                                             \
  "name, request_id, spec_json, gpu, rounds, state, error, buffer_id, " \
  "created_ms, updated_ms, trips_ok, trips_failed, trips_aborted, "     \
  "bytes_provisioned, last_loss, last_holder, buffer_gpu_serial, "      \
  "last_eval_loss, terms"
#define GT_SS_HOLDER_COLS                                                  \
  "campaign, name, position, dataset_bytes, cursor_offset, round, state, " \
  "error, trips, bytes"
#define GT_SS_TRIP_COLS                                                    \
  "id, campaign, holder, window_offset, window_length, round, step, "      \
  "outcome, error, bytes, chunks, digest_match, scrub_verified, rekeyed, " \
  "trained, loss, provision_seconds, started_ms, ended_ms, gpu_session, "  \
  "first_counter, counter_count, duration_us, gpu_serial, eval_loss, "  \
  "reported_loss, reported_eval_loss"
#define GT_SS_EVENT_COLS \
  "seq, campaign, trip, kind, step, message, bytes, loss, time_ms, eval_loss"

using StmtCache = std::unordered_map<const char*, sqlite3_stmt*>;

// Returns the cached statement for `sql` (a string literal), compiling it on
// first use. Values always reach SQLite through Stmt's Bind calls.
absl::StatusOr<Stmt> Prepare(sqlite3* db, StmtCache& cache, const char* sql) {
  auto it = cache.find(sql);
  if (it != cache.end()) return Stmt(db, it->second);
  sqlite3_stmt* s = nullptr;
  int rc =
      sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(s);
    return SqliteError(db, rc, absl::StrCat("preparing ", sql));
  }
  cache.emplace(sql, s);
  return Stmt(db, s);
}

CampaignRow ReadCampaign(Stmt& s, bool with_model) {
  CampaignRow c;
  c.name = s.ColText(0);
  c.request_id = s.ColText(1);
  c.spec_json = s.ColText(2);
  c.gpu = s.ColText(3);
  c.rounds = static_cast<uint32_t>(s.ColInt(4));
  c.state = s.ColText(5);
  c.error = s.ColText(6);
  c.buffer_id = s.ColU64(7);
  c.created_ms = s.ColInt(8);
  c.updated_ms = s.ColInt(9);
  c.trips_ok = s.ColInt(10);
  c.trips_failed = s.ColInt(11);
  c.trips_aborted = s.ColInt(12);
  c.bytes_provisioned = s.ColU64(13);
  c.last_loss = s.ColOptReal(14);
  c.last_holder = s.ColText(15);
  c.buffer_gpu_serial = s.ColText(16);
  c.last_eval_loss = s.ColOptReal(17);
  c.terms = s.ColBlob(18);
  if (with_model) c.model = s.ColBlob(19);
  return c;
}

HolderRow ReadHolder(Stmt& s) {
  HolderRow h;
  h.campaign = s.ColText(0);
  h.name = s.ColText(1);
  h.position = static_cast<int32_t>(s.ColInt(2));
  h.dataset_bytes = s.ColU64(3);
  h.cursor_offset = s.ColU64(4);
  h.round = static_cast<uint32_t>(s.ColInt(5));
  h.state = s.ColText(6);
  h.error = s.ColText(7);
  h.trips = s.ColInt(8);
  h.bytes = s.ColU64(9);
  return h;
}

TripRow ReadTrip(Stmt& s) {
  TripRow t;
  t.id = s.ColU64(0);
  t.campaign = s.ColText(1);
  t.holder = s.ColText(2);
  t.window_offset = s.ColU64(3);
  t.window_length = s.ColU64(4);
  t.round = static_cast<uint32_t>(s.ColInt(5));
  t.step = s.ColText(6);
  t.outcome = s.ColText(7);
  t.error = s.ColText(8);
  t.bytes = s.ColU64(9);
  t.chunks = s.ColU64(10);
  t.digest_match = s.ColBool(11);
  t.scrub_verified = s.ColBool(12);
  t.rekeyed = s.ColBool(13);
  t.trained = s.ColBool(14);
  t.loss = s.ColOptReal(15);
  t.provision_seconds = s.ColReal(16);
  t.started_ms = s.ColInt(17);
  t.ended_ms = s.ColInt(18);
  t.gpu_session = s.ColU64(19);
  t.first_counter = static_cast<uint32_t>(s.ColInt(20));
  t.counter_count = static_cast<uint32_t>(s.ColInt(21));
  t.duration_us = s.ColInt(22);
  t.gpu_serial = s.ColText(23);
  t.eval_loss = s.ColOptReal(24);
  t.reported_loss = s.ColOptReal(25);
  t.reported_eval_loss = s.ColOptReal(26);
  return t;
}

EventRow ReadEvent(Stmt& s) {
  EventRow e;
  e.seq = s.ColInt(0);
  e.campaign = s.ColText(1);
  e.trip = s.ColU64(2);
  e.kind = s.ColText(3);
  e.step = s.ColText(4);
  e.message = s.ColText(5);
  e.bytes = s.ColU64(6);
  e.loss = s.ColOptReal(7);
  e.time_ms = s.ColInt(8);
  e.eval_loss = s.ColOptReal(9);
  return e;
}

std::string TripName(const TripRow& t) {
  return absl::StrCat("trip ", t.id, " (campaign ", Quote(t.campaign),
                      ", holder ", Quote(t.holder), ")");
}

}  // namespace

// ---------------------------------------------------------------------------
// Opening and schema.

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::Open(
    const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError("state database path is empty");
  }
  // The file holds model checkpoints trained on holders' data: create it
  // private before SQLite does (SQLite gives its -wal/-shm files the same
  // permissions as the database file).
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open or create state database ", path, ": ",
                     std::strerror(err)));
  }
  ::close(fd);

  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      nullptr);
  if (rc != SQLITE_OK) {
    absl::Status st =
        db != nullptr
            ? SqliteError(db, rc, "opening")
            : absl::ResourceExhaustedError(absl::StrCat(
                  "state database ", path, ": out of memory opening it"));
    sqlite3_close_v2(db);
    return st;
  }
  sqlite3_extended_result_codes(db, 1);
  std::unique_ptr<StateStore> store(new StateStore(db, path));
  {
    absl::MutexLock lock(&store->mu_);
    GT_RETURN_IF_ERROR(store->Configure());
    GT_RETURN_IF_ERROR(store->EnsureSchema());
  }
  return store;
}

StateStore::~StateStore() {
  absl::MutexLock lock(&mu_);
  for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
  stmts_.clear();
  // close_v2 also checkpoints the WAL when this is the last connection.
  sqlite3_close_v2(db_);
}

absl::Status StateStore::Exec(const char* sql) {
  GT_ASSIGN_OR_RETURN(Stmt s, Prepare(db_, stmts_, sql));
  // Some PRAGMAs answer with a row; draining it is all that is needed here.
  while (true) {
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return absl::OkStatus();
  }
}

absl::Status StateStore::SetSynchronous(Durability durability) {
  if (durability == synchronous_) return absl::OkStatus();
  // Outside any transaction; applies to the commits that follow.
  GT_RETURN_IF_ERROR(Exec(durability == Durability::kFlush
                                 ? "PRAGMA synchronous = FULL"
                                 : "PRAGMA synchronous = NORMAL"));
  synchronous_ = durability;
  return absl::OkStatus();
}

template <typename Body>
absl::Status StateStore::InTransaction(Body body, bool write, Durability durability) {
  if (write) GT_RETURN_IF_ERROR(SetSynchronous(durability));
  // IMMEDIATE takes the write lock up front, so a writing transaction never
  // fails half-way because another connection wrote first; readers take a
  // consistent snapshot without blocking writers (WAL).
  GT_RETURN_IF_ERROR(Exec(write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED"));
  uncommitted_events_.clear();
  absl::Status st = body();
  if (st.ok()) {
    st = Exec("COMMIT");
    if (st.ok()) {
      if (observer_) {
        for (const auto& e : uncommitted_events_) observer_(e.first, e.second);
      }
      uncommitted_events_.clear();
      return st;
    }
  }
  uncommitted_events_.clear();
  if (sqlite3_get_autocommit(db_) == 0) {
    absl::Status rb = Exec("ROLLBACK");
    if (!rb.ok()) {
      return absl::InternalError(
          absl::StrCat(st.message(), "; rollback failed too: ", rb.message()));
    }
  }
  return st;
}

absl::Status StateStore::Configure() {
  int rc = sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, "setting busy_timeout");
  GT_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys = ON"));
  // FULL: a commit is on disk (WAL fsynced) before it returns, so a step the
  // engine acted on is never lost to a power cut. Lazy commits switch to
  // NORMAL for themselves (InTransaction).
  GT_RETURN_IF_ERROR(Exec("PRAGMA synchronous = FULL"));
  synchronous_ = Durability::kFlush;
  {
    // journal_mode answers with the mode in force: a filesystem without
    // shared memory support silently keeps another mode, which we refuse.
    GT_ASSIGN_OR_RETURN(Stmt s,
                           Prepare(db_, stmts_, "PRAGMA journal_mode = WAL"));
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    std::string mode = row ? s.ColText(0) : "";
    if (mode != "wal") {
      return absl::FailedPreconditionError(absl::StrCat(
          "state database ", path_, ": cannot use WAL journal mode (got ",
          Quote(mode), "); put it on a local filesystem"));
    }
  }
  {
    GT_ASSIGN_OR_RETURN(Stmt s, Prepare(db_, stmts_, "PRAGMA foreign_keys"));
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row || s.ColInt(0) != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("state database ", path_,
                       ": this SQLite build does not enforce foreign keys"));
    }
  }
  return absl::OkStatus();
}

absl::Status StateStore::EnsureSchema() {
  auto read_version =
      [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<int64_t> {
    GT_ASSIGN_OR_RETURN(Stmt s, Prepare(db_, stmts_, "PRAGMA user_version"));
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    return row ? s.ColInt(0) : 0;
  };
  auto check_version = [this](int64_t v) -> absl::Status {
    if (v > kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "state database ", path_, " has schema version ", v,
          ", newer than this orchestrator's version ", kSchemaVersion,
          "; run a newer orchestrator or point state_dir at another directory"));
    }
    if (v < 0) {
      return absl::DataLossError(absl::StrCat("state database ", path_,
                                              " has a negative schema version ", v));
    }
    return absl::OkStatus();
  };
  auto run_ddl = [this](const char* ddl, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    // Constant DDL, several statements: sqlite3_exec is the tool for it.
    char* err = nullptr;
    int rc = sqlite3_exec(db_, ddl, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : "";
      sqlite3_free(err);
      return SqliteError(db_, rc, absl::StrCat(what, ": ", msg));
    }
    return absl::OkStatus();
  };
  GT_ASSIGN_OR_RETURN(int64_t version, read_version());
  GT_RETURN_IF_ERROR(check_version(version));
  if (version == kSchemaVersion) return absl::OkStatus();

  // First open or an older schema: create or migrate under the write lock,
  // re-checking in case another process did it meanwhile. DDL is
  // transactional in SQLite: a failed migration leaves the old version.
  return InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                           mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(int64_t v, read_version());
    GT_RETURN_IF_ERROR(check_version(v));
    if (v == kSchemaVersion) return absl::OkStatus();
    if (v == 0) {
      GT_ASSIGN_OR_RETURN(Stmt s,
                             Prepare(db_, stmts_,
                                     "SELECT count(*) FROM sqlite_schema "
                                     "WHERE name NOT LIKE 'sqlite_%'"));
      GT_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row && s.ColInt(0) != 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "state database ", path_,
            " already has tables but no schema version: it is not an "
            "orchestrator state database; point state_dir at another directory"));
      }
    }
    if (v == 0) GT_RETURN_IF_ERROR(run_ddl(kSchemaV1, "creating the schema"));
    if (v <= 1) {
      GT_RETURN_IF_ERROR(run_ddl(kMigrateV1ToV2, "migrating the schema from version 1 to 2"));
    }
    if (v <= 2) {
      GT_RETURN_IF_ERROR(run_ddl(kMigrateV2ToV3, "migrating the schema from version 2 to 3"));
    }
    if (v <= 3) {
      GT_RETURN_IF_ERROR(run_ddl(kMigrateV3ToV4, "migrating the schema from version 3 to 4"));
    }
    return Exec(kSetUserVersion);
  });
}

absl::StatusOr<int64_t> StateStore::InsertEvent(const EventRow& e) {
  GT_ASSIGN_OR_RETURN(
      Stmt s, Prepare(db_, stmts_,
                      "INSERT INTO events (campaign, trip, kind, step, "
                      "message, bytes, loss, time_ms, eval_loss) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  s.Text(e.campaign)
      .U64(e.trip)
      .Text(e.kind)
      .Text(e.step)
      .Text(e.message)
      .U64(e.bytes)
      .OptReal(e.loss)
      .Int(e.time_ms != 0 ? e.time_ms : NowMs())
      .OptReal(e.eval_loss);
  GT_RETURN_IF_ERROR(s.Run());
  const int64_t seq = sqlite3_last_insert_rowid(db_);
  uncommitted_events_.emplace_back(e.campaign, seq);
  return seq;
}

void StateStore::SetEventObserver(EventObserver observer) {
  absl::MutexLock lock(&mu_);
  observer_ = std::move(observer);
}

// ---------------------------------------------------------------------------
// Loaders (inside the caller's transaction).

absl::StatusOr<CampaignRow> StateStore::LoadCampaign(const std::string& name,
                                                     bool with_model) {
  const char* sql = with_model ? "SELECT " GT_SS_CAMPAIGN_COLS
                                 ", model FROM campaigns WHERE name = ?"
                               : "SELECT " GT_SS_CAMPAIGN_COLS
                                 " FROM campaigns WHERE name = ?";
  GT_ASSIGN_OR_RETURN(Stmt s, Prepare(db_, stmts_, sql));
  s.Text(name);
  GT_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) {
    return absl::NotFoundError(
        absl::StrCat("campaign ", Quote(name), " not found"));
  }
  return ReadCampaign(s, with_model);
}

absl::StatusOr<HolderRow> StateStore::LoadHolder(const std::string& campaign,
                                                 const std::string& name) {
  GT_ASSIGN_OR_RETURN(
      Stmt s, Prepare(db_, stmts_,
                      "SELECT " GT_SS_HOLDER_COLS
                      " FROM holders WHERE campaign = ? AND name = ?"));
  s.Text(campaign).Text(name);
  GT_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat(
        "holder ", Quote(name), " is not part of campaign ", Quote(campaign)));
  }
  return ReadHolder(s);
}

absl::StatusOr<TripRow> StateStore::LoadTrip(uint64_t trip_id) {
  GT_ASSIGN_OR_RETURN(
      Stmt s, Prepare(db_, stmts_,
                      "SELECT " GT_SS_TRIP_COLS " FROM trips WHERE id = ?"));
  s.U64(trip_id);
  GT_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("trip ", trip_id, " not found"));
  }
  return ReadTrip(s);
}

absl::StatusOr<std::vector<TripRow>> StateStore::QueryTrips(
    const char* sql, const std::string* campaign) {
  GT_ASSIGN_OR_RETURN(Stmt s, Prepare(db_, stmts_, sql));
  if (campaign != nullptr) s.Text(*campaign);
  std::vector<TripRow> out;
  while (true) {
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadTrip(s));
  }
  return out;
}

// ---------------------------------------------------------------------------
// Counters and campaigns.

absl::StatusOr<uint64_t> StateStore::NextTripId() { return NextId(Durability::kLazy); }

absl::StatusOr<uint64_t> StateStore::NextFencingToken() { return NextId(Durability::kFlush); }

absl::StatusOr<uint64_t> StateStore::NextId(Durability durability) {
  absl::MutexLock lock(&mu_);
  uint64_t id = 0;
  GT_RETURN_IF_ERROR(
      InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        {
          GT_ASSIGN_OR_RETURN(
              Stmt s, Prepare(db_, stmts_,
                              "UPDATE counters SET value = value + 1 "
                              "WHERE name = ?"));
          s.Text(kTripCounter);
          GT_RETURN_IF_ERROR(s.Run());
        }
        GT_ASSIGN_OR_RETURN(
            Stmt s,
            Prepare(db_, stmts_, "SELECT value FROM counters WHERE name = ?"));
        s.Text(kTripCounter);
        GT_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) {
          return absl::DataLossError(absl::StrCat(
              "state database ", path_, " lost its trip counter row"));
        }
        id = s.ColU64(0);
        return absl::OkStatus();
      }, true, durability));
  return id;
}

absl::StatusOr<CreateResult> StateStore::CreateCampaign(
    const CampaignRow& c, const std::vector<HolderRow>& holders) {
  if (c.name.empty()) {
    return absl::InvalidArgumentError("campaign name is empty");
  }
  if (c.request_id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(c.name),
                     ": request_id is empty; the client must "
                     "send an idempotency token"));
  }
  if (c.spec_json.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(c.name), ": spec_json is empty"));
  }
  if (c.rounds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(c.name), ": rounds must be >= 1"));
  }
  if (holders.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(c.name), " has no holders"));
  }
  std::set<std::string> seen;
  for (const HolderRow& h : holders) {
    if (h.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "campaign ", Quote(c.name), " has a holder without a name"));
    }
    if (!seen.insert(h.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("campaign ", Quote(c.name),
                                                     " lists holder ",
                                                     Quote(h.name), " twice"));
    }
    if (h.dataset_bytes == 0 || h.dataset_bytes > kMaxStored) {
      return absl::InvalidArgumentError(
          absl::StrCat("campaign ", Quote(c.name), ": holder ", Quote(h.name),
                       " has dataset size ", h.dataset_bytes,
                       "; it must be between 1 and 2^63-1 bytes"));
    }
  }

  absl::MutexLock lock(&mu_);
  CreateResult result;
  GT_RETURN_IF_ERROR(InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                          mu_) -> absl::Status {
    {
      GT_ASSIGN_OR_RETURN(Stmt s,
                             Prepare(db_, stmts_,
                                     "SELECT name, spec_json FROM campaigns "
                                     "WHERE request_id = ?"));
      s.Text(c.request_id);
      GT_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) {
        std::string name = s.ColText(0);
        if (name != c.name || s.ColText(1) != c.spec_json) {
          return absl::AlreadyExistsError(absl::StrCat(
              "request_id ", Quote(c.request_id), " already created campaign ",
              Quote(name),
              " with a different name or spec; use a new request_id for a "
              "new campaign"));
        }
        // The same request again (a client retry): answer as the first time.
        result.created = false;
        GT_ASSIGN_OR_RETURN(result.campaign, LoadCampaign(name, false));
        return absl::OkStatus();
      }
    }
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "SELECT request_id FROM campaigns WHERE name = ?"));
      s.Text(c.name);
      GT_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) {
        return absl::AlreadyExistsError(absl::StrCat(
            "campaign ", Quote(c.name),
            " already exists (created by request_id ", Quote(s.ColText(0)),
            "); choose another campaign name"));
      }
    }
    const int64_t now = NowMs();
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s,
          Prepare(db_, stmts_,
                  "INSERT INTO campaigns (name, request_id, spec_json, gpu, "
                  "rounds, state, created_ms, updated_ms, terms) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"));
      s.Text(c.name)
          .Text(c.request_id)
          .Text(c.spec_json)
          .Text(c.gpu)
          .Int(c.rounds)
          .Text(kCampaignCreated)
          .Int(now)
          .Int(now)
          .BlobRef(c.terms);
      GT_RETURN_IF_ERROR(s.Run());
    }
    for (size_t i = 0; i < holders.size(); ++i) {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "INSERT INTO holders (campaign, name, position, "
                          "dataset_bytes, state) VALUES (?, ?, ?, ?, ?)"));
      s.Text(c.name)
          .Text(holders[i].name)
          .Int(static_cast<int64_t>(i))
          .U64(holders[i].dataset_bytes)
          .Text(kHolderActive);
      GT_RETURN_IF_ERROR(s.Run());
    }
    EventRow e;
    e.campaign = c.name;
    e.kind = "campaign_state";
    e.step = kCampaignCreated;
    e.message = absl::StrCat("created with ", holders.size(), " holders, ",
                             c.rounds, " rounds, gpu ", Quote(c.gpu));
    e.time_ms = now;
    GT_ASSIGN_OR_RETURN(int64_t seq, InsertEvent(e));
    result.event_seqs.push_back(seq);
    result.created = true;
    GT_ASSIGN_OR_RETURN(result.campaign, LoadCampaign(c.name, false));
    return absl::OkStatus();
  }));
  return result;
}

absl::StatusOr<CampaignRow> StateStore::GetCampaign(const std::string& name) {
  absl::MutexLock lock(&mu_);
  return LoadCampaign(name, true);
}

absl::StatusOr<CampaignRow> StateStore::GetCampaignSummary(const std::string& name) {
  absl::MutexLock lock(&mu_);
  return LoadCampaign(name, false);
}

absl::StatusOr<std::string> StateStore::GetCampaignState(const std::string& name) {
  absl::MutexLock lock(&mu_);
  GT_ASSIGN_OR_RETURN(
      Stmt s, Prepare(db_, stmts_, "SELECT state FROM campaigns WHERE name = ?"));
  s.Text(name);
  GT_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("campaign ", Quote(name), " not found"));
  return s.ColText(0);
}

absl::StatusOr<std::vector<CampaignRow>> StateStore::ListCampaigns() {
  absl::MutexLock lock(&mu_);
  GT_ASSIGN_OR_RETURN(Stmt s,
                         Prepare(db_, stmts_,
                                 "SELECT " GT_SS_CAMPAIGN_COLS
                                 " FROM campaigns ORDER BY created_ms, name"));
  std::vector<CampaignRow> out;
  while (true) {
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadCampaign(s, false));
  }
  return out;
}

absl::StatusOr<std::vector<HolderRow>> StateStore::ListHolders(
    const std::string& campaign) {
  absl::MutexLock lock(&mu_);
  // One read transaction, so the existence check and the rows agree.
  std::vector<HolderRow> out;
  GT_RETURN_IF_ERROR(InTransaction(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_RETURN_IF_ERROR(LoadCampaign(campaign, false).status());
        GT_ASSIGN_OR_RETURN(
            Stmt s,
            Prepare(db_, stmts_,
                    "SELECT " GT_SS_HOLDER_COLS
                    " FROM holders WHERE campaign = ? ORDER BY position"));
        s.Text(campaign);
        while (true) {
          GT_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          out.push_back(ReadHolder(s));
        }
        return absl::OkStatus();
      },
      /*write=*/false));
  return out;
}

absl::StatusOr<std::vector<TripRow>> StateStore::ListTrips(
    const std::string& campaign) {
  absl::MutexLock lock(&mu_);
  std::vector<TripRow> out;
  GT_RETURN_IF_ERROR(InTransaction(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_RETURN_IF_ERROR(LoadCampaign(campaign, false).status());
        GT_ASSIGN_OR_RETURN(
            out, QueryTrips("SELECT " GT_SS_TRIP_COLS
                            " FROM trips WHERE campaign = ? ORDER BY id",
                            &campaign));
        return absl::OkStatus();
      },
      /*write=*/false));
  return out;
}

absl::StatusOr<TripRow> StateStore::GetTrip(uint64_t trip_id) {
  absl::MutexLock lock(&mu_);
  return LoadTrip(trip_id);
}

absl::StatusOr<EventSeqs> StateStore::SetCampaignState(
    const std::string& name, const std::string& state, const std::string& error,
    const std::string& message) {
  const std::optional<CampaignState> to = CampaignStateFromString(state);
  if (!to.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "campaign ", Quote(name), ": unknown state ", Quote(state)));
  }
  absl::MutexLock lock(&mu_);
  EventSeqs seqs;
  GT_RETURN_IF_ERROR(
      InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(name, false));
        const std::optional<CampaignState> from = CampaignStateFromString(c.state);
        if (from.has_value() && !CanMoveCampaign(*from, *to)) {
          return absl::FailedPreconditionError(
              absl::StrCat("campaign ", Quote(name), " is already ", c.state,
                           " and cannot become ", state));
        }
        const int64_t now = NowMs();
        {
          GT_ASSIGN_OR_RETURN(
              Stmt s, Prepare(db_, stmts_,
                              "UPDATE campaigns SET state = ?, error = ?, "
                              "updated_ms = ? WHERE name = ?"));
          s.Text(state).Text(error).Int(now).Text(name);
          GT_RETURN_IF_ERROR(s.Run());
        }
        EventRow e;
        e.campaign = name;
        e.kind = "campaign_state";
        e.step = state;
        e.message = message.empty() || error.empty()
                        ? absl::StrCat(message, error)
                        : absl::StrCat(message, ": ", error);
        e.time_ms = now;
        GT_ASSIGN_OR_RETURN(int64_t seq, InsertEvent(e));
        seqs.push_back(seq);
        return absl::OkStatus();
      }));
  return seqs;
}

absl::StatusOr<EventSeqs> StateStore::SetCampaignBuffer(const std::string& name,
                                                        uint64_t buffer_id,
                                                        const std::string& gpu_serial) {
  absl::MutexLock lock(&mu_);
  EventSeqs seqs;
  GT_RETURN_IF_ERROR(InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                          mu_) -> absl::Status {
    GT_RETURN_IF_ERROR(LoadCampaign(name, false).status());
    const int64_t now = NowMs();
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "UPDATE campaigns SET buffer_id = ?, buffer_gpu_serial = ?, "
                          "updated_ms = ? WHERE name = ?"));
      s.U64(buffer_id).Text(buffer_id == 0 ? "" : gpu_serial).Int(now).Text(name);
      GT_RETURN_IF_ERROR(s.Run());
    }
    EventRow e;
    e.campaign = name;
    e.kind = "buffer";
    e.message = buffer_id == 0 ? "device buffer released"
                               : gpu_serial.empty()
                                   ? absl::StrCat("device buffer ", buffer_id)
                                   : absl::StrCat("device buffer ", buffer_id, " on GPU ",
                                                  gpu_serial);
    e.time_ms = now;
    GT_ASSIGN_OR_RETURN(int64_t seq, InsertEvent(e));
    seqs.push_back(seq);
    return absl::OkStatus();
  }));
  return seqs;
}

// ---------------------------------------------------------------------------
// Trips.

absl::StatusOr<EventSeqs> StateStore::BeginTrip(const TripRow& t) {
  if (t.id == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(t.campaign),
                     ": trip id 0; take the id from NextTripId()"));
  }
  if (t.window_length == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(TripName(t), ": empty dataset window"));
  }
  absl::MutexLock lock(&mu_);
  EventSeqs seqs;
  GT_RETURN_IF_ERROR(InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                          mu_) -> absl::Status {
    {
      // Fencing tokens are only safe if they were issued by the counter.
      GT_ASSIGN_OR_RETURN(
          Stmt s,
          Prepare(db_, stmts_, "SELECT value FROM counters WHERE name = ?"));
      s.Text(kTripCounter);
      GT_ASSIGN_OR_RETURN(bool row, s.Step());
      uint64_t issued = row ? s.ColU64(0) : 0;
      if (t.id > issued) {
        return absl::InvalidArgumentError(absl::StrCat(
            TripName(t), ": id was never issued by NextTripId (latest ", issued,
            ")"));
      }
    }
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s,
          Prepare(db_, stmts_, "SELECT campaign FROM trips WHERE id = ?"));
      s.U64(t.id);
      GT_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) {
        return absl::AlreadyExistsError(
            absl::StrCat("trip ", t.id, " already exists in campaign ",
                         Quote(s.ColText(0)), "; take a new id"));
      }
    }
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(t.campaign, false));
    if (c.state != kCampaignRunning) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quote(c.name), " is ", c.state,
                       ", not running; trip ", t.id, " cannot start"));
    }
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(t.campaign, t.holder));
    if (h.state != kHolderActive) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t), ": holder is ", h.state, ", not active"));
    }
    if (t.window_offset > h.dataset_bytes ||
        t.window_length > h.dataset_bytes - t.window_offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          TripName(t), ": window [", t.window_offset, ", +", t.window_length,
          ") exceeds the holder's dataset of ", h.dataset_bytes, " bytes"));
    }
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "SELECT id, step FROM trips WHERE campaign = ? AND "
                          "step NOT IN ('done', 'aborted') LIMIT 1"));
      s.Text(t.campaign);
      GT_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) {
        return absl::FailedPreconditionError(
            absl::StrCat("campaign ", Quote(t.campaign), " still has trip ",
                         s.ColInt(0), " at step ", s.ColText(1),
                         "; finish or abort it before trip ", t.id));
      }
    }
    const int64_t now = NowMs();
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "INSERT INTO trips (id, campaign, holder, "
                          "window_offset, window_length, round, step, "
                          "started_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
      s.U64(t.id)
          .Text(t.campaign)
          .Text(t.holder)
          .U64(t.window_offset)
          .U64(t.window_length)
          .Int(t.round)
          .Text(kStepPlanned)
          .Int(now);
      GT_RETURN_IF_ERROR(s.Run());
    }
    {
      GT_ASSIGN_OR_RETURN(Stmt s,
                             Prepare(db_, stmts_,
                                     "UPDATE campaigns SET last_holder = ?, "
                                     "updated_ms = ? WHERE name = ?"));
      s.Text(t.holder).Int(now).Text(t.campaign);
      GT_RETURN_IF_ERROR(s.Run());
    }
    EventRow e;
    e.campaign = t.campaign;
    e.trip = t.id;
    e.kind = "trip_started";
    e.step = kStepPlanned;
    e.message =
        absl::StrCat("holder ", Quote(t.holder), " window [", t.window_offset,
                     ", +", t.window_length, ") round ", t.round);
    e.bytes = t.window_length;
    e.time_ms = now;
    GT_ASSIGN_OR_RETURN(int64_t seq, InsertEvent(e));
    seqs.push_back(seq);
    return absl::OkStatus();
  }, true, Durability::kLazy));
  return seqs;
}

absl::StatusOr<int64_t> StateStore::MoveStepLocked(
    const TripRow& t, TripStep to, const std::string& message,
    const std::optional<TripCounterWindow>& window) {
  const std::string step = ToString(to);
  const std::optional<TripStep> from = TripStepFromString(t.step);
  if (from.has_value() && !CanFinish(*from)) {
    return absl::FailedPreconditionError(
        absl::StrCat(TripName(t), " already finished (", t.step,
                     "); it cannot move to ", step));
  }
  if (from.has_value() && !CanCommitStep(*from, to)) {
    return absl::FailedPreconditionError(
        absl::StrCat(TripName(t), " is at step ", t.step,
                     "; steps only move forward, not back to ", step));
  }
  const int64_t now = NowMs();
  {
    GT_ASSIGN_OR_RETURN(
        Stmt s,
        Prepare(db_, stmts_, "UPDATE trips SET step = ? WHERE id = ?"));
    s.Text(step).U64(t.id);
    GT_RETURN_IF_ERROR(s.Run());
  }
  if (window.has_value()) {
    GT_ASSIGN_OR_RETURN(
        Stmt s, Prepare(db_, stmts_,
                        "UPDATE trips SET gpu_session = ?, first_counter = ?, "
                        "counter_count = ?, gpu_serial = ? WHERE id = ?"));
    s.U64(window->gpu_session)
        .Int(window->first)
        .Int(window->count)
        .Text(window->gpu_serial)
        .U64(t.id);
    GT_RETURN_IF_ERROR(s.Run());
  }
  EventRow e;
  e.campaign = t.campaign;
  e.trip = t.id;
  e.kind = "step";
  e.step = step;
  e.message = message;
  e.time_ms = now;
  return InsertEvent(e);
}

absl::StatusOr<EventSeqs> StateStore::SetTripStep(
    uint64_t trip_id, const std::string& step, const std::string& message,
    const std::optional<TripCounterWindow>& window) {
  const std::optional<TripStep> to = TripStepFromString(step);
  if ((step == kStepRouteOut) != window.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": the counter window is recorded with step route_out",
        " (before the GPU leaves), and only there"));
  }
  if (!to.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": unknown step ", Quote(step)));
  }
  if (IsFinal(*to)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": step ", step,
                     " is set by FinishTrip, which also counts the trip"));
  }
  absl::MutexLock lock(&mu_);
  EventSeqs seqs;
  GT_RETURN_IF_ERROR(
      InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(trip_id));
        GT_ASSIGN_OR_RETURN(int64_t seq, MoveStepLocked(t, *to, message, window));
        seqs.push_back(seq);
        return absl::OkStatus();
      }, true, step == kStepRouteOut ? Durability::kFlush : Durability::kLazy));
  return seqs;
}

absl::StatusOr<EventSeqs> StateStore::RecordProvisioned(uint64_t trip_id,
                                                        uint64_t bytes,
                                                        uint64_t chunks,
                                                        double seconds,
                                                        bool digest_match,
                                                        const char* then_step,
                                                        const std::string& then_message) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": provisioning time ", seconds, " is not valid"));
  }
  std::optional<TripStep> then;
  if (then_step != nullptr) {
    then = TripStepFromString(then_step);
    if (then != StepAfterProvisioned(true) && then != StepAfterProvisioned(false)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trip ", trip_id, ": after the provisioning report a trip moves to ",
          ToString(StepAfterProvisioned(true)), " or ", ToString(StepAfterProvisioned(false)),
          ", not ", Quote(then_step)));
    }
  }
  absl::MutexLock lock(&mu_);
  EventSeqs seqs;
  GT_RETURN_IF_ERROR(
      InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(trip_id));
        const std::optional<TripStep> at = TripStepFromString(t.step);
        if (!at.has_value() || !AcceptsProvisioningReport(*at)) {
          return absl::FailedPreconditionError(absl::StrCat(
              TripName(t), " is at step ", t.step,
              "; a provisioning report belongs to steps provision..rekey"));
        }
        const int64_t now = NowMs();
        {
          GT_ASSIGN_OR_RETURN(
              Stmt s, Prepare(db_, stmts_,
                              "UPDATE trips SET bytes = ?, chunks = ?, "
                              "provision_seconds = ?, digest_match = ? "
                              "WHERE id = ?"));
          s.U64(bytes).U64(chunks).Real(seconds).Int(digest_match).U64(trip_id);
          GT_RETURN_IF_ERROR(s.Run());
        }
        EventRow e;
        e.campaign = t.campaign;
        e.trip = trip_id;
        e.kind = "provisioned";
        e.step = t.step;
        e.message = absl::StrCat(chunks, " chunks in ", seconds, " s, digest ",
                                 digest_match ? "matches" : "MISMATCH");
        e.bytes = bytes;
        e.time_ms = now;
        GT_ASSIGN_OR_RETURN(int64_t seq, InsertEvent(e));
        seqs.push_back(seq);
        if (then.has_value()) {
          GT_ASSIGN_OR_RETURN(int64_t step_seq,
                                 MoveStepLocked(t, *then, then_message, std::nullopt));
          seqs.push_back(step_seq);
        }
        return absl::OkStatus();
      }, true, Durability::kLazy));
  return seqs;
}

absl::StatusOr<EventSeqs> StateStore::RecordTrained(
    uint64_t trip_id, double loss, std::optional<double> eval_loss,
    const std::string& model_blob) {
  if (!std::isfinite(loss) || (eval_loss.has_value() && !std::isfinite(*eval_loss))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": the ", std::isfinite(loss) ? "held-out loss" : "training loss",
        " is not finite; training diverged, finish the trip failed instead "
        "of checkpointing it (the error is served: it names no loss)"));
  }
  absl::MutexLock lock(&mu_);
  EventSeqs seqs;
  GT_RETURN_IF_ERROR(InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                          mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(trip_id));
    if (t.trained) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t),
                       " was already trained and checkpointed; a window is "
                       "never trained twice"));
    }
    if (t.step != ToString(kStepOfTraining)) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t), " is at step ", t.step,
                       ", not train; commit step train before training"));
    }
    // What may be reported: the block of trained windows since the last
    // report, this one included, under the campaign's terms.
    v1::TrainingTerms terms = Strictest(v1::TrainingTerms(), {});
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_, "SELECT terms FROM campaigns WHERE name = ?"));
      s.Text(t.campaign);
      GT_ASSIGN_OR_RETURN(bool row, s.Step());
      const std::string blob = row ? s.ColBlob(0) : std::string();
      if (!blob.empty() && !terms.ParseFromString(blob)) {
        return absl::DataLossError(absl::StrCat(
            "campaign ", Quote(t.campaign), ": its training terms in ", path_,
            " cannot be parsed"));
      }
    }
    // The block counts windows per holder: a co-holder's windows (whose
    // losses it and the operator can work out) must not stand in for
    // another holder's, so the block is reported only once every holder
    // that trained in it has trained min_windows_per_loss windows in it.
    std::vector<double> block;
    std::map<std::string, uint64_t> windows_of;
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "SELECT loss, holder FROM trips WHERE campaign = ? AND trained = 1 "
                          "AND id > (SELECT COALESCE(MAX(id), 0) FROM trips "
                          "WHERE campaign = ? AND reported_loss IS NOT NULL) "
                          "ORDER BY id"));
      s.Text(t.campaign).Text(t.campaign);
      for (;;) {
        GT_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        block.push_back(s.ColReal(0));
        ++windows_of[s.ColText(1)];
      }
    }
    block.push_back(loss);
    ++windows_of[t.holder];
    bool every_holder_filled = true;
    for (const auto& [holder, n] : windows_of) {
      every_holder_filled &= n >= std::max<uint64_t>(1, terms.min_windows_per_loss());
    }
    const std::optional<double> reported =
        every_holder_filled ? ReportedLoss(block, terms) : std::nullopt;
    std::optional<double> reported_eval;
    if (reported && eval_loss) reported_eval = RoundLoss(*eval_loss, terms.loss_decimals());
    const int64_t now = NowMs();
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "UPDATE trips SET loss = ?, eval_loss = ?, reported_loss = ?, "
                          "reported_eval_loss = ?, trained = 1, step = ? WHERE id = ?"));
      s.Real(loss).OptReal(eval_loss).OptReal(reported).OptReal(reported_eval)
          .Text(ToString(StepAfterTrained())).U64(trip_id);
      GT_RETURN_IF_ERROR(s.Run());
    }
    if (reported) {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "UPDATE campaigns SET model = ?, last_loss = ?, last_eval_loss = ?, "
                          "updated_ms = ? WHERE name = ?"));
      s.BlobRef(model_blob).OptReal(reported).OptReal(reported_eval).Int(now).Text(t.campaign);
      GT_RETURN_IF_ERROR(s.Run());
    } else {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "UPDATE campaigns SET model = ?, updated_ms = ? WHERE name = ?"));
      s.BlobRef(model_blob).Int(now).Text(t.campaign);
      GT_RETURN_IF_ERROR(s.Run());
    }
    EventRow trained;
    trained.campaign = t.campaign;
    trained.trip = trip_id;
    trained.kind = "trained";
    trained.step = kStepTrain;
    trained.message =
        reported ? absl::StrCat("checkpoint of ", model_blob.size(), " bytes; loss over the last ",
                                block.size(), " trained windows")
                 : absl::StrCat("checkpoint of ", model_blob.size(), " bytes; loss reported per ",
                                terms.min_windows_per_loss(), " windows of each holder (",
                                block.size(), " so far)");
    trained.bytes = t.window_length;
    trained.loss = reported;
    trained.eval_loss = reported_eval;
    trained.time_ms = now;
    GT_ASSIGN_OR_RETURN(int64_t seq1, InsertEvent(trained));
    seqs.push_back(seq1);
    EventRow step;
    step.campaign = t.campaign;
    step.trip = trip_id;
    step.kind = "step";
    step.step = ToString(StepAfterTrained());
    step.message = "scrub after training";
    step.time_ms = now;
    GT_ASSIGN_OR_RETURN(int64_t seq2, InsertEvent(step));
    seqs.push_back(seq2);
    return absl::OkStatus();
  }));
  return seqs;
}

absl::StatusOr<EventSeqs> StateStore::FinishTrip(uint64_t trip_id,
                                                 const TripFinish& f) {
  const bool ok = f.outcome == kOutcomeOk;
  if (!ok && f.outcome != kOutcomeFailed && f.outcome != kOutcomeAborted) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": unknown outcome ", Quote(f.outcome)));
  }
  if (ok && !(f.scrub_verified && f.rekeyed)) {
    // P2/P3: a trip whose buffer was not verifiably scrubbed or whose holder
    // key is not yet dead is not a success, whatever else happened.
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id,
                     " cannot finish ok without a verified scrub and a "
                     "re-key; finish it failed"));
  }
  if (f.advance_cursor && !ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": only an ok trip advances the holder's cursor"));
  }
  if (f.fail_holder && ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": an ok trip cannot fail its holder"));
  }
  absl::MutexLock lock(&mu_);
  EventSeqs seqs;
  GT_RETURN_IF_ERROR(InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                                          mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(trip_id));
    const std::optional<TripStep> from = TripStepFromString(t.step);
    if (from.has_value() && !CanFinish(*from)) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t), " already finished with outcome ",
                       t.outcome, "; every trip is counted once"));
    }
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(t.campaign, false));
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(t.campaign, t.holder));
    const std::string final_step = ToString(FinalStep(f.outcome == kOutcomeAborted));
    const int64_t now = NowMs();
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "UPDATE trips SET step = ?, outcome = ?, error = ?, "
                          "scrub_verified = ?, rekeyed = ?, ended_ms = ?, "
                          "duration_us = ? WHERE id = ?"));
      s.Text(final_step)
          .Text(f.outcome)
          .Text(f.error)
          .Int(f.scrub_verified)
          .Int(f.rekeyed)
          .Int(now)
          .Int(std::max<int64_t>(0, f.duration_us))
          .U64(trip_id);
      GT_RETURN_IF_ERROR(s.Run());
    }

    const std::string old_holder_state = h.state;
    if (ok) {
      h.trips += 1;
      h.bytes += t.bytes;
      if (f.advance_cursor) {
        if (h.state != kHolderActive) {
          return absl::FailedPreconditionError(
              absl::StrCat(TripName(t), ": holder is ", h.state,
                           "; its cursor no longer moves"));
        }
        // The window must be the one at the cursor: otherwise it was already
        // counted (or skipped), and moving on would lose or repeat data.
        if (t.window_offset != h.cursor_offset || t.round != h.round) {
          return absl::FailedPreconditionError(absl::StrCat(
              TripName(t), " covers offset ", t.window_offset, " of round ",
              t.round, " but the holder's cursor is at offset ",
              h.cursor_offset, " of round ", h.round,
              "; the window does not advance the cursor"));
        }
        // The schedule's own bookkeeping (schedule.h), the one the engine
        // plans with: a window reaching the end completes a pass.
        const HolderProgress next = AdvanceProgress(
            HolderProgress{h.dataset_bytes, h.cursor_offset, h.round, true}, t.window_length);
        h.cursor_offset = next.cursor_offset;
        h.round = next.round;
        if (HolderFinished(next, c.rounds)) h.state = kHolderDone;
      }
    } else if (f.fail_holder) {
      h.state = kHolderFailed;
      h.error = f.error.empty() ? absl::StrCat("trip ", trip_id, " ", f.outcome)
                                : f.error;
    }
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "UPDATE holders SET cursor_offset = ?, round = ?, "
                          "state = ?, error = ?, trips = ?, bytes = ? "
                          "WHERE campaign = ? AND name = ?"));
      s.U64(h.cursor_offset)
          .Int(h.round)
          .Text(h.state)
          .Text(h.error)
          .Int(h.trips)
          .U64(h.bytes)
          .Text(h.campaign)
          .Text(h.name);
      GT_RETURN_IF_ERROR(s.Run());
    }
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, Prepare(db_, stmts_,
                          "UPDATE campaigns SET trips_ok = trips_ok + ?, "
                          "trips_failed = trips_failed + ?, "
                          "trips_aborted = trips_aborted + ?, "
                          "bytes_provisioned = bytes_provisioned + ?, "
                          "updated_ms = ? WHERE name = ?"));
      s.Int(ok ? 1 : 0)
          .Int(f.outcome == kOutcomeFailed ? 1 : 0)
          .Int(f.outcome == kOutcomeAborted ? 1 : 0)
          .U64(ok ? t.bytes : 0)
          .Int(now)
          .Text(t.campaign);
      GT_RETURN_IF_ERROR(s.Run());
    }

    EventRow e;
    e.campaign = t.campaign;
    e.trip = trip_id;
    e.kind = "trip_finished";
    e.step = final_step;
    e.message =
        f.error.empty() ? f.outcome : absl::StrCat(f.outcome, ": ", f.error);
    e.bytes = t.bytes;
    e.loss = t.reported_loss;
    e.eval_loss = t.reported_eval_loss;
    e.time_ms = now;
    GT_ASSIGN_OR_RETURN(int64_t seq, InsertEvent(e));
    seqs.push_back(seq);
    if (h.state != old_holder_state) {
      EventRow he;
      he.campaign = t.campaign;
      he.trip = trip_id;
      he.kind = "holder_state";
      he.step = h.state;
      he.message = h.state == kHolderDone
                       ? absl::StrCat("holder ", Quote(h.name),
                                      " completed its ", h.round, " rounds")
                       : absl::StrCat("holder ", Quote(h.name), ": ", h.error);
      he.time_ms = now;
      GT_ASSIGN_OR_RETURN(int64_t hseq, InsertEvent(he));
      seqs.push_back(hseq);
    }
    return absl::OkStatus();
  }));
  return seqs;
}

absl::StatusOr<std::vector<TripRow>> StateStore::UnfinishedTrips() {
  absl::MutexLock lock(&mu_);
  return QueryTrips("SELECT " GT_SS_TRIP_COLS
                    " FROM trips WHERE step NOT IN ('done', 'aborted') "
                    "ORDER BY id",
                    nullptr);
}

absl::StatusOr<EventSeqs> StateStore::MarkHolderState(
    const std::string& campaign, const std::string& holder,
    const std::string& state, const std::string& error) {
  if (!IsHolderState(state)) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(campaign), ", holder ", Quote(holder),
                     ": unknown holder state ", Quote(state)));
  }
  absl::MutexLock lock(&mu_);
  EventSeqs seqs;
  GT_RETURN_IF_ERROR(
      InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_RETURN_IF_ERROR(LoadHolder(campaign, holder).status());
        const int64_t now = NowMs();
        {
          GT_ASSIGN_OR_RETURN(
              Stmt s, Prepare(db_, stmts_,
                              "UPDATE holders SET state = ?, error = ? "
                              "WHERE campaign = ? AND name = ?"));
          s.Text(state).Text(error).Text(campaign).Text(holder);
          GT_RETURN_IF_ERROR(s.Run());
        }
        EventRow e;
        e.campaign = campaign;
        e.kind = "holder_state";
        e.step = state;
        e.message = error.empty()
                        ? absl::StrCat("holder ", Quote(holder))
                        : absl::StrCat("holder ", Quote(holder), ": ", error);
        e.time_ms = now;
        GT_ASSIGN_OR_RETURN(int64_t seq, InsertEvent(e));
        seqs.push_back(seq);
        return absl::OkStatus();
      }));
  return seqs;
}

// ---------------------------------------------------------------------------
// Events.

absl::StatusOr<int64_t> StateStore::AppendEvent(const EventRow& e) {
  if (e.kind.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("event for campaign ", Quote(e.campaign), " has no kind"));
  }
  absl::MutexLock lock(&mu_);
  int64_t seq = 0;
  GT_RETURN_IF_ERROR(
      InTransaction([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_ASSIGN_OR_RETURN(seq, InsertEvent(e));
        return absl::OkStatus();
      }, true, Durability::kLazy));
  return seq;
}

absl::StatusOr<std::vector<EventRow>> StateStore::EventsAfter(
    const std::string& campaign, int64_t after_seq, int limit) {
  if (limit <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("events of campaign ",
                                                   Quote(campaign), ": limit ",
                                                   limit, " must be positive"));
  }
  absl::MutexLock lock(&mu_);
  const char* sql =
      campaign.empty()
          ? "SELECT " GT_SS_EVENT_COLS
            " FROM events WHERE seq > ? ORDER BY seq LIMIT ?"
          : "SELECT " GT_SS_EVENT_COLS
            " FROM events WHERE campaign = ? AND seq > ? ORDER BY seq LIMIT ?";
  GT_ASSIGN_OR_RETURN(Stmt s, Prepare(db_, stmts_, sql));
  if (!campaign.empty()) s.Text(campaign);
  s.Int(after_seq).Int(limit);
  std::vector<EventRow> out;
  while (true) {
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(ReadEvent(s));
  }
  return out;
}

absl::StatusOr<int64_t> StateStore::LastEventSeq() {
  absl::MutexLock lock(&mu_);
  GT_ASSIGN_OR_RETURN(
      Stmt s, Prepare(db_, stmts_, "SELECT COALESCE(MAX(seq), 0) FROM events"));
  GT_ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.ColInt(0) : 0;
}

}  // namespace gputravel
