#include "orchestrator/state_store.h"
#include "proto/training.pb.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;

const absl::Status& AsStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& AsStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

#define ASSERT_OK(expr)                     \
  do {                                      \
    const auto& st_ = (expr);               \
    ASSERT_TRUE(st_.ok()) << AsStatus(st_); \
  } while (0)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  ASSERT_TRUE(tmp.ok()) << tmp.status();          \
  lhs = std::move(*tmp)
#define SS_TEST_CONCAT_INNER(a, b) a##b
#define SS_TEST_CONCAT(a, b) SS_TEST_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(SS_TEST_CONCAT(or_, __COUNTER__), lhs, expr)

EventRow Event(const std::string& campaign, uint64_t trip,
               const std::string& kind, const std::string& message) {
  EventRow e;
  e.campaign = campaign;
  e.trip = trip;
  e.kind = kind;
  e.message = message;
  return e;
}

// The campaign spec is opaque to the store; any text works.
CampaignRow Campaign(const std::string& name, const std::string& request_id,
                     uint32_t rounds = 1) {
  CampaignRow c;
  c.name = name;
  c.request_id = request_id;
  c.spec_json = absl::StrCat("{\"name\":\"", name, "\"}");
  c.gpu = "gpu0";
  c.rounds = rounds;
  // Every trip's loss reported at full precision, unless a test says else.
  v1::TrainingTerms terms;
  terms.set_min_windows_per_loss(1);
  terms.set_loss_decimals(6);
  c.terms = terms.SerializeAsString();
  return c;
}

std::vector<HolderRow> Holders(
    std::vector<std::pair<std::string, uint64_t>> hs) {
  std::vector<HolderRow> out;
  for (auto& [name, bytes] : hs) {
    HolderRow h;
    h.name = name;
    h.dataset_bytes = bytes;
    out.push_back(h);
  }
  return out;
}

// Creates `name` and sets it running, as the engine does before any trip.
absl::Status CreateRunning(StateStore& store, const std::string& name,
                           std::vector<HolderRow> holders,
                           uint32_t rounds = 1) {
  auto r = store.CreateCampaign(Campaign(name, "req-" + name, rounds), holders);
  if (!r.ok()) return r.status();
  return store.SetCampaignState(name, kCampaignRunning, "", "start").status();
}

// Runs one whole trip over [offset, offset+len) the way the engine does:
// each step committed before its (here imaginary) side effect.
absl::StatusOr<uint64_t> RunTrip(StateStore& store, const std::string& campaign,
                                 const std::string& holder, uint64_t offset,
                                 uint64_t len, uint32_t round,
                                 bool train = true) {
  auto id = store.NextTripId();
  if (!id.ok()) return id.status();
  TripRow t;
  t.id = *id;
  t.campaign = campaign;
  t.holder = holder;
  t.window_offset = offset;
  t.window_length = len;
  t.round = round;
  TripFinish f;
  f.outcome = kOutcomeOk;
  f.scrub_verified = true;
  f.rekeyed = true;
  f.advance_cursor = true;
  // Stops at the first refusal, as the engine would.
  std::vector<std::function<absl::StatusOr<EventSeqs>()>> steps = {
      [&] { return store.BeginTrip(t); },
      [&] {
        return store.SetTripStep(*id, kStepRouteOut, "",
                                 TripCounterWindow{*id, 1, 1});
      },
      [&] { return store.SetTripStep(*id, kStepProvision, ""); },
      [&] { return store.RecordProvisioned(*id, len, 1, 0.5, true); },
      [&] { return store.SetTripStep(*id, kStepRouteBack, ""); },
      [&] { return store.SetTripStep(*id, kStepRekey, ""); },
      [&] {
        return train ? store.SetTripStep(*id, kStepTrain, "")
                     : store.SetTripStep(*id, kStepScrub, "");
      },
      [&] {
        return train ? store.RecordTrained(*id, static_cast<double>(*id), std::nullopt,
                                           absl::StrCat("model-", *id))
                     : absl::StatusOr<EventSeqs>(EventSeqs{});
      },
      [&] { return store.FinishTrip(*id, f); },
  };
  for (auto& step : steps) {
    auto st = step();
    if (!st.ok()) return st.status();
  }
  return *id;
}

class StateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("state_store_test.");
    path_ = dir_ + "/state.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<StateStore> OpenOrDie() {
    auto s = StateStore::Open(path_, KeyPath());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // Runs one PRAGMA on a separate raw connection and returns its text answer.
  std::string RawPragma(const std::string& pragma) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db, pragma.c_str(), -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(s, 0);
      out = t ? reinterpret_cast<const char*>(t) : "";
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return out;
  }

  // Begins a trip of a 50-byte window of c1's holder h1.
  static absl::StatusOr<uint64_t> BeginTrip50(StateStore& store) {
    auto id = store.NextTripId();
    if (!id.ok()) return id.status();
    TripRow t;
    t.id = *id;
    t.campaign = "c1";
    t.holder = "h1";
    t.window_length = 50;
    auto begun = store.BeginTrip(t);
    if (!begun.ok()) return begun.status();
    return *id;
  }

  // Takes the database back to what version 3 wrote (before training terms,
  // held-out and reported losses, and attestation records).
  void DropVersion4Columns() {
    for (const char* col :
         {"eval_loss", "reported_loss", "reported_eval_loss", "attestation"}) {
      RawPragma(absl::StrCat("ALTER TABLE trips DROP COLUMN ", col));
    }
    RawPragma("ALTER TABLE campaigns DROP COLUMN terms");
    RawPragma("ALTER TABLE campaigns DROP COLUMN last_eval_loss");
    RawPragma("ALTER TABLE events DROP COLUMN eval_loss");
    RawPragma("ALTER TABLE holders DROP COLUMN attestation");
    DropVersion5Columns();
  }
  // Takes the database back to what version 4 wrote: the checkpoint in the
  // clear, with no trip bound to it.
  void DropVersion5Columns() {
    RawPragma("ALTER TABLE campaigns DROP COLUMN model_trip");
    DropVersion7Columns();
  }
  // Takes the database back to what version 6 wrote (no external trainer).
  void DropVersion7Columns() {
    RawPragma("ALTER TABLE trips DROP COLUMN trainer_checkpoint");
    RawPragma("ALTER TABLE trips DROP COLUMN trainer_tokens");
  }

  // The checkpoint key file beside the database, as the daemon keeps it.
  std::string KeyPath() const { return dir_ + "/checkpoint.key"; }

  // The database file and its WAL, as a copy of them would hold them.
  std::string DatabaseBytes() {
    std::string all;
    for (const std::string& f : {path_, path_ + "-wal"}) {
      std::ifstream in(f, std::ios::binary);
      all += std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    return all;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(StateStoreTest, CreatesSchemaAndStateSurvivesReopen) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}, {"h2", 50}})));
    ASSERT_OK(store->SetCampaignBuffer("c1", 7));
    ASSERT_OK(RunTrip(*store, "c1", "h1", 0, 40, 0));
  }
  EXPECT_EQ(RawPragma("PRAGMA user_version"),
            absl::StrCat(StateStore::kSchemaVersion));
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_EQ(c.request_id, "req-c1");
  EXPECT_EQ(c.state, kCampaignRunning);
  EXPECT_EQ(c.buffer_id, 7u);
  EXPECT_EQ(c.trips_ok, 1);
  EXPECT_EQ(c.bytes_provisioned, 40u);
  EXPECT_EQ(c.last_holder, "h1");
  EXPECT_EQ(*store->GetCheckpoint("c1"), "model-1");
  ASSERT_TRUE(c.last_loss.has_value());
  EXPECT_EQ(*c.last_loss, 1.0);
  ASSERT_OK_AND_ASSIGN(std::vector<HolderRow> hs, store->ListHolders("c1"));
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[0].name, "h1");
  EXPECT_EQ(hs[0].position, 0);
  EXPECT_EQ(hs[0].cursor_offset, 40u);
  EXPECT_EQ(hs[0].trips, 1);
  EXPECT_EQ(hs[1].name, "h2");
  EXPECT_EQ(hs[1].cursor_offset, 0u);
  ASSERT_OK_AND_ASSIGN(std::vector<TripRow> trips, store->ListTrips("c1"));
  ASSERT_EQ(trips.size(), 1u);
  EXPECT_EQ(trips[0].step, kStepDone);
  EXPECT_EQ(trips[0].outcome, kOutcomeOk);
  EXPECT_TRUE(trips[0].digest_match);
  EXPECT_TRUE(trips[0].scrub_verified);
  EXPECT_GT(trips[0].ended_ms, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<CampaignRow> all, store->ListCampaigns());
  ASSERT_EQ(all.size(), 1u);
}

