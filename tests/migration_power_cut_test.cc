// Power cut while the orchestrator migrates its state database (P7): a
// campaign ("before") completes, its trips trained a sealed checkpoint; the
// orchestrator is stopped and its database taken back to an older schema,
// as an older orchestrator left it: version 7 (the trips without version
// 8's columns) and version 5 (also the holders and campaigns tables with
// their version-5 CHECKs). Started on it, the orchestrator migrates it to
// version 8 in one transaction (orchestrator/state_schema.cc: columns
// added; from 5, both tables rebuilt) and serves. The power is cut at each
// sync it asks for until it served and made its first commit after the
// migration's (a first run counts them; tests/power_cut_image.h says what
// a cut drops). Whatever the disk kept must be the old database or the
// migrated one, never a mix of the two (the version, the trips' columns
// and both tables' CHECKs agree; no rebuild's table left over), the old one
// up to the migration's commit and the migrated one after it, holding every
// campaign, holder, trip, outcome, event, attestation record and the
// checkpoint recorded before, each once, and a trip counter that never went
// back; restarted on it, the orchestrator serves at version 8, answers the
// old campaign's trips and outcomes as recorded, and a new campaign
// completes with every invariant of tests/crash_fixture.h, its trips
// numbered after the old ones.
#include <sqlite3.h>
#include <stdio.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/crash_fixture.h"
#include "tests/power_cut_daemon.h"
#include "tests/power_cut_image.h"
#include "tests/stack_campaign.h"
#include "util/files.h"

namespace gputravel {
namespace {

constexpr char kOrchestrator[] = "orchestrator";
// The campaign the old database holds; the fixture's own ("demo") runs
// after the migration, and CheckCrashInvariants checks it.
constexpr char kOld[] = "before";
// The current schema version (the test takes the database back to 7, the
// previous one, and to 5, whose migration rebuilds two tables).
constexpr int kNewVersion = 8;
// Cut runs at most (each one is a stack and two campaigns).
constexpr size_t kMostCuts = 8;

// Taking the database back to an older version, as the migrations would
// have left it: before schema 7 the campaigns table's CHECK has no
// "pausing", before schema 6 the holders table's none of "skipped" (each
// rebuilt as the migrations rebuild them the other way: rows copied into the
// old table, the current one dropped, the old one renamed, foreign keys
// off), and before schema 8 the trips have no external trainer's columns.
constexpr char kCampaignsBefore7[] = R"sql(
CREATE TABLE campaigns_old (
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
  last_holder TEXT NOT NULL DEFAULT '',
  buffer_gpu_serial TEXT NOT NULL DEFAULT '',
  terms BLOB NOT NULL DEFAULT x'',
  last_eval_loss REAL,
  model_trip INTEGER NOT NULL DEFAULT 0 CHECK (model_trip >= 0)
) STRICT;
INSERT INTO campaigns_old SELECT name, request_id, spec_json, gpu, rounds, state, error,
    buffer_id, model, created_ms, updated_ms, trips_ok, trips_failed, trips_aborted,
    bytes_provisioned, last_loss, last_holder, buffer_gpu_serial, terms, last_eval_loss,
    model_trip FROM campaigns;
DROP TABLE campaigns;
ALTER TABLE campaigns_old RENAME TO campaigns;
)sql";
constexpr char kHoldersBefore6[] = R"sql(
CREATE TABLE holders_old (
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
  attestation BLOB NOT NULL DEFAULT x'',
  PRIMARY KEY (campaign, name)
) STRICT;
INSERT INTO holders_old SELECT campaign, name, position, dataset_bytes, cursor_offset, round,
    state, error, trips, bytes, attestation FROM holders;
DROP TABLE holders;
ALTER TABLE holders_old RENAME TO holders;
)sql";
constexpr char kTripsBefore8[] = R"sql(
ALTER TABLE trips DROP COLUMN trainer_checkpoint;
ALTER TABLE trips DROP COLUMN trainer_tokens;
)sql";

