#include "orchestrator/sqlite_db.h"

#include <stdlib.h>

#include <cstdio>

#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;

// The storage-fault switch (util/failpoint.h) of this test binary: set before
// main, so before the failpoint reads the environment.
std::string DiskFullSwitch() {
  return TestTmpDir() + "/sqlite_db_test.disk_full";
}
const bool kSwitchSet = [] {
  return setenv("GPUTRAVEL_FAILPOINT", ("while:disk_full:" + DiskFullSwitch()).c_str(), 1) == 0;
}();

class SqliteDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("sqlite_db_test.");
    path_ = dir_ + "/t.db";
    auto db = SqliteDb::Open(path_);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    ASSERT_TRUE(db_->ExecScript("CREATE TABLE t (k TEXT PRIMARY KEY, i INTEGER, r REAL, "
                                "b BLOB) STRICT;",
                                "creating the test table")
                    .ok());
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  // The number of rows of t.
  int64_t Rows() {
    auto s = db_->Prepare("SELECT count(*) FROM t");
    EXPECT_TRUE(s.ok()) << s.status();
    auto row = s->Step();
    EXPECT_TRUE(row.ok() && *row);
    return s->ColInt(0);
  }

  std::string Pragma(const char* sql) {
    auto s = db_->Prepare(sql);
    EXPECT_TRUE(s.ok()) << s.status();
    auto row = s->Step();
    EXPECT_TRUE(row.ok() && *row);
    return s->ColText(0);
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<SqliteDb> db_;
};

TEST_F(SqliteDbTest, OpensAPrivateWalDatabaseWithForeignKeys) {
  EXPECT_EQ(db_->path(), path_);
  EXPECT_EQ(Pragma("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(Pragma("PRAGMA foreign_keys"), "1");
  EXPECT_EQ(Pragma("PRAGMA synchronous"), "2");  // FULL
  auto perms = std::filesystem::status(path_).permissions();
  EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
            std::filesystem::perms::none);
}

TEST_F(SqliteDbTest, RefusesAnEmptyPath) {
  auto db = SqliteDb::Open("");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SqliteDbTest, BindsEachTypeAndReadsItBack) {
  const std::string blob("a\0b", 3);
  ASSERT_TRUE(db_->Run("INSERT INTO t (k, i, r, b) VALUES (?, ?, ?, ?)", "one",
                       uint64_t{1} << 40, 2.5, BlobRef{blob})
                  .ok());
  ASSERT_TRUE(
      db_->Run("INSERT INTO t (k, i, r, b) VALUES (?, ?, ?, ?)", std::string("two"), true,
               std::optional<double>(), BlobRef{std::string()})
          .ok());
  auto s = db_->Prepare("SELECT i, r, b FROM t WHERE k = ?");
  ASSERT_TRUE(s.ok()) << s.status();
  auto row = s->Bind("one").Step();
  ASSERT_TRUE(row.ok() && *row) << row.status();
  EXPECT_EQ(s->ColU64(0), uint64_t{1} << 40);
  EXPECT_EQ(s->ColReal(1), 2.5);
  EXPECT_EQ(s->ColBlob(2), blob);
}

TEST_F(SqliteDbTest, ReadsNullAsNoValue) {
  ASSERT_TRUE(db_->Run("INSERT INTO t (k, i, r, b) VALUES (?, ?, ?, ?)", "n", int64_t{-3},
                       std::optional<double>(), BlobRef{std::string()})
                  .ok());
  auto s = db_->Prepare("SELECT i, r, b FROM t WHERE k = ?");
  ASSERT_TRUE(s.ok());
  auto row = s->Bind("n").Step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(s->ColInt(0), -3);
  EXPECT_EQ(s->ColU64(0), 0u) << "a negative value reads as 0 unsigned";
  EXPECT_FALSE(s->ColOptReal(1).has_value());
  EXPECT_EQ(s->ColBlob(2), "");
}

TEST_F(SqliteDbTest, RefusesUnsignedValuesBeyondSignedIntegers) {
  absl::Status st = db_->Run("INSERT INTO t (k, i) VALUES (?, ?)", "big",
                             std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("64-bit signed"));
  EXPECT_EQ(Rows(), 0);
}

TEST_F(SqliteDbTest, MapsAConstraintFailureToFailedPreconditionNamingTheFile) {
  ASSERT_TRUE(db_->Run("INSERT INTO t (k) VALUES (?)", "dup").ok());
  absl::Status st = db_->Run("INSERT INTO t (k) VALUES (?)", "dup");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr(path_));
}