TEST_F(StateStoreTest, UsesWalModeAndPrivateFile) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(store->NextTripId());
  EXPECT_EQ(RawPragma("PRAGMA journal_mode"), "wal");
  EXPECT_TRUE(std::filesystem::exists(path_ + "-wal"));
  auto perms = std::filesystem::status(path_).permissions();
  EXPECT_EQ(perms & (std::filesystem::perms::group_all |
                     std::filesystem::perms::others_all),
            std::filesystem::perms::none);
}

TEST_F(StateStoreTest, RefusesNewerSchemaVersion) {
  EXPECT_EQ(RawPragma(absl::StrCat("PRAGMA user_version = ", kStateSchemaVersion + 1)), "");
  auto store = StateStore::Open(path_, KeyPath());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(),
              HasSubstr(absl::StrCat("schema version ", kStateSchemaVersion + 1)));
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
}

// The counter window handed to the holder is recorded with route_out (and
// only there), the duration with FinishTrip; both read back.
TEST_F(StateStoreTest, RecordsCounterWindowAndDuration) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(uint64_t id, store->NextTripId());
  TripRow t;
  t.id = id;
  t.campaign = "c1";
  t.holder = "h1";
  t.window_length = 100;
  ASSERT_OK(store->BeginTrip(t));
  EXPECT_EQ(store->SetTripStep(id, kStepRouteOut, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK(store->SetTripStep(id, kStepRouteOut, "",
                               TripCounterWindow{42, 7, 3, "EMU-7"}));
  EXPECT_EQ(store->SetTripStep(id, kStepProvision, "", TripCounterWindow{42, 10, 1})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK(store->SetTripStep(id, kStepProvision, ""));
  ASSERT_OK(store->SetTripStep(id, kStepScrub, ""));
  TripFinish f;
  f.outcome = kOutcomeFailed;
  f.error = "test";
  f.duration_us = 4321;
  ASSERT_OK(store->FinishTrip(id, f));
  ASSERT_OK_AND_ASSIGN(TripRow got, store->GetTrip(id));
  EXPECT_EQ(got.gpu_session, 42u);
  EXPECT_EQ(got.first_counter, 7u);
  EXPECT_EQ(got.counter_count, 3u);
  EXPECT_EQ(got.gpu_serial, "EMU-7");
  EXPECT_EQ(got.duration_us, 4321);
}

// The GPU a campaign's buffer is on is recorded with it, and forgotten with
// it (P5: recovery scrubs, or takes as gone, only on that device).
TEST_F(StateStoreTest, RecordsTheGpuOfTheBuffer) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK(store->SetCampaignBuffer("c1", 7, "EMU-7"));
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_EQ(c.buffer_id, 7u);
  EXPECT_EQ(c.buffer_gpu_serial, "EMU-7");
  store.reset();
  store = OpenOrDie();
  ASSERT_OK_AND_ASSIGN(c, store->GetCampaign("c1"));
  EXPECT_EQ(c.buffer_gpu_serial, "EMU-7") << "durable";
  ASSERT_OK(store->SetCampaignBuffer("c1", 0, "EMU-7"));
  ASSERT_OK_AND_ASSIGN(c, store->GetCampaign("c1"));
  EXPECT_EQ(c.buffer_id, 0u);
  EXPECT_EQ(c.buffer_gpu_serial, "");
}

// A version-1 database (before the counter window and duration columns) is
// migrated in place; its rows survive with zeros in the new columns.
TEST_F(StateStoreTest, MigratesVersionOneInPlace) {
  uint64_t id = 0;
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
    ASSERT_OK_AND_ASSIGN(id, RunTrip(*store, "c1", "h1", 0, 40, 0));
  }
  // Take the database back to what version 1 wrote.
  for (const char* col :
       {"gpu_session", "first_counter", "counter_count", "duration_us", "gpu_serial"}) {
    RawPragma(absl::StrCat("ALTER TABLE trips DROP COLUMN ", col));
  }
  RawPragma("ALTER TABLE campaigns DROP COLUMN buffer_gpu_serial");
  DropVersion4Columns();
  RawPragma("PRAGMA user_version = 1");
  ASSERT_EQ(RawPragma("PRAGMA user_version"), "1");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RawPragma("PRAGMA user_version"), absl::StrCat(StateStore::kSchemaVersion));
  ASSERT_OK_AND_ASSIGN(TripRow old, store->GetTrip(id));
  EXPECT_EQ(old.outcome, kOutcomeOk);
  EXPECT_EQ(old.window_length, 40u);
  EXPECT_EQ(old.counter_count, 0u);
  EXPECT_EQ(old.duration_us, 0);
  // And the migrated database takes new trips with the new columns.
  ASSERT_OK_AND_ASSIGN(uint64_t next, RunTrip(*store, "c1", "h1", 40, 40, 0));
  ASSERT_OK_AND_ASSIGN(TripRow t, store->GetTrip(next));
  EXPECT_EQ(t.counter_count, 1u);
  // A campaign from before training terms reports under the default policy:
  // nothing after one window.
  EXPECT_FALSE(t.reported_loss.has_value());
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_TRUE(c.terms.empty());
}

// P1: a loss leaves only as its campaign's terms say: the rounded mean of a
// block of min_windows_per_loss trained windows, on the trip that completes
// the block (trip, campaign and events alike); every other trip's loss and
// held-out loss stay in the store.
TEST_F(StateStoreTest, ReportsLossesOnlyPerBlockOfTheTerms) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  CampaignRow c = Campaign("c1", "req-c1");
  v1::TrainingTerms terms;
  terms.set_min_windows_per_loss(3);
  terms.set_loss_decimals(2);
  c.terms = terms.SerializeAsString();
  ASSERT_OK(store->CreateCampaign(c, Holders({{"h1", 1000}})).status());
  ASSERT_OK(store->SetCampaignState("c1", kCampaignRunning, "", "start"));
  const double losses[] = {3.0, 2.0, 1.0049, 5.0, 5.0, 5.0, 9.0};
  std::vector<uint64_t> ids;
  for (int i = 0; i < 7; ++i) {
    ASSERT_OK_AND_ASSIGN(uint64_t id, store->NextTripId());
    TripRow t;
    t.id = id;
    t.campaign = "c1";
    t.holder = "h1";
    t.window_offset = i * 100;
    t.window_length = 100;
    ASSERT_OK(store->BeginTrip(t));
    ASSERT_OK(store->SetTripStep(id, kStepTrain, ""));
    ASSERT_OK(store->RecordTrained(id, losses[i], 4.0 - 0.123456 * i, "m"));
    TripFinish f;
    f.outcome = kOutcomeOk;
    f.scrub_verified = true;
    f.rekeyed = true;
    f.advance_cursor = true;
    ASSERT_OK(store->FinishTrip(id, f));
    ids.push_back(id);
    ASSERT_OK_AND_ASSIGN(CampaignRow now, store->GetCampaign("c1"));
    if (i < 2) {
      EXPECT_FALSE(now.last_loss.has_value()) << "trip " << i;
      EXPECT_FALSE(now.last_eval_loss.has_value()) << "trip " << i;
    }
  }
  std::vector<std::optional<double>> reported, reported_eval;
  for (uint64_t id : ids) {
    ASSERT_OK_AND_ASSIGN(TripRow t, store->GetTrip(id));
    EXPECT_TRUE(t.loss.has_value());
    EXPECT_TRUE(t.eval_loss.has_value());
    reported.push_back(t.reported_loss);
    reported_eval.push_back(t.reported_eval_loss);
  }
  const std::optional<double> none;
  EXPECT_EQ(reported, (std::vector<std::optional<double>>{none, none, 2.0, none, none, 5.0, none}));
  EXPECT_EQ(reported_eval,
            (std::vector<std::optional<double>>{none, none, 3.75, none, none, 3.38, none}));
  ASSERT_OK_AND_ASSIGN(CampaignRow after, store->GetCampaign("c1"));
  EXPECT_EQ(after.last_loss, std::optional<double>(5.0));
  EXPECT_EQ(after.last_eval_loss, std::optional<double>(3.38));
  // The events carry the reported values only.
  ASSERT_OK_AND_ASSIGN(auto events, store->EventsAfter("c1", 0, 1000));
  int with_loss = 0;
  for (const EventRow& e : events) {
    if (e.kind != "trained" && e.kind != "trip_finished") {
      EXPECT_FALSE(e.loss.has_value()) << e.kind;
      continue;
    }
    if (e.loss.has_value()) {
      with_loss += e.kind == "trained" ? 1 : 0;
      EXPECT_TRUE(*e.loss == 2.0 || *e.loss == 5.0) << *e.loss;
      EXPECT_TRUE(e.eval_loss.has_value());
    } else {
      EXPECT_FALSE(e.eval_loss.has_value());
    }
  }
  EXPECT_EQ(with_loss, 2);
}