// The script that takes a current database back to `version` (5 to 7), in
// one transaction.
std::string BackTo(int version) {
  return absl::StrCat("PRAGMA foreign_keys = OFF; BEGIN IMMEDIATE;",
                      version < 7 ? kCampaignsBefore7 : "", version < 6 ? kHoldersBefore6 : "",
                      kTripsBefore8, "PRAGMA user_version = ", version, "; COMMIT;");
}

// What the test reads of the database: every row of the old campaign that
// a migration must keep, each as one line of text (the blobs apart: the
// sealed checkpoint and the holders' attestation records).
constexpr char kCampaignRows[] =
    "SELECT group_concat(x, char(10)) FROM (SELECT name || '|' || request_id || '|' || "
    "length(spec_json) || '|' || gpu || '|' || rounds || '|' || state || '|' || error || '|' "
    "|| buffer_id || '|' || trips_ok || '|' || trips_failed || '|' || trips_aborted || '|' || "
    "bytes_provisioned || '|' || last_holder || '|' || buffer_gpu_serial || '|' || "
    "length(terms) || '|' || model_trip || '|' || length(model) AS x FROM campaigns "
    "WHERE name = 'before')";
constexpr char kHolderRows[] =
    "SELECT group_concat(x, char(10)) FROM (SELECT campaign || '|' || name || '|' || position "
    "|| '|' || dataset_bytes || '|' || cursor_offset || '|' || round || '|' || state || '|' || "
    "error || '|' || trips || '|' || bytes || '|' || length(attestation) AS x FROM holders "
    "WHERE campaign = 'before' ORDER BY name)";
constexpr char kTripRows[] =
    "SELECT group_concat(x, char(10)) FROM (SELECT id || '|' || campaign || '|' || holder || "
    "'|' || window_offset || '|' || window_length || '|' || round || '|' || step || '|' || "
    "outcome || '|' || error || '|' || bytes || '|' || digest_match || '|' || scrub_verified "
    "|| '|' || rekeyed || '|' || trained || '|' || gpu_session || '|' || first_counter || '|' "
    "|| counter_count || '|' || gpu_serial || '|' || length(attestation) AS x FROM trips "
    "WHERE campaign = 'before' ORDER BY id)";
constexpr char kEventRows[] =
    "SELECT group_concat(x, char(10)) FROM (SELECT seq || '|' || trip || '|' || kind || '|' || "
    "step || '|' || bytes || '|' || message AS x FROM events WHERE campaign = 'before' "
    "ORDER BY seq)";
constexpr char kBlobs[] =
    "SELECT (SELECT hex(model) || hex(terms) FROM campaigns WHERE name = 'before') || '|' || "
    "(SELECT group_concat(hex(attestation), '|') FROM (SELECT attestation FROM holders WHERE "
    "campaign = 'before' ORDER BY name)) || '|' || (SELECT group_concat(hex(attestation), '|') "
    "FROM (SELECT attestation FROM trips WHERE campaign = 'before' ORDER BY id))";

// A raw connection to the state database (as orchestrator/state_store_test.cc
// takes one): read-only unless `write`, so that reading a database the power
// cut left never checkpoints its WAL into it.
class RawDb {
 public:
  static absl::StatusOr<RawDb> Open(const std::string& path, bool write) {
    RawDb d;
    const int flags = write ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
    if (sqlite3_open_v2(path.c_str(), &d.db_, flags, nullptr) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat("cannot open ", path, ": ",
                                              d.db_ ? sqlite3_errmsg(d.db_) : "no memory"));
    }
    sqlite3_busy_timeout(d.db_, 10000);
    return d;
  }
  RawDb(RawDb&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  RawDb(const RawDb&) = delete;
  ~RawDb() { sqlite3_close(db_); }

  // Runs `sql` (statements separated by ';').
  absl::Status Exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      absl::Status s = absl::InternalError(absl::StrCat(sql, ": ", error ? error : "?"));
      sqlite3_free(error);
      return s;
    }
    return absl::OkStatus();
  }
  // The first column of the first row of `sql`, as text ("" for NULL or no row).
  absl::StatusOr<std::string> Text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat(sql, ": ", sqlite3_errmsg(db_)));
    }
    std::string out;
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(s, 0);
      out = t ? reinterpret_cast<const char*>(t) : "";
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
      return absl::InternalError(absl::StrCat(sql, ": ", sqlite3_errmsg(db_)));
    }
    return out;
  }

 private:
  RawDb() = default;
  sqlite3* db_ = nullptr;
};

