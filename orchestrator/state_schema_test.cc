#include "orchestrator/state_schema.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/sqlite_db.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;

class StateSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("state_schema_test.");
    path_ = dir_ + "/state.db";
    auto db = SqliteDb::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  int64_t Version() {
    auto s = db_->Prepare("PRAGMA user_version");
    EXPECT_TRUE(s.ok());
    auto row = s->Step();
    EXPECT_TRUE(row.ok() && *row);
    return s->ColInt(0);
  }

  // The columns of `table`.
  std::set<std::string> Columns(const char* table) {
    auto s = db_->Prepare("SELECT name FROM pragma_table_info(?)");
    EXPECT_TRUE(s.ok()) << s.status();
    s->Bind(table);
    std::set<std::string> out;
    for (;;) {
      auto row = s->Step();
      EXPECT_TRUE(row.ok()) << row.status();
      if (!row.ok() || !*row) break;
      out.insert(s->ColText(0));
    }
    return out;
  }

  absl::Status Script(const char* sql) { return db_->ExecScript(sql, "test script"); }

  std::string dir_;
  std::string path_;
  std::unique_ptr<SqliteDb> db_;
};

TEST_F(StateSchemaTest, CreatesTheCurrentSchemaOnceInAnEmptyDatabase) {
  ASSERT_TRUE(EnsureStateSchema(*db_).ok());
  EXPECT_EQ(Version(), kStateSchemaVersion);
  for (const char* table : {"counters", "campaigns", "holders", "trips", "events"}) {
    EXPECT_FALSE(Columns(table).empty()) << table;
  }
  // Again: nothing to do, nothing refused.
  ASSERT_TRUE(EnsureStateSchema(*db_).ok());
  EXPECT_EQ(Version(), kStateSchemaVersion);
}

// Version 1's tables, as the current schema minus what versions 2..5 and 8
// added (versions 6 and 7 changed constraints only),
// are migrated in place, rows kept.
TEST_F(StateSchemaTest, MigratesVersionOneToTheCurrentVersion) {
  ASSERT_TRUE(EnsureStateSchema(*db_).ok());
  ASSERT_TRUE(Script("INSERT INTO campaigns (name, request_id, spec_json, gpu, rounds, state, "
                     "created_ms, updated_ms) VALUES ('c', 'r', '{}', 'g', 1, 'created', 1, 1);")
                  .ok());
  ASSERT_TRUE(Script("INSERT INTO holders (campaign, name, position, dataset_bytes, state) "
                     "VALUES ('c', 'h', 0, 100, 'active');")
                  .ok());
  ASSERT_TRUE(Script("ALTER TABLE trips DROP COLUMN gpu_session;"
                     "ALTER TABLE trips DROP COLUMN first_counter;"
                     "ALTER TABLE trips DROP COLUMN counter_count;"
                     "ALTER TABLE trips DROP COLUMN duration_us;"
                     "ALTER TABLE trips DROP COLUMN gpu_serial;"
                     "ALTER TABLE trips DROP COLUMN eval_loss;"
                     "ALTER TABLE trips DROP COLUMN reported_loss;"
                     "ALTER TABLE trips DROP COLUMN reported_eval_loss;"
                     "ALTER TABLE trips DROP COLUMN attestation;"
                     "ALTER TABLE holders DROP COLUMN attestation;"
                     "ALTER TABLE campaigns DROP COLUMN buffer_gpu_serial;"
                     "ALTER TABLE campaigns DROP COLUMN terms;"
                     "ALTER TABLE campaigns DROP COLUMN last_eval_loss;"
                     "ALTER TABLE campaigns DROP COLUMN model_trip;"
                     "ALTER TABLE events DROP COLUMN eval_loss;"
                     "ALTER TABLE trips DROP COLUMN trainer_checkpoint;"
                     "ALTER TABLE trips DROP COLUMN trainer_tokens;"
                     "PRAGMA user_version = 1;")
                  .ok());
  ASSERT_EQ(Version(), 1);
  ASSERT_EQ(Columns("trips").count("gpu_serial"), 0u);
  ASSERT_TRUE(EnsureStateSchema(*db_).ok());
  EXPECT_EQ(Version(), kStateSchemaVersion);
  for (const char* col : {"gpu_session", "first_counter", "counter_count", "duration_us",
                          "gpu_serial", "eval_loss", "reported_loss", "reported_eval_loss",
                          "trainer_checkpoint", "trainer_tokens"}) {
    EXPECT_EQ(Columns("trips").count(col), 1u) << col;
  }
  for (const char* col : {"buffer_gpu_serial", "terms", "last_eval_loss", "model_trip"}) {
    EXPECT_EQ(Columns("campaigns").count(col), 1u) << col;
  }
  EXPECT_EQ(Columns("events").count("eval_loss"), 1u);
  auto s = db_->Prepare("SELECT count(*) FROM campaigns");
  ASSERT_TRUE(s.ok());
  auto row = s->Step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(s->ColInt(0), 1) << "rows survive the migration";
  // Version 5: the holder survives the rebuild of its table, and may be
  // skipped; an unknown state is still refused, and so is a holder of a
  // campaign that does not exist.
  EXPECT_TRUE(Script("UPDATE holders SET state = 'skipped' WHERE name = 'h';").ok());
  EXPECT_FALSE(Script("UPDATE holders SET state = 'gone' WHERE name = 'h';").ok());
  EXPECT_FALSE(Script("INSERT INTO holders (campaign, name, position, dataset_bytes, state) "
                      "VALUES ('nope', 'h', 0, 100, 'active');")
                   .ok());
  // Version 6: the campaign survives the rebuild of its table, with its
  // holder still referencing it, and may be pausing.
  EXPECT_TRUE(Script("UPDATE campaigns SET state = 'pausing' WHERE name = 'c';").ok());
  EXPECT_FALSE(Script("UPDATE campaigns SET state = 'dozing' WHERE name = 'c';").ok());
  EXPECT_FALSE(Script("DELETE FROM campaigns WHERE name = 'c';").ok())
      << "the holder's reference to its campaign holds after the rebuild";
}

TEST_F(StateSchemaTest, RefusesANewerVersionNamingTheFile) {
  ASSERT_TRUE(Script(absl::StrCat("PRAGMA user_version = ", kStateSchemaVersion + 1, ";").c_str())
                  .ok());
  absl::Status st = EnsureStateSchema(*db_);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr(path_));
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("schema version ", kStateSchemaVersion + 1)));
}

TEST_F(StateSchemaTest, RefusesANegativeVersion) {
  ASSERT_TRUE(Script("PRAGMA user_version = -1;").ok());
  EXPECT_EQ(EnsureStateSchema(*db_).code(), absl::StatusCode::kDataLoss);
}

TEST_F(StateSchemaTest, RefusesADatabaseOfAnotherProgram) {
  ASSERT_TRUE(Script("CREATE TABLE other (x);").ok());
  absl::Status st = EnsureStateSchema(*db_);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("not an orchestrator state database"));
  EXPECT_EQ(Version(), 0) << "nothing was created";
}

}  // namespace
}  // namespace gputravel