// P1 against a co-holder: the terms' block counts windows of the campaign,
// so a holder that colludes with the operator can fill a block with its own
// windows (whose losses the operator can compute: it knows the seed and that
// holder's data) around one window of the victim, and the block's mean then
// tells the victim's loss alone. A block is reported only once every holder
// that trained in it has trained at least min_windows_per_loss windows in it.
TEST_F(StateStoreTest, ABlockReportsOnlyOnceEachOfItsHoldersFilledIt) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  CampaignRow c = Campaign("c1", "req-c1");
  v1::TrainingTerms terms;
  terms.set_min_windows_per_loss(4);
  terms.set_loss_decimals(2);
  c.terms = terms.SerializeAsString();
  ASSERT_OK(store->CreateCampaign(c, Holders({{"victim", 1000}, {"mole", 1000}})).status());
  ASSERT_OK(store->SetCampaignState("c1", kCampaignRunning, "", "start"));
  // The mole's windows first (their losses known to the operator), then one
  // of the victim's: 4 * mean - 3 * 1.0 would be the victim's own loss.
  const std::vector<std::pair<std::string, double>> trips = {
      {"mole", 1.0},   {"mole", 1.0},   {"mole", 1.0},   {"victim", 4.3},
      {"victim", 2.0}, {"victim", 2.0}, {"victim", 2.0}, {"mole", 1.0}};
  std::vector<std::optional<double>> reported;
  uint64_t offset[2] = {0, 0};
  for (const auto& [holder, loss] : trips) {
    uint64_t& off = offset[holder == "mole" ? 1 : 0];
    ASSERT_OK_AND_ASSIGN(uint64_t id, store->NextTripId());
    TripRow t;
    t.id = id;
    t.campaign = "c1";
    t.holder = holder;
    t.window_offset = off;
    t.window_length = 100;
    off += 100;
    ASSERT_OK(store->BeginTrip(t));
    ASSERT_OK(store->SetTripStep(id, kStepTrain, ""));
    ASSERT_OK(store->RecordTrained(id, loss, std::nullopt, "m"));
    TripFinish f;
    f.outcome = kOutcomeOk;
    f.scrub_verified = true;
    f.rekeyed = true;
    f.advance_cursor = true;
    ASSERT_OK(store->FinishTrip(id, f));
    ASSERT_OK_AND_ASSIGN(TripRow done, store->GetTrip(id));
    reported.push_back(done.reported_loss);
  }
  const std::optional<double> none;
  // Nothing until the victim and the mole each have 4 windows in the block;
  // then the mean of all 8 (14.3 / 8 = 1.7875).
  EXPECT_EQ(reported, (std::vector<std::optional<double>>{none, none, none, none, none, none,
                                                          none, 1.79}));
}

// A campaign that ran before the training terms existed served every trip's
// loss at full precision in its events and last_loss; after the migration
// the API serves only reported losses, old ones included.
TEST_F(StateStoreTest, MigrationStopsServingLossesReportedBeforeTheTerms) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
    ASSERT_OK(RunTrip(*store, "c1", "h1", 0, 40, 0).status());
  }
  // What version 3 wrote: the window's own loss on its events and campaign.
  RawPragma("UPDATE events SET loss = 2.718281828 WHERE kind IN ('trained', 'trip_finished')");
  RawPragma("UPDATE campaigns SET last_loss = 2.718281828");
  RawPragma("UPDATE trips SET reported_loss = NULL");
  DropVersion4Columns();
  RawPragma("PRAGMA user_version = 3");
  ASSERT_EQ(RawPragma("PRAGMA user_version"), "3");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_FALSE(c.last_loss.has_value());
  ASSERT_OK_AND_ASSIGN(auto events, store->EventsAfter("c1", 0, 1000));
  for (const EventRow& e : events) EXPECT_FALSE(e.loss.has_value()) << e.kind;
}

// A refused RecordTrained's message reaches the trip's error (API, events):
// it must not carry the window's own loss.
TEST_F(StateStoreTest, ANonFiniteHeldOutLossDoesNotPutTheWindowsLossInTheError) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(uint64_t id, store->NextTripId());
  TripRow t;
  t.id = id;
  t.campaign = "c1";
  t.holder = "h1";
  t.window_length = 40;
  ASSERT_OK(store->BeginTrip(t));
  ASSERT_OK(store->SetTripStep(id, kStepTrain, ""));
  auto r = store->RecordTrained(id, 2.718281828, std::numeric_limits<double>::quiet_NaN(), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()).find("2.718"), std::string::npos)
      << r.status().message();
}

TEST_F(StateStoreTest, RefusesForeignDatabase) {
  RawPragma("CREATE TABLE other (x)");
  auto store = StateStore::Open(path_, KeyPath());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("not an orchestrator"));
}

TEST_F(StateStoreTest, TripIdsAreMonotonicAcrossReopen) {
  uint64_t last = 0;
  for (int open = 0; open < 3; ++open) {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(uint64_t id, store->NextTripId());
      EXPECT_EQ(id, last + 1);
      last = id;
    }
  }
}