// The shape of the schema: the version and what each migration from
// version 5 on changes. Old or migrated, never anything between.
struct Schema {
  std::string version;
  int trainer_columns = 0;   // schema 8: trips.trainer_checkpoint, trainer_tokens (of 2)
  bool skipped = false;      // schema 6: holders' CHECK allows "skipped"
  bool pausing = false;      // schema 7: campaigns' CHECK allows "pausing"
  std::string other_tables;  // a rebuild's table left over (none)

  // As `old_version` (5 to 7) left it.
  bool Old(int old_version) const {
    return version == std::to_string(old_version) && trainer_columns == 0 &&
           skipped == (old_version >= 6) && pausing == (old_version >= 7) &&
           other_tables.empty();
  }
  bool Migrated() const {
    return version == std::to_string(kNewVersion) && trainer_columns == 2 && skipped && pausing &&
           other_tables.empty();
  }
  std::string Describe() const {
    return absl::StrCat("user_version ", version, ", trainer columns ", trainer_columns,
                        " of 2, holders \"skipped\" ",
                        skipped ? "yes" : "no", ", campaigns \"pausing\" ",
                        pausing ? "yes" : "no", ", other tables [", other_tables, "]");
  }
};

// What the database holds of the old campaign, and its trip counter.
struct Recorded {
  std::string campaigns, holders, trips, events;
  std::string blobs;  // the checkpoint, the terms and the attestation records
  uint64_t trip_counter = 0;
  uint64_t events_count = 0;
  size_t trips_count = 0;
};

absl::StatusOr<Schema> ReadSchema(RawDb& db) {
  Schema out;
  auto v = db.Text("PRAGMA user_version");
  if (!v.ok()) return v.status();
  out.version = *v;
  auto cols = db.Text(
      "SELECT count(*) FROM pragma_table_info('trips') "
      "WHERE name IN ('trainer_checkpoint', 'trainer_tokens')");
  if (!cols.ok()) return cols.status();
  out.trainer_columns = std::stoi(*cols);
  auto holders = db.Text("SELECT sql FROM sqlite_schema WHERE name = 'holders'");
  if (!holders.ok()) return holders.status();
  out.skipped = holders->find("'skipped'") != std::string::npos;
  auto campaigns = db.Text("SELECT sql FROM sqlite_schema WHERE name = 'campaigns'");
  if (!campaigns.ok()) return campaigns.status();
  out.pausing = campaigns->find("'pausing'") != std::string::npos;
  auto other = db.Text(
      "SELECT group_concat(name) FROM sqlite_schema WHERE type = 'table' AND name NOT IN "
      "('counters', 'campaigns', 'holders', 'trips', 'events', 'sqlite_sequence')");
  if (!other.ok()) return other.status();
  out.other_tables = *other;
  return out;
}

absl::StatusOr<Recorded> ReadRecorded(RawDb& db) {
  Recorded r;
  for (auto [sql, out] : {std::pair<const char*, std::string*>{kCampaignRows, &r.campaigns},
                          {kHolderRows, &r.holders},
                          {kTripRows, &r.trips},
                          {kEventRows, &r.events},
                          {kBlobs, &r.blobs}}) {
    auto t = db.Text(sql);
    if (!t.ok()) return t.status();
    *out = *t;
  }
  auto counter = db.Text("SELECT value FROM counters WHERE name = 'trip'");
  if (!counter.ok()) return counter.status();
  r.trip_counter = std::stoull(counter->empty() ? "0" : *counter);
  auto events = db.Text("SELECT count(*) FROM events WHERE campaign = 'before'");
  if (!events.ok()) return events.status();
  r.events_count = std::stoull(*events);
  auto trips = db.Text("SELECT count(*) FROM trips WHERE campaign = 'before'");
  if (!trips.ok()) return trips.status();
  r.trips_count = std::stoull(*trips);
  return r;
}