TEST_F(SqliteDbTest, PreparesEachStatementOnceAndResetsItAfterUse) {
  const char* sql = "SELECT k FROM t ORDER BY k";
  ASSERT_TRUE(db_->Run("INSERT INTO t (k) VALUES (?)", "a").ok());
  ASSERT_TRUE(db_->Run("INSERT INTO t (k) VALUES (?)", "b").ok());
  for (int i = 0; i < 2; ++i) {
    // Each use starts at the first row: the previous one was reset.
    auto s = db_->Prepare(sql);
    ASSERT_TRUE(s.ok());
    auto row = s->Step();
    ASSERT_TRUE(row.ok() && *row);
    EXPECT_EQ(s->ColText(0), "a");
  }
  auto bad = db_->Prepare("SELECT nope FROM t");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("preparing"));
}

TEST_F(SqliteDbTest, AFailedBodyRollsTheTransactionBack) {
  absl::Status st = db_->InTransaction([&] {
    absl::Status ins = db_->Run("INSERT INTO t (k) VALUES (?)", "gone");
    if (!ins.ok()) return ins;
    return absl::AbortedError("the body gives up");
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Rows(), 0);
  ASSERT_TRUE(db_->InTransaction([&] { return db_->Run("INSERT INTO t (k) VALUES (?)", "kept"); })
                  .ok());
  EXPECT_EQ(Rows(), 1);
}

TEST_F(SqliteDbTest, EachWriteCommitsWithItsDurability) {
  auto insert = [&](const char* k) { return db_->Run("INSERT INTO t (k) VALUES (?)", k); };
  ASSERT_TRUE(db_->InTransaction([&] { return insert("lazy"); }, true, Durability::kLazy).ok());
  EXPECT_EQ(Pragma("PRAGMA synchronous"), "1");  // NORMAL
  ASSERT_TRUE(db_->InTransaction([&] { return insert("flush"); }, true, Durability::kFlush).ok());
  EXPECT_EQ(Pragma("PRAGMA synchronous"), "2");  // FULL
  // A read transaction leaves the setting as it is.
  ASSERT_TRUE(db_->InTransaction([&] { return absl::OkStatus(); }, false, Durability::kLazy).ok());
  EXPECT_EQ(Pragma("PRAGMA synchronous"), "2");
  EXPECT_EQ(Rows(), 2);
}

TEST_F(SqliteDbTest, AFullDatabaseIsAStorageFailureAConstraintIsNot) {
  // SQLite's own "database or disk is full": the file may not grow further.
  ASSERT_TRUE(db_->Exec("PRAGMA max_page_count = 8").ok());
  const std::string big(4096, 'x');
  absl::Status st;
  for (int i = 0; i < 64 && st.ok(); ++i) {
    st = db_->Run("INSERT INTO t (k, b) VALUES (?, ?)", absl::StrCat("k", i), BlobRef{big});
  }
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr("database or disk is full"));
  EXPECT_THAT(st.message(), HasSubstr(path_));
  EXPECT_TRUE(IsStorageFailure(st)) << st;

  absl::Status dup = db_->Run("INSERT INTO t (k) VALUES (?)", "k0");
  EXPECT_EQ(dup.code(), absl::StatusCode::kFailedPrecondition) << dup;
  EXPECT_FALSE(IsStorageFailure(dup));
  EXPECT_FALSE(IsStorageFailure(absl::OkStatus()));
  EXPECT_FALSE(IsStorageFailure(absl::ResourceExhaustedError("not from the database")));
}

TEST_F(SqliteDbTest, TheDiskFullSwitchFailsEveryCommitWhileItsFileExists) {
  ASSERT_TRUE(kSwitchSet);
  auto insert = [&](const char* k) {
    return db_->InTransaction([&] { return db_->Run("INSERT INTO t (k) VALUES (?)", k); });
  };
  ASSERT_TRUE(insert("before").ok());
  {
    FILE* f = std::fopen(DiskFullSwitch().c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  absl::Status st = insert("during");
  std::remove(DiskFullSwitch().c_str());
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr("running COMMIT: database or disk is full"));
  EXPECT_TRUE(IsStorageFailure(st));
  EXPECT_EQ(Rows(), 1) << "the failed commit was rolled back";
  // Reads were never affected; writes work again once the file is gone.
  ASSERT_TRUE(insert("after").ok());
  EXPECT_EQ(Rows(), 2);
}

}  // namespace
}  // namespace gputravel