TEST_F(StateStoreTest, CreateCampaignIsIdempotentOnRequestId) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  auto holders = Holders({{"h1", 10}});
  ASSERT_OK_AND_ASSIGN(CreateResult first,
                       store->CreateCampaign(Campaign("c1", "r1"), holders));
  EXPECT_TRUE(first.created);
  ASSERT_EQ(first.event_seqs.size(), 1u);
  EXPECT_EQ(first.campaign.state, kCampaignCreated);

  // A client retry: the same row, nothing new.
  ASSERT_OK_AND_ASSIGN(CreateResult again,
                       store->CreateCampaign(Campaign("c1", "r1"), holders));
  EXPECT_FALSE(again.created);
  EXPECT_TRUE(again.event_seqs.empty());
  EXPECT_EQ(again.campaign.created_ms, first.campaign.created_ms);
  ASSERT_OK_AND_ASSIGN(int64_t last, store->LastEventSeq());
  EXPECT_EQ(last, first.event_seqs[0]);

  CampaignRow changed = Campaign("c1", "r1");
  changed.spec_json = "{\"name\":\"c1\",\"rounds\":2}";
  auto conflict = store->CreateCampaign(changed, holders);
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(conflict.status().message(), HasSubstr("\"r1\""));

  auto other = store->CreateCampaign(Campaign("c1", "r2"), holders);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(other.status().message(), HasSubstr("campaign \"c1\""));

  auto missing = store->GetCampaign("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("\"nope\""));
  EXPECT_EQ(store->GetCheckpoint("nope").status().code(), absl::StatusCode::kNotFound);
  auto missing_state = store->GetCampaignState("nope");
  EXPECT_EQ(missing_state.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing_state.status().message(), HasSubstr("\"nope\""));
  EXPECT_EQ(store->ListTrips("nope").status().code(),
            absl::StatusCode::kNotFound);

  auto dup = store->CreateCampaign(Campaign("c2", "r3"),
                                   Holders({{"h", 1}, {"h", 2}}));
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kInvalidArgument);
  // A refused create leaves nothing behind.
  EXPECT_EQ(store->GetCampaign("c2").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StateStoreTest, StepsMoveForwardWithEventsInOrder) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(int64_t before, store->LastEventSeq());
  ASSERT_OK_AND_ASSIGN(uint64_t id, store->NextTripId());
  TripRow t;
  t.id = id;
  t.campaign = "c1";
  t.holder = "h1";
  t.window_length = 25;
  std::vector<int64_t> returned;
  auto add = [&](const absl::StatusOr<EventSeqs>& seqs) {
    ASSERT_TRUE(seqs.ok()) << seqs.status();
    returned.insert(returned.end(), seqs->begin(), seqs->end());
  };
  add(store->BeginTrip(t));
  add(store->SetTripStep(id, kStepRouteOut, "to h1", TripCounterWindow{9, 5, 2}));
  add(store->SetTripStep(id, kStepProvision, ""));
  add(store->RecordProvisioned(id, 25, 2, 0.1, true));
  add(store->SetTripStep(id, kStepRouteBack, ""));
  // Backward moves and final steps are refused, and change nothing.
  EXPECT_EQ(store->SetTripStep(id, kStepProvision, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->SetTripStep(id, kStepDone, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->SetTripStep(id, "teleport", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  add(store->SetTripStep(id, kStepRekey, ""));
  add(store->SetTripStep(id, kStepScrub, ""));  // skipping train is allowed
  TripFinish f;
  f.outcome = kOutcomeOk;
  f.scrub_verified = true;
  f.rekeyed = true;
  f.advance_cursor = true;
  add(store->FinishTrip(id, f));

  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> events,
                       store->EventsAfter("c1", before, 100));
  std::vector<std::string> got;
  std::vector<int64_t> seqs;
  for (const EventRow& e : events) {
    got.push_back(absl::StrCat(e.kind, ":", e.step));
    seqs.push_back(e.seq);
    EXPECT_EQ(e.trip, id);
    EXPECT_GT(e.time_ms, 0);
  }
  EXPECT_THAT(
      got, ::testing::ElementsAre("trip_started:planned", "step:route_out",
                                  "step:provision", "provisioned:provision",
                                  "step:route_back", "step:rekey", "step:scrub",
                                  "trip_finished:done"));
  EXPECT_EQ(seqs, returned);
  for (size_t i = 1; i < seqs.size(); ++i) EXPECT_GT(seqs[i], seqs[i - 1]);
}

// Observers are told every committed event as stored, in commit order,
// never one rolled back, and no longer once removed.
TEST_F(StateStoreTest, ObserversAreToldEachCommittedEventAsStored) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  std::vector<EventRow> first, second;
  const int a = store->AddEventObserver([&](const EventRow& e) { first.push_back(e); });
  const int b = store->AddEventObserver([&](const EventRow& e) { second.push_back(e); });
  ASSERT_NE(a, b);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(uint64_t id, BeginTrip50(*store));
  // Refused (a second unfinished trip): nothing committed, nothing told.
  const size_t before = first.size();
  EXPECT_FALSE(BeginTrip50(*store).ok());
  EXPECT_EQ(first.size(), before);
  ASSERT_OK_AND_ASSIGN(int64_t seq, store->AppendEvent(Event("c1", id, "scrubbed", "zeroed")));
  store->RemoveEventObserver(b);
  ASSERT_OK(store->SetTripStep(id, kStepRouteOut, "out", TripCounterWindow{1, 1, 1}));

  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> stored, store->EventsAfter("", 0, 100));
  ASSERT_EQ(first.size(), stored.size());
  for (size_t i = 0; i < stored.size(); ++i) {
    EXPECT_EQ(first[i].seq, stored[i].seq);
    EXPECT_EQ(first[i].kind, stored[i].kind);
    EXPECT_EQ(first[i].step, stored[i].step);
    EXPECT_EQ(first[i].message, stored[i].message);
    EXPECT_EQ(first[i].bytes, stored[i].bytes);
    EXPECT_EQ(first[i].time_ms, stored[i].time_ms);
    EXPECT_GT(first[i].time_ms, 0);
  }
  ASSERT_EQ(second.size(), stored.size() - 1);  // removed before route_out
  EXPECT_EQ(second.back().seq, seq);
  EXPECT_EQ(second.back().kind, "scrubbed");
  EXPECT_EQ(first.back().step, kStepRouteOut);
}

TEST_F(StateStoreTest, ProvisioningReportCommitsTheNextStepWithIt) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  auto begin = [&]() -> absl::StatusOr<uint64_t> {
    auto id = store->NextTripId();
    if (!id.ok()) return id.status();
    TripRow t;
    t.id = *id;
    t.campaign = "c1";
    t.holder = "h1";
    t.window_length = 25;
    auto s = store->BeginTrip(t);
    if (!s.ok()) return s.status();
    s = store->SetTripStep(*id, kStepRouteOut, "", TripCounterWindow{9, 5, 2});
    if (!s.ok()) return s.status();
    s = store->SetTripStep(*id, kStepProvision, "");
    if (!s.ok()) return s.status();
    s = store->SetTripStep(*id, kStepRekey, "");
    if (!s.ok()) return s.status();
    return *id;
  };
  // Straight to scrub: the report and the step event, in that order.
  ASSERT_OK_AND_ASSIGN(uint64_t id, begin());
  ASSERT_OK_AND_ASSIGN(int64_t before, store->LastEventSeq());
  ASSERT_OK_AND_ASSIGN(EventSeqs seqs, store->RecordProvisioned(id, 25, 2, 0.1, false,
                                                               kStepScrub, "zeroing"));
  ASSERT_EQ(seqs.size(), 2u);
  ASSERT_OK_AND_ASSIGN(TripRow after, store->GetTrip(id));
  EXPECT_EQ(after.step, kStepScrub);
  EXPECT_EQ(after.bytes, 25u);
  EXPECT_FALSE(after.digest_match);
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> events, store->EventsAfter("c1", before, 100));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, "provisioned");
  EXPECT_EQ(events[0].step, kStepRekey);
  EXPECT_EQ(events[0].seq, seqs[0]);
  EXPECT_EQ(events[1].kind, "step");
  EXPECT_EQ(events[1].step, kStepScrub);
  EXPECT_EQ(events[1].message, "zeroing");
  EXPECT_EQ(events[1].seq, seqs[1]);
  TripFinish f;
  f.outcome = kOutcomeFailed;
  f.scrub_verified = true;
  f.rekeyed = true;
  ASSERT_OK(store->FinishTrip(id, f));

  // To train: RecordTrained then finds the trip where it must be.
  ASSERT_OK_AND_ASSIGN(id, begin());
  ASSERT_OK(store->RecordProvisioned(id, 25, 2, 0.1, true, kStepTrain, "training"));
  ASSERT_OK_AND_ASSIGN(after, store->GetTrip(id));
  EXPECT_EQ(after.step, kStepTrain);
  ASSERT_OK(store->RecordTrained(id, 1.5, std::nullopt, "m"));

  // Only the steps that follow a report, and nothing changes when refused.
  ASSERT_OK(store->FinishTrip(id, f));
  ASSERT_OK_AND_ASSIGN(id, begin());
  ASSERT_OK_AND_ASSIGN(before, store->LastEventSeq());
  for (const char* wrong : {kStepRouteBack, kStepDone, "teleport"}) {
    auto r = store->RecordProvisioned(id, 25, 2, 0.1, true, wrong, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << wrong;
  }
  ASSERT_OK_AND_ASSIGN(after, store->GetTrip(id));
  EXPECT_EQ(after.step, kStepRekey);
  EXPECT_EQ(after.bytes, 0u);
  ASSERT_OK_AND_ASSIGN(events, store->EventsAfter("c1", before, 100));
  EXPECT_TRUE(events.empty());
}