// The schema and the old campaign's rows of the database at `path`, read
// without writing to it.
absl::Status Read(const std::string& path, Schema* schema, Recorded* recorded) {
  auto db = RawDb::Open(path, /*write=*/false);
  if (!db.ok()) return db.status();
  auto s = ReadSchema(*db);
  if (!s.ok()) return s.status();
  *schema = *s;
  auto r = ReadRecorded(*db);
  if (!r.ok()) return r.status();
  *recorded = *r;
  return absl::OkStatus();
}

// Expects that `now` holds everything `before` recorded, each once: the
// same rows of the old campaign, its events, and a trip counter that never
// went back.
void ExpectKept(const Recorded& before, const Recorded& now, const std::string& when) {
  EXPECT_EQ(now.campaigns, before.campaigns) << when << ": a campaign changed or was lost";
  EXPECT_EQ(now.holders, before.holders) << when << ": a holder changed or was lost";
  EXPECT_EQ(now.trips, before.trips) << when << ": a trip or its outcome changed or was lost";
  EXPECT_EQ(now.trips_count, before.trips_count) << when;
  EXPECT_EQ(now.events, before.events) << when << ": an event changed or was lost";
  EXPECT_EQ(now.events_count, before.events_count) << when;
  EXPECT_TRUE(now.blobs == before.blobs)
      << when << ": the checkpoint, the terms or an attestation record changed ("
      << before.blobs.size() << " hex digits before, " << now.blobs.size() << " now)";
  EXPECT_GE(now.trip_counter, before.trip_counter) << when << ": the trip counter went back";
}

// One stack whose orchestrator starts on an older database under the power
// cut.
struct Migration {
  int old_version = 0;
  CrashFixture f;
  power_cut::Config config;
  std::string db;
  Recorded before;  // what the old database held
};

// Starts the fixture (trips a, b, keeper), completes campaign "before" on
// it, stops its orchestrator, takes its database back to r->old_version
// and records what it holds, and starts it there under the preload with the
// power cut at sync `cut_at` (0: never). The status of that start: an
// error when the power was cut before it served.
absl::Status StartMigrationUnderPowerCut(Migration* r, const std::string& name, long cut_at) {
  absl::Status s = StartCrashFixture(&r->f, {}, {1u << 20, 1u << 20});
  if (!s.ok()) return s;
  {
    auto stub = r->f.stack->OperatorClient();
    grpc::Status g = CreateNamedCampaign(stub.get(), r->f.stack->CampaignSpec(), kOld);
    if (!g.ok()) return absl::InternalError("CreateCampaign: " + g.error_message());
    v1::Campaign c;
    g = ControlCampaign(stub.get(), "start", kOld, &c);
    if (!g.ok()) return absl::InternalError("StartCampaign: " + g.error_message());
  }
  auto c = r->f.stack->WaitForFinal(kOld, 120);
  if (!c.ok()) return c.status();
  if (c->state() != v1::COMPLETED) {
    return absl::InternalError("campaign " + std::string(kOld) + " ended " +
                               v1::CampaignState_Name(c->state()) + ": " + c->error());
  }
  const Deployment& d = r->f.stack->deployment();
  auto orch = ReadJsonFile(d.config_path(kOrchestrator));
  if (!orch.ok()) return orch.status();
  const std::string state_dir = orch->value("state_dir", "");
  const std::string key = orch->value("checkpoint_key_file", state_dir + "/checkpoint.key");
  r->db = state_dir + "/orchestrator.db";
  s = StopDaemon(&r->f, kOrchestrator);
  if (!s.ok()) return s;
  {
    auto db = RawDb::Open(r->db, /*write=*/true);
    if (!db.ok()) return db.status();
    auto sealed = db->Text("SELECT model_trip FROM campaigns WHERE name = 'before'");
    if (!sealed.ok()) return sealed.status();
    if (sealed->empty() || *sealed == "0") {
      return absl::InternalError("campaign before trained no checkpoint: the test's premise");
    }
    s = db->Exec(BackTo(r->old_version));
    if (!s.ok()) return s;
    auto orphans = db->Text("SELECT count(*) FROM pragma_foreign_key_check");
    if (!orphans.ok()) return orphans.status();
    if (*orphans != "0") return absl::InternalError("taking the database back broke a reference");
  }  // closed: the WAL is checkpointed into the database and removed
  Schema schema;
  s = Read(r->db, &schema, &r->before);
  if (!s.ok()) return s;
  if (!schema.Old(r->old_version)) {
    return absl::InternalError(absl::StrCat("not a version-", r->old_version,
                                            " database: ", schema.Describe()));
  }
  if (r->before.trips_count < 3 || r->before.events_count == 0) {
    return absl::InternalError(absl::StrCat("campaign before left ", r->before.trips_count,
                                            " trips and ", r->before.events_count, " events"));
  }
  auto config = PowerCutConfig("migration-" + name, {state_dir + "/orchestrator.", key}, cut_at);
  if (!config.ok()) return config.status();
  r->config = *config;
  return StartUnderPowerCut(&r->f, kOrchestrator, r->config);
}