TEST_F(StateStoreTest, TripIsFinishedAndCountedExactlyOnce) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(uint64_t id, RunTrip(*store, "c1", "h1", 0, 10, 0));
  TripFinish f;
  f.outcome = kOutcomeOk;
  f.scrub_verified = true;
  f.rekeyed = true;
  f.advance_cursor = true;
  auto again = store->FinishTrip(id, f);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("counted once"));
  f.outcome = kOutcomeAborted;
  f.advance_cursor = false;
  EXPECT_EQ(store->FinishTrip(id, f).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->SetTripStep(id, kStepScrub, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_EQ(c.trips_ok, 1);
  EXPECT_EQ(c.trips_aborted, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<HolderRow> hs, store->ListHolders("c1"));
  EXPECT_EQ(hs[0].cursor_offset, 10u);
  EXPECT_EQ(hs[0].trips, 1);

  // An ok outcome needs the security steps; a failed one is counted as such.
  ASSERT_OK_AND_ASSIGN(uint64_t id2, store->NextTripId());
  TripRow t;
  t.id = id2;
  t.campaign = "c1";
  t.holder = "h1";
  t.window_offset = 10;
  t.window_length = 10;
  ASSERT_OK(store->BeginTrip(t));
  TripFinish unscrubbed;
  unscrubbed.outcome = kOutcomeOk;
  unscrubbed.rekeyed = true;
  EXPECT_EQ(store->FinishTrip(id2, unscrubbed).status().code(),
            absl::StatusCode::kInvalidArgument);
  TripFinish failed;
  failed.outcome = kOutcomeFailed;
  failed.error = "digest mismatch";
  failed.fail_holder = true;
  ASSERT_OK_AND_ASSIGN(EventSeqs seqs, store->FinishTrip(id2, failed));
  EXPECT_EQ(seqs.size(), 2u);  // trip_finished + holder_state
  ASSERT_OK_AND_ASSIGN(c, store->GetCampaign("c1"));
  EXPECT_EQ(c.trips_ok, 1);
  EXPECT_EQ(c.trips_failed, 1);
  EXPECT_EQ(c.bytes_provisioned, 10u);
  ASSERT_OK_AND_ASSIGN(hs, store->ListHolders("c1"));
  EXPECT_EQ(hs[0].state, kHolderFailed);
  EXPECT_EQ(hs[0].error, "digest mismatch");
  EXPECT_EQ(hs[0].cursor_offset, 10u);
}

// TripOutcomeOf reads the outcome back from the event FinishTrip writes.
TEST_F(StateStoreTest, TripOutcomeOfReadsTheOutcomeOfEachFinishedTrip) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK(RunTrip(*store, "c1", "h1", 0, 10, 0));
  TripFinish failed;
  failed.outcome = kOutcomeFailed;
  failed.error = "aborted: no, failed";  // an error that reads like another outcome
  ASSERT_OK_AND_ASSIGN(uint64_t id2, BeginTrip50(*store));
  ASSERT_OK(store->FinishTrip(id2, failed));
  TripFinish aborted;
  aborted.outcome = kOutcomeAborted;
  ASSERT_OK_AND_ASSIGN(uint64_t id3, BeginTrip50(*store));
  ASSERT_OK(store->FinishTrip(id3, aborted));
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> events, store->EventsAfter("c1", 0, 100));
  std::vector<std::string> outcomes;
  for (const EventRow& e : events) {
    if (e.kind == "trip_finished") {
      outcomes.push_back(TripOutcomeOf(e));
    } else {
      EXPECT_EQ(TripOutcomeOf(e), "") << e.kind;
    }
  }
  EXPECT_THAT(outcomes, ::testing::ElementsAre(kOutcomeOk, kOutcomeFailed, kOutcomeAborted));
  EventRow odd;
  odd.kind = "trip_finished";
  odd.message = "okay";
  EXPECT_EQ(TripOutcomeOf(odd), "");
}

TEST_F(StateStoreTest, AFinalCampaignIsDeletedWholeAndItsNameAndNoTripIdComeBack) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(uint64_t id, RunTrip(*store, "c1", "h1", 0, 10, 0));
  EXPECT_EQ(store->DeleteCampaign("c1", "operator 'alice'").status().code(),
            absl::StatusCode::kFailedPrecondition);  // running
  EXPECT_EQ(store->DeleteCampaign("nope", "operator 'alice'").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_OK(store->SetCampaignState("c1", kCampaignCancelled, "", "cancelled"));
  ASSERT_OK(store->DeleteCampaign("c1", "operator 'alice'"));
  EXPECT_EQ(store->GetCampaign("c1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->GetTrip(id).status().code(), absl::StatusCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> own, store->EventsAfter("c1", 0, 100));
  EXPECT_TRUE(own.empty());
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> all, store->EventsAfter("", 0, 1000));
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().kind, "campaign_deleted");
  EXPECT_THAT(all.back().message, HasSubstr("deleted by operator 'alice'"));
  // The name is free; trip ids go on past the deleted campaign's.
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(uint64_t next, store->NextTripId());
  EXPECT_GT(next, id);
}

TEST_F(StateStoreTest, CursorWrapsIntoNextRoundAndHolderCompletes) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}}), /*rounds=*/2));
  auto holder = [&]() {
    auto hs = store->ListHolders("c1");
    EXPECT_TRUE(hs.ok());
    return hs.ok() ? (*hs)[0] : HolderRow();
  };
  ASSERT_OK(RunTrip(*store, "c1", "h1", 0, 60, 0, /*train=*/false));
  EXPECT_EQ(holder().cursor_offset, 60u);
  ASSERT_OK(RunTrip(*store, "c1", "h1", 60, 40, 0, false));
  EXPECT_EQ(holder().cursor_offset, 0u);
  EXPECT_EQ(holder().round, 1u);
  EXPECT_EQ(holder().state, kHolderActive);

  // A window that is not at the cursor cannot advance it; the whole finish
  // is rolled back, so the trip stays open for recovery.
  auto stale = RunTrip(*store, "c1", "h1", 60, 40, 1, false);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stale.status().message(), HasSubstr("cursor"));
  ASSERT_OK_AND_ASSIGN(std::vector<TripRow> open, store->UnfinishedTrips());
  ASSERT_EQ(open.size(), 1u);
  TripFinish abort;
  abort.outcome = kOutcomeAborted;
  abort.error = "test";
  ASSERT_OK(store->FinishTrip(open[0].id, abort));

  ASSERT_OK(RunTrip(*store, "c1", "h1", 0, 100, 1, false));
  HolderRow h = holder();
  EXPECT_EQ(h.cursor_offset, 0u);
  EXPECT_EQ(h.round, 2u);
  EXPECT_EQ(h.state, kHolderDone);
  EXPECT_EQ(h.trips, 3);
  EXPECT_EQ(h.bytes, 200u);
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> events,
                       store->EventsAfter("c1", 0, 1000));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, "holder_state");
  EXPECT_EQ(events.back().step, kHolderDone);
  // A done holder takes no more trips.
  ASSERT_OK_AND_ASSIGN(uint64_t id, store->NextTripId());
  TripRow t;
  t.id = id;
  t.campaign = "c1";
  t.holder = "h1";
  t.window_length = 1;
  EXPECT_EQ(store->BeginTrip(t).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(StateStoreTest, RecordTrainedCheckpointsAndMovesToScrubAtomically) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(uint64_t id, BeginTrip50(*store));
  // Training is only recorded after step train was committed.
  EXPECT_EQ(store->RecordTrained(id, 1.5, std::nullopt, "m").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_OK(store->SetTripStep(id, kStepTrain, ""));
  EXPECT_EQ(store->RecordTrained(id, std::nan(""), std::nullopt, "m").status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string model(1 << 16, '\x5a');
  ASSERT_OK_AND_ASSIGN(EventSeqs seqs, store->RecordTrained(id, 1.5, std::nullopt, model));
  EXPECT_EQ(seqs.size(), 2u);
  ASSERT_OK_AND_ASSIGN(TripRow after, store->GetTrip(id));
  EXPECT_TRUE(after.trained);
  EXPECT_EQ(after.step, kStepScrub);
  ASSERT_TRUE(after.loss.has_value());
  EXPECT_EQ(*after.loss, 1.5);
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_EQ(*store->GetCheckpoint("c1"), model);
  EXPECT_EQ(c.last_loss, std::optional<double>(1.5));
  ASSERT_OK_AND_ASSIGN(std::string state, store->GetCampaignState("c1"));
  EXPECT_EQ(state, kCampaignRunning);
  // A window is never trained twice, even if the engine retries.
  auto twice = store->RecordTrained(id, 1.0, std::nullopt, "other");
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.status().message(), HasSubstr("never trained twice"));
  EXPECT_EQ(store->SetTripStep(id, kStepTrain, "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*store->GetCheckpoint("c1"), model);
}

// An external trainer's report is committed with the trip in the same
// transaction as the training step, and its resume point as the campaign's
// sealed checkpoint; once only.
TEST_F(StateStoreTest, RecordTrainedStoresAnExternalTrainersReportWithTheTrip) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(uint64_t id, BeginTrip50(*store));
  ASSERT_OK(store->SetTripStep(id, kStepTrain, ""));
  const std::string digest(32, '\x11');
  EXPECT_EQ(store->RecordTrained(id, 2.0, std::nullopt, "resume",
                                 ExternalTrainerReport{"short", 25})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(TripRow before, store->GetTrip(id));
  EXPECT_FALSE(before.trained) << "nothing of a refused report is kept";
  ASSERT_OK(store->RecordTrained(id, 2.0, std::nullopt, "resume",
                                 ExternalTrainerReport{digest, 25}));
  ASSERT_OK_AND_ASSIGN(TripRow after, store->GetTrip(id));
  EXPECT_TRUE(after.trained);
  EXPECT_EQ(after.step, kStepScrub);
  EXPECT_EQ(after.trainer_checkpoint_sha256, digest);
  EXPECT_EQ(after.trainer_tokens, 25u);
  EXPECT_EQ(*store->GetCheckpoint("c1"), "resume");
  EXPECT_EQ(store->RecordTrained(id, 2.0, std::nullopt, "resume",
                                 ExternalTrainerReport{digest, 25})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

// Checkpoints at rest: a copy of the database files (a backup, a disk the
// host reads) holds no byte of a checkpoint; the key is in its own file,
// and without it the store does not open a database that holds sealed
// checkpoints.
TEST_F(StateStoreTest, ACopyOfTheDatabaseRevealsNoCheckpoint) {
  const std::string plain = "CHECKPOINT-PLAINTEXT-" + std::string(300, 'w') + "-END";
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
    ASSERT_OK_AND_ASSIGN(uint64_t id, store->NextTripId());
    TripRow t;
    t.id = id;
    t.campaign = "c1";
    t.holder = "h1";
    t.window_length = 40;
    ASSERT_OK(store->BeginTrip(t));
    ASSERT_OK(store->SetTripStep(id, kStepTrain, ""));
    ASSERT_OK(store->RecordTrained(id, 1.5, std::nullopt, plain));
    EXPECT_EQ(*store->GetCheckpoint("c1"), plain);
    // While the store is open (WAL and all) and after it closed.
    EXPECT_EQ(DatabaseBytes().find("CHECKPOINT-PLAINTEXT"), std::string::npos);
  }
  EXPECT_EQ(DatabaseBytes().find("CHECKPOINT-PLAINTEXT"), std::string::npos);
  EXPECT_EQ(std::filesystem::status(KeyPath()).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // The database without its key file: refused, naming both, and no new key
  // is made in its place.
  const std::string moved = dir_ + "/backup.key";
  ASSERT_EQ(std::rename(KeyPath().c_str(), moved.c_str()), 0);
  auto no_key = StateStore::Open(path_, KeyPath());
  ASSERT_FALSE(no_key.ok());
  EXPECT_EQ(no_key.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_key.status().message(), HasSubstr(KeyPath()));
  EXPECT_THAT(no_key.status().message(), HasSubstr(path_));
  EXPECT_FALSE(std::filesystem::exists(KeyPath()));
  ASSERT_EQ(std::rename(moved.c_str(), KeyPath().c_str()), 0);
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->GetCheckpoint("c1"), plain);
}

// Whoever can write the database (not the key file) swaps a checkpoint in
// from another campaign, or puts back an earlier one of the same campaign:
// reading it fails, naming the campaign; the row itself still reads (an
// operator can still pause or cancel the campaign).
TEST_F(StateStoreTest, ASwappedCheckpointIsDetected) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK(CreateRunning(*store, "c2", Holders({{"h1", 100}})));
  ASSERT_OK(RunTrip(*store, "c1", "h1", 0, 10, 0).status());
  ASSERT_OK(RunTrip(*store, "c2", "h1", 0, 10, 0).status());
  const std::string c1_first = RawPragma("SELECT hex(model) FROM campaigns WHERE name = 'c1'");
  const std::string c1_first_trip =
      RawPragma("SELECT model_trip FROM campaigns WHERE name = 'c1'");
  ASSERT_OK(RunTrip(*store, "c1", "h1", 10, 10, 0).status());
  const std::string c1_now = RawPragma("SELECT hex(model) FROM campaigns WHERE name = 'c1'");
  ASSERT_TRUE(store->GetCheckpoint("c1").ok());

  auto expect_refused = [&](const std::string& what) {
    auto r = store->GetCheckpoint("c1");
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << what;
    EXPECT_THAT(r.status().message(), HasSubstr("campaign \"c1\"")) << what;
    EXPECT_TRUE(store->GetCampaign("c1").ok()) << what;
  };
  // c2's checkpoint, with or without its trip, in c1's row.
  RawPragma("UPDATE campaigns SET model = (SELECT model FROM campaigns WHERE name = 'c2') "
            "WHERE name = 'c1'");
  expect_refused("c2's checkpoint");
  RawPragma("UPDATE campaigns SET model_trip = (SELECT model_trip FROM campaigns "
            "WHERE name = 'c2') WHERE name = 'c1'");
  expect_refused("c2's checkpoint and trip");
  // c1's own earlier checkpoint, with or without its trip.
  RawPragma("UPDATE campaigns SET model = x'" + c1_first + "' WHERE name = 'c1'");
  RawPragma("UPDATE campaigns SET model_trip = " + c1_first_trip + " WHERE name = 'c1'");
  expect_refused("c1's earlier checkpoint and trip");
  ASSERT_OK_AND_ASSIGN(std::vector<TripRow> trips, store->ListTrips("c1"));
  RawPragma("UPDATE campaigns SET model_trip = " + std::to_string(trips.back().id) +
            " WHERE name = 'c1'");
  expect_refused("c1's earlier checkpoint under the latest trip");
  // Put right, it reads again.
  RawPragma("UPDATE campaigns SET model = x'" + c1_now + "' WHERE name = 'c1'");
  EXPECT_EQ(*store->GetCheckpoint("c1"), absl::StrCat("model-", trips.back().id));
  // Under another key file nothing opens.
  store.reset();
  std::filesystem::remove(KeyPath());
  {
    std::ofstream other(KeyPath(), std::ios::binary);
    other << std::string(32, 'k');
  }
  std::filesystem::permissions(KeyPath(), std::filesystem::perms::owner_read |
                                              std::filesystem::perms::owner_write);
  store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  auto r = store->GetCheckpoint("c1");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(r.status().message(), HasSubstr(KeyPath()));
}

// A database of schema 4 stored checkpoints in the clear: opened as is,
// they are refused (they may have been planted); opened with the operator's
// seal_clear_checkpoints, they are sealed (bound to the campaign's latest
// trained trip), and the clear bytes are gone from the database file and its
// WAL, whether a checkpoint spilt into overflow pages (c1) or sat in its
// row's page (c2).
TEST_F(StateStoreTest, MigrationSealsClearCheckpointsAndLeavesNoClearBytes) {
  const std::string plain = "CLEAR-CHECKPOINT-" + std::string(5000, 'q') + "-END";
  const std::string small = "SMALL-CLEAR-CHECKPOINT";
  uint64_t trained = 0;
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
    ASSERT_OK(CreateRunning(*store, "c2", Holders({{"h1", 100}})));
    ASSERT_OK(CreateRunning(*store, "c3", Holders({{"h1", 100}})));
    ASSERT_OK_AND_ASSIGN(trained, RunTrip(*store, "c1", "h1", 0, 10, 0));
    ASSERT_OK(RunTrip(*store, "c2", "h1", 0, 10, 0).status());
  }
  // What version 4 wrote: the checkpoints in the clear, and no key file.
  RawPragma("UPDATE campaigns SET model = CAST('" + plain + "' AS BLOB) WHERE name = 'c1'");
  RawPragma("UPDATE campaigns SET model = CAST('" + small + "' AS BLOB) WHERE name = 'c2'");
  DropVersion5Columns();
  RawPragma("PRAGMA user_version = 4");
  std::filesystem::remove(KeyPath());
  ASSERT_NE(DatabaseBytes().find("CLEAR-CHECKPOINT"), std::string::npos) << "the test's premise";
  ASSERT_NE(DatabaseBytes().find(small), std::string::npos) << "the test's premise";
  {
    auto as_is = OpenOrDie();
    ASSERT_NE(as_is, nullptr);
    auto refused = as_is->GetCheckpoint("c1");
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss) << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("--seal_clear_checkpoints"));
  }
  auto opened = StateStore::Open(path_, KeyPath(), /*seal_clear_checkpoints=*/true);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<StateStore> store = *std::move(opened);
  EXPECT_EQ(RawPragma("PRAGMA user_version"), absl::StrCat(StateStore::kSchemaVersion));
  EXPECT_EQ(DatabaseBytes().find("CLEAR-CHECKPOINT"), std::string::npos);
  EXPECT_EQ(DatabaseBytes().find(small), std::string::npos);
  EXPECT_EQ(RawPragma("SELECT model_trip FROM campaigns WHERE name = 'c1'"),
            std::to_string(trained));
  EXPECT_EQ(*store->GetCheckpoint("c1"), plain);
  EXPECT_EQ(*store->GetCheckpoint("c2"), small);
  EXPECT_EQ(*store->GetCheckpoint("c3"), "");
}