// The serving orchestrator's database is migrated and holds everything
// recorded; the API answers the old campaign's trips and outcomes as
// recorded; a new campaign completes with every invariant, its trips after
// the old ones; the old campaign is still as recorded.
void CheckMigratedAndCompletes(Migration* r) {
  Schema schema;
  Recorded now;
  absl::Status s = Read(r->db, &schema, &now);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(schema.Migrated()) << schema.Describe();
  ExpectKept(r->before, now, "serving");
  const v1::Campaign old = GetStackCampaign(r->f.stack.get(), kOld, /*include_trips=*/true);
  EXPECT_EQ(old.state(), v1::COMPLETED);
  std::string trips;
  std::set<uint64_t> old_ids;
  for (const auto& t : old.trips()) {
    EXPECT_TRUE(old_ids.insert(t.id()).second) << "trip " << t.id() << " answered twice";
    trips += absl::StrCat(t.id(), ":", t.outcome(), " ");
  }
  EXPECT_EQ(old_ids.size(), r->before.trips_count) << trips;
  for (const auto& t : old.trips()) {
    EXPECT_NE(r->before.trips.find(absl::StrCat(t.id(), "|before|", t.holder(), "|")),
              std::string::npos)
        << "trip " << t.id() << " was not recorded before";
    EXPECT_EQ(t.outcome(), "ok") << "trip " << t.id();
  }
  s = CreateAndStartCampaign(r->f.stack.get(), "after-migration");
  ASSERT_TRUE(s.ok()) << s;
  auto c = r->f.stack->WaitForFinal("demo", 120);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckCrashInvariants(&r->f, *c, 0);
  for (const auto& t : c->trips()) {
    EXPECT_GT(t.id(), *old_ids.rbegin()) << "a new trip numbered among the old ones";
  }
  s = Read(r->db, &schema, &now);
  ASSERT_TRUE(s.ok()) << s;
  ExpectKept(r->before, now, "after a new campaign");
}