// ATTACK (host): with the orchestrator's disk, the host plants a model of
// its choice as a clear checkpoint (model = anything, model_trip = 0), as
// version 4 stored them. Unless an operator said the database is its own
// (seal_clear_checkpoints), it is never sealed nor served: DATA_LOSS.
TEST_F(StateStoreTest, ACheckpointPlantedInTheClearIsNeverServed) {
  const std::string planted = "HOST-CHOSEN-MODEL-WEIGHTS";
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
    ASSERT_OK(RunTrip(*store, "c1", "h1", 0, 10, 0).status());
    ASSERT_TRUE(store->GetCheckpoint("c1").ok());
  }
  ASSERT_EQ(RawPragma("PRAGMA user_version"), absl::StrCat(StateStore::kSchemaVersion));
  // The key file stays where it is; only the database is touched.
  RawPragma("UPDATE campaigns SET model = CAST('" + planted +
            "' AS BLOB), model_trip = 0 WHERE name = 'c1'");
  auto reopened = StateStore::Open(path_, KeyPath());
  if (!reopened.ok()) return;  // refused outright: secure
  auto r = (*reopened)->GetCheckpoint("c1");
  if (r.ok()) {
    EXPECT_NE(*r, planted) << "the host's model was sealed and served as the campaign's "
                              "checkpoint";
  } else {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  }
}

// ATTACK (host): it erases the checkpoint (model = x'', model_trip = 0) of a
// campaign that has trained trips, so that the trainer would start again
// from an untrained model while every window trained so far stays counted.
// DATA_LOSS, as for a swap.
TEST_F(StateStoreTest, AnErasedCheckpointIsDetected) {
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
    ASSERT_OK(RunTrip(*store, "c1", "h1", 0, 10, 0).status());
    ASSERT_FALSE(store->GetCheckpoint("c1")->empty());
  }
  RawPragma("UPDATE campaigns SET model = x'', model_trip = 0 WHERE name = 'c1'");
  auto reopened = StateStore::Open(path_, KeyPath());
  if (!reopened.ok()) return;  // refused outright: secure
  auto r = (*reopened)->GetCheckpoint("c1");
  ASSERT_FALSE(r.ok()) << "an erased checkpoint reads as \"no checkpoint yet\" ("
                       << (r.ok() ? r->size() : 0) << " bytes) after a trained trip";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
}

// The version 5 -> 6 rebuild of the holders table keeps
// every column of every holder row, and the trips that reference them.
TEST_F(StateStoreTest, TheHoldersTableRebuildLosesNothing) {
  const std::string q =
      "SELECT group_concat(campaign || '|' || name || '|' || position || '|' || dataset_bytes "
      "|| '|' || cursor_offset || '|' || round || '|' || state || '|' || error || '|' || trips "
      "|| '|' || bytes || '|' || hex(attestation), ';') FROM (SELECT * FROM holders ORDER BY "
      "campaign, name)";
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}, {"h2", 50}})));
    ASSERT_OK(RunTrip(*store, "c1", "h1", 0, 10, 0).status());
    ASSERT_OK(RunTrip(*store, "c1", "h2", 0, 20, 0).status());
    ASSERT_OK(store->MarkHolderState("c1", "h2", kHolderFailed, "why: it failed").status());
  }
  RawPragma("UPDATE holders SET attestation = x'0102' WHERE name = 'h1'");
  const std::string before = RawPragma(q);
  const std::string trips_before = RawPragma("SELECT count(*) FROM trips");
  DropVersion7Columns();
  RawPragma("PRAGMA user_version = 5");
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(RawPragma("PRAGMA user_version"), absl::StrCat(StateStore::kSchemaVersion));
  EXPECT_EQ(RawPragma(q), before);
  EXPECT_EQ(RawPragma("SELECT count(*) FROM trips"), trips_before);
  EXPECT_EQ(RawPragma("SELECT count(*) FROM pragma_foreign_key_check"), "0");
  ASSERT_OK(RunTrip(*store, "c1", "h1", 10, 10, 0).status());
}

TEST_F(StateStoreTest, UnfinishedTripsSurviveCrashAndBlockNewTrips) {
  uint64_t id = 0;
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
    ASSERT_OK_AND_ASSIGN(id, store->NextTripId());
    TripRow t;
    t.id = id;
    t.campaign = "c1";
    t.holder = "h1";
    t.window_length = 30;
    ASSERT_OK(store->BeginTrip(t));
    ASSERT_OK(store->SetTripStep(id, kStepRouteOut, "", TripCounterWindow{3, 1, 1}));
    ASSERT_OK(store->SetTripStep(id, kStepProvision, ""));
    // The store is closed here with the GPU still at h1, as a crash leaves
    // the trip (CrashDurabilityTest kills a process for real).
  }
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK_AND_ASSIGN(std::vector<TripRow> open, store->UnfinishedTrips());
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].id, id);
  EXPECT_EQ(open[0].step, kStepProvision);

  // No new trip may use the campaign's buffer until this one is resolved.
  ASSERT_OK_AND_ASSIGN(uint64_t next, store->NextTripId());
  EXPECT_GT(next, id);
  TripRow t;
  t.id = next;
  t.campaign = "c1";
  t.holder = "h1";
  t.window_length = 30;
  auto blocked = store->BeginTrip(t);
  EXPECT_EQ(blocked.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(blocked.status().message(), HasSubstr(absl::StrCat("trip ", id)));

  // Recovery: route back, re-key, scrub, abort; nothing counted as progress.
  ASSERT_OK(store->AppendEvent(
      Event("c1", id, "recovery", "aborting interrupted trip")));
  ASSERT_OK(store->SetTripStep(id, kStepRouteBack, "recovery"));
  ASSERT_OK(store->SetTripStep(id, kStepRekey, "recovery"));
  ASSERT_OK(store->SetTripStep(id, kStepScrub, "recovery"));
  TripFinish f;
  f.outcome = kOutcomeAborted;
  f.error = "orchestrator restarted during provision";
  f.scrub_verified = true;
  f.rekeyed = true;
  ASSERT_OK(store->FinishTrip(id, f));
  ASSERT_OK_AND_ASSIGN(open, store->UnfinishedTrips());
  EXPECT_TRUE(open.empty());
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_EQ(c.trips_aborted, 1);
  EXPECT_EQ(c.trips_ok, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<HolderRow> hs, store->ListHolders("c1"));
  EXPECT_EQ(hs[0].cursor_offset, 0u);
  ASSERT_OK(store->BeginTrip(t));  // the window is re-planned
}

TEST_F(StateStoreTest, BeginTripValidatesItsInputs) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(
      store->CreateCampaign(Campaign("c1", "r1"), Holders({{"h1", 100}})));
  ASSERT_OK_AND_ASSIGN(uint64_t id, store->NextTripId());
  TripRow t;
  t.id = id;
  t.campaign = "c1";
  t.holder = "h1";
  t.window_length = 10;
  auto not_running = store->BeginTrip(t);
  EXPECT_EQ(not_running.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(not_running.status().message(), HasSubstr("not running"));
  ASSERT_OK(store->SetCampaignState("c1", kCampaignRunning, "", ""));

  TripRow unissued = t;
  unissued.id = id + 100;
  EXPECT_EQ(store->BeginTrip(unissued).status().code(),
            absl::StatusCode::kInvalidArgument);
  TripRow outside = t;
  outside.window_offset = 95;
  EXPECT_EQ(store->BeginTrip(outside).status().code(),
            absl::StatusCode::kInvalidArgument);
  TripRow stranger = t;
  stranger.holder = "h9";
  auto unknown = store->BeginTrip(stranger);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("\"h9\""));
  ASSERT_OK(store->BeginTrip(t));
  EXPECT_EQ(store->BeginTrip(t).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store->GetTrip(id + 50).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(StateStoreTest, TerminalCampaignStatesAreFinal) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  ASSERT_OK(store->SetCampaignState("c1", kCampaignCancelling, "", "operator"));
  ASSERT_OK(store->SetCampaignState("c1", kCampaignCancelled, "by operator",
                                    "cancelled"));
  auto revive = store->SetCampaignState("c1", kCampaignRunning, "", "");
  EXPECT_EQ(revive.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(revive.status().message(), HasSubstr("\"c1\""));
  EXPECT_EQ(store->SetCampaignState("c1", "bogus", "", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_EQ(c.state, kCampaignCancelled);
  EXPECT_EQ(c.error, "by operator");
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> events,
                       store->EventsAfter("c1", 0, 100));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, "campaign_state");
  EXPECT_EQ(events.back().step, kCampaignCancelled);
  EXPECT_EQ(events.back().message, "cancelled: by operator");
}

// A state's event says its error once, also when the message is the error.
TEST_F(StateStoreTest, AStateEventSaysItsErrorOnce) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 100}})));
  const std::string why = "trip 3 failed: MUX Route gpu0 -> orchestrator: refused";
  ASSERT_OK(store->SetCampaignState("c1", kCampaignPaused, why, why));
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> events, store->EventsAfter("c1", 0, 100));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().message, why);
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_EQ(c.error, why);
  // A message that adds to the error keeps both.
  ASSERT_OK(store->SetCampaignState("c1", kCampaignPaused, why, "paused"));
  ASSERT_OK_AND_ASSIGN(events, store->EventsAfter("c1", 0, 100));
  EXPECT_EQ(events.back().message, "paused: " + why);
}

TEST_F(StateStoreTest, EventsAfterFiltersByCampaignAndLimits) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK_AND_ASSIGN(int64_t empty, store->LastEventSeq());
  EXPECT_EQ(empty, 0);
  ASSERT_OK(store->CreateCampaign(Campaign("a", "ra"), Holders({{"h", 1}})));
  ASSERT_OK(store->CreateCampaign(Campaign("b", "rb"), Holders({{"h", 1}})));
  ASSERT_OK_AND_ASSIGN(
      int64_t global,
      store->AppendEvent(Event("", 0, "recovery", "daemon started")));
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(store->AppendEvent(Event("a", 0, "error", absl::StrCat(i))));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> a,
                       store->EventsAfter("a", 0, 100));
  ASSERT_EQ(a.size(), 6u);  // created + 5
  for (const EventRow& e : a) EXPECT_EQ(e.campaign, "a");
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> page,
                       store->EventsAfter("a", a[1].seq, 2));
  ASSERT_EQ(page.size(), 2u);
  EXPECT_EQ(page[0].seq, a[2].seq);
  EXPECT_EQ(page[1].seq, a[3].seq);
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> all,
                       store->EventsAfter("", 0, 100));
  EXPECT_EQ(all.size(), 8u);
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> b,
                       store->EventsAfter("b", 0, 100));
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].kind, "campaign_state");
  EXPECT_LT(b[0].seq, global);
  ASSERT_OK_AND_ASSIGN(int64_t last, store->LastEventSeq());
  EXPECT_EQ(last, all.back().seq);
  EXPECT_EQ(store->EventsAfter("a", 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store->AppendEvent(Event("a", 0, "", "")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StateStoreTest, ConcurrentThreadsKeepEveryCountExact) {
  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 4;
  constexpr int kTrips = 4;
  std::vector<std::thread> threads;
  std::vector<std::vector<uint64_t>> ids(kThreads);
  std::atomic<int> failures{0};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      const std::string name = absl::StrCat("c", i);
      if (!CreateRunning(*store, name, Holders({{"h", 1000}})).ok()) {
        ++failures;
        return;
      }
      for (int k = 0; k < kTrips; ++k) {
        auto id = RunTrip(*store, name, "h", k * 10, 10, 0);
        if (!id.ok()) {
          ++failures;
          return;
        }
        ids[i].push_back(*id);
        // A reader thread's view, interleaved with the other writers.
        if (!store->EventsAfter("", 0, 10).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  std::set<uint64_t> unique;
  for (const auto& v : ids) unique.insert(v.begin(), v.end());
  EXPECT_EQ(unique.size(), static_cast<size_t>(kThreads * kTrips));
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_OK_AND_ASSIGN(CampaignRow c,
                         store->GetCampaign(absl::StrCat("c", i)));
    EXPECT_EQ(c.trips_ok, kTrips);
    EXPECT_EQ(c.bytes_provisioned, static_cast<uint64_t>(kTrips * 10));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> all,
                       store->EventsAfter("", 0, 100000));
  for (size_t k = 1; k < all.size(); ++k) EXPECT_GT(all[k].seq, all[k - 1].seq);
}

// A child process runs trips in a loop against its own connection and reports
// each trip id on a pipe only after FinishTrip committed it. The parent then
// either lets it _exit(0) without closing the database or SIGKILLs it in the
// middle of the loop, reopens, and checks that every reported trip is there
// and that all counts agree with each other (no torn transaction).
class CrashDurabilityTest : public StateStoreTest,
                            public ::testing::WithParamInterface<bool> {};

TEST_P(CrashDurabilityTest, CommittedTripsSurviveTheProcess) {
  const bool kill_mid_loop = GetParam();
  {
    auto store = OpenOrDie();
    ASSERT_NE(store, nullptr);
    ASSERT_OK(CreateRunning(*store, "c1", Holders({{"h1", 1ull << 40}})));
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    auto store = StateStore::Open(path_, KeyPath());
    if (!store.ok()) _exit(2);
    const int trips = kill_mid_loop ? 100000 : 12;
    for (int k = 0; k < trips; ++k) {
      auto id = RunTrip(**store, "c1", "h1", k, 1, 0);
      if (!id.ok()) _exit(3);
      uint64_t v = *id;
      if (write(fds[1], &v, sizeof(v)) != sizeof(v)) _exit(4);
    }
    // No destructor: the WAL is left exactly as a dying process leaves it.
    _exit(0);
  }
  close(fds[1]);
  std::vector<uint64_t> reported;
  uint64_t v;
  while (read(fds[0], &v, sizeof(v)) == sizeof(v)) {
    reported.push_back(v);
    if (kill_mid_loop && reported.size() == 8) kill(pid, SIGKILL);
  }
  close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
  if (kill_mid_loop) {
    ASSERT_TRUE(WIFSIGNALED(wstatus));
  } else {
    ASSERT_TRUE(WIFEXITED(wstatus));
    ASSERT_EQ(WEXITSTATUS(wstatus), 0);
    ASSERT_EQ(reported.size(), 12u);
  }
  ASSERT_GE(reported.size(), 8u);

  auto store = OpenOrDie();
  ASSERT_NE(store, nullptr);
  ASSERT_OK_AND_ASSIGN(std::vector<TripRow> trips, store->ListTrips("c1"));
  std::set<uint64_t> done;
  int unfinished = 0;
  const TripRow* last_trained = nullptr;
  for (const TripRow& t : trips) {
    if (t.outcome == kOutcomeOk) done.insert(t.id);
    if (t.step != kStepDone && t.step != kStepAborted) ++unfinished;
    if (t.trained) last_trained = &t;
  }
  for (uint64_t id : reported) EXPECT_TRUE(done.count(id)) << "trip " << id;
  EXPECT_LE(unfinished, 1);  // at most the trip the kill interrupted
  ASSERT_OK_AND_ASSIGN(CampaignRow c, store->GetCampaign("c1"));
  EXPECT_EQ(c.trips_ok, static_cast<int64_t>(done.size()));
  EXPECT_EQ(c.bytes_provisioned, done.size());
  ASSERT_OK_AND_ASSIGN(std::vector<HolderRow> hs, store->ListHolders("c1"));
  EXPECT_EQ(hs[0].cursor_offset, done.size());
  EXPECT_EQ(hs[0].trips, static_cast<int64_t>(done.size()));
  // The checkpoint and last loss belong to the newest trained trip.
  ASSERT_NE(last_trained, nullptr);
  EXPECT_EQ(*store->GetCheckpoint("c1"), absl::StrCat("model-", last_trained->id));
  EXPECT_EQ(c.last_loss, last_trained->loss);
  // One trip_finished event per finished trip.
  ASSERT_OK_AND_ASSIGN(std::vector<EventRow> events,
                       store->EventsAfter("c1", 0, 1000000));
  size_t finished_events = 0;
  for (const EventRow& e : events) finished_events += e.kind == "trip_finished";
  EXPECT_EQ(finished_events, done.size());
  // The id counter never goes back behind what was issued.
  ASSERT_OK_AND_ASSIGN(uint64_t next, store->NextTripId());
  EXPECT_GT(next, trips.empty() ? 0 : trips.back().id);
}

INSTANTIATE_TEST_SUITE_P(ExitOrKill, CrashDurabilityTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "SigkillMidLoop" : "ExitNoClose";
                         });

}  // namespace
}  // namespace gputravel