// Waits (up to `seconds`) until the serving orchestrator's database holds a
// trip counter past `before`'s: its GPU worker's first commit (the idle
// GPU's fencing token), which follows the migration's; whether it did.
bool AwaitFirstCommit(const Migration& r, double seconds) {
  for (int i = 0; i < static_cast<int>(seconds * 20); ++i) {
    Schema schema;
    Recorded now;
    if (Read(r.db, &schema, &now).ok() && now.trip_counter > r.before.trip_counter) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

class MigrationPowerCutTest : public ::testing::TestWithParam<int> {};

TEST_P(MigrationPowerCutTest, AtEverySyncOfAMigrationTheDatabaseIsOldOrMigratedAndLosesNothing) {
  const int old_version = GetParam();
  std::vector<SyncPoint> points;
  {
    Migration count;
    count.old_version = old_version;
    absl::Status s = StartMigrationUnderPowerCut(&count, "count", 0);
    ASSERT_TRUE(s.ok()) << s;
    // Serving: every sync so far was the migrating start's; the GPU
    // worker's first commit runs beside it, and is counted too.
    const size_t served = LoggedSyncs(count.f, count.config, "migration").size();
    ASSERT_TRUE(AwaitFirstCommit(count, 30)) << "the idle GPU's first commit never came";
    points = LoggedSyncs(count.f, count.config, "migration");
    for (size_t i = served; i < points.size(); ++i) points[i].after = "serving";
    std::printf("version %d: the old database holds %zu trips and %zu events of campaign "
                "before; %zu syncs until the orchestrator served, %zu until its first commit\n",
                old_version, count.before.trips_count,
                static_cast<size_t>(count.before.events_count), served, points.size());
    CheckMigratedAndCompletes(&count);
    StopCrashFixture(&count.f);
    if (HasFatalFailure()) return;
  }
  // The migration's commit and the first commit after it, at least.
  ASSERT_GE(points.size(), 2u);
  const std::vector<SyncPoint> chosen = ChooseSyncPoints(points, kMostCuts);
  int kept_old = 0, kept_migrated = 0;
  for (const SyncPoint& p : chosen) {
    SCOPED_TRACE("power cut at migration sync " + p.Describe());
    Migration r;
    r.old_version = old_version;
    absl::Status s = StartMigrationUnderPowerCut(&r, "sync-" + std::to_string(p.n), p.n);
    // Its GPU worker's first commit runs beside the start: the last sync
    // counted may come after it served, and is then cut there. Any earlier
    // one comes first.
    if (s.ok()) {
      ASSERT_EQ(p.n, points.back().n) << "the orchestrator served before its sync " << p.n;
      std::printf("the orchestrator served before its sync %ld (its first commit beside the "
                  "start); cut there\n",
                  p.n);
    } else {
      ASSERT_NE(r.before.trips_count, 0u) << "the old database was never made: " << s;
    }
    RestoreAfterCut(&r.f, kOrchestrator, r.config);
    if (HasFatalFailure()) return;
    ExpectCutAt(r.f, r.config, p);
    // What the disk kept: the old database or the migrated one, whole, and
    // once the migration was kept, at every later cut too.
    Schema kept;
    Recorded now;
    s = Read(r.db, &kept, &now);
    ASSERT_TRUE(s.ok()) << s;
    const bool old = kept.Old(old_version);
    EXPECT_TRUE(old || kept.Migrated()) << "a mix of the two schemas: " << kept.Describe();
    EXPECT_FALSE(old && kept_migrated > 0)
        << "an earlier sync's cut kept the migration, this later one did not";
    ++(old ? kept_old : kept_migrated);
    ExpectKept(r.before, now, "after the cut");
    s = r.f.stack->Restart(kOrchestrator);
    ASSERT_TRUE(s.ok()) << "the orchestrator does not start on what the disk kept ("
                        << kept.Describe() << "): " << s;
    CheckMigratedAndCompletes(&r);
    std::printf("version %d, migration cut at sync %s: the disk kept the %s database; "
                "restarted, migrated and completed\n",
                old_version, p.Describe().c_str(),
                old ? "old" : kept.Migrated() ? "migrated" : "MIXED");
    StopCrashFixture(&r.f);
    if (HasFatalFailure()) return;
  }
  // The cuts fell on both sides of the migration's commit.
  EXPECT_GT(kept_old, 0);
  EXPECT_GT(kept_migrated, 0);
}

// Version 7, the previous one (its migration adds the trips' columns), and
// version 5 (its migration rebuilds the holders and campaigns tables too).
INSTANTIATE_TEST_SUITE_P(FromOlderVersions, MigrationPowerCutTest, ::testing::Values(7, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "FromVersion" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace gputravel
