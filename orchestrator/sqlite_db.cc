#include "orchestrator/sqlite_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "util/failpoint.h"
#include "util/status_macros.h"

namespace gputravel {
namespace {

// How long a writer waits for another connection's write lock.
constexpr int kBusyTimeoutMs = 5000;

// Marks a status as a failure of the storage (IsStorageFailure).
constexpr char kStoragePayload[] = "gputravel/storage-failure";

bool IsStorageCode(int rc) {
  switch (rc & 0xff) {
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_NOMEM:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_PROTOCOL:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return true;
    default:
      return false;
  }
}

absl::Status Classified(int rc, const std::string& msg);

// `errmsg`: SQLite's text for the failure.
absl::Status SqliteFailure(sqlite3* db, int rc, absl::string_view what, const char* errmsg) {
  const char* file = sqlite3_db_filename(db, "main");
  std::string msg = absl::StrCat("state database ", file ? file : "?", ": ", what, ": ",
                                 errmsg, " (sqlite code ", rc, ")");
  absl::Status st = Classified(rc, msg);
  if (IsStorageCode(rc)) st.SetPayload(kStoragePayload, absl::Cord("1"));
  return st;
}

absl::Status Classified(int rc, const std::string& msg) {
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

}  // namespace

absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what) {
  return SqliteFailure(db, rc, what, sqlite3_errmsg(db));
}

bool IsStorageFailure(const absl::Status& s) {
  return !s.ok() && s.GetPayload(kStoragePayload).has_value();
}

// ---------------------------------------------------------------------------
// Stmt.

Stmt::Stmt(Stmt&& o) noexcept
    : db_(o.db_), s_(o.s_), next_(o.next_), status_(std::move(o.status_)) {
  o.s_ = nullptr;
}

Stmt::~Stmt() {
  if (s_ != nullptr) {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
}

Stmt& Stmt::Int(int64_t v) {
  Check(sqlite3_bind_int64(s_, ++next_, v));
  return *this;
}

Stmt& Stmt::U64(uint64_t v) {
  if (v > kSqliteMaxInt) {
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

Stmt& Stmt::Real(double v) {
  Check(sqlite3_bind_double(s_, ++next_, v));
  return *this;
}

Stmt& Stmt::OptReal(const std::optional<double>& v) {
  if (!v.has_value()) {
    Check(sqlite3_bind_null(s_, ++next_));
    return *this;
  }
  return Real(*v);
}

Stmt& Stmt::Text(absl::string_view v) {
  // SQLITE_TRANSIENT: the value may be a temporary.
  Check(sqlite3_bind_text64(s_, ++next_, v.data(), v.size(), SQLITE_TRANSIENT,
                            SQLITE_UTF8));
  return *this;
}

Stmt& Stmt::Blob(BlobRef v) {
  // data() is never null, so an empty value is an empty blob, not NULL.
  Check(sqlite3_bind_blob64(s_, ++next_, v.value.data(), v.value.size(), SQLITE_STATIC));
  return *this;
}

absl::StatusOr<bool> Stmt::Step() {
  if (!status_.ok()) return status_;
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, absl::StrCat("running ", sqlite3_sql(s_)));
}

absl::Status Stmt::Run() {
  GT_ASSIGN_OR_RETURN(bool row, Step());
  if (row) {
    return absl::InternalError(absl::StrCat("unexpected row from ", sqlite3_sql(s_)));
  }
  return absl::OkStatus();
}

int64_t Stmt::ColInt(int i) { return sqlite3_column_int64(s_, i); }

uint64_t Stmt::ColU64(int i) {
  int64_t v = sqlite3_column_int64(s_, i);
  return v < 0 ? 0 : static_cast<uint64_t>(v);
}

bool Stmt::ColBool(int i) { return sqlite3_column_int64(s_, i) != 0; }

double Stmt::ColReal(int i) { return sqlite3_column_double(s_, i); }

std::optional<double> Stmt::ColOptReal(int i) {
  if (sqlite3_column_type(s_, i) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s_, i);
}

std::string Stmt::ColText(int i) {
  const unsigned char* p = sqlite3_column_text(s_, i);
  int n = sqlite3_column_bytes(s_, i);
  return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p), n);
}

std::string Stmt::ColBlob(int i) {
  const void* p = sqlite3_column_blob(s_, i);
  int n = sqlite3_column_bytes(s_, i);
  return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
}

void Stmt::Check(int rc) {
  if (rc != SQLITE_OK && status_.ok()) {
    status_ = SqliteError(db_, rc, "binding a parameter");
  }
}

// ---------------------------------------------------------------------------
// SqliteDb.

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path) {
  if (path.empty()) {
    return absl::InvalidArgumentError("state database path is empty");
  }
  // Private before SQLite creates it.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot open or create state database ", path, ": ", std::strerror(err)));
  }
  ::close(fd);

  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    absl::Status st = db != nullptr ? SqliteError(db, rc, "opening")
                                    : absl::ResourceExhaustedError(absl::StrCat(
                                          "state database ", path, ": out of memory opening it"));
    sqlite3_close_v2(db);
    return st;
  }
  sqlite3_extended_result_codes(db, 1);
  std::unique_ptr<SqliteDb> out(new SqliteDb(db, path));
  GT_RETURN_IF_ERROR(out->Configure());
  return out;
}

SqliteDb::~SqliteDb() {
  for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
  stmts_.clear();
  // close_v2 also checkpoints the WAL when this is the last connection.
  sqlite3_close_v2(db_);
}

absl::Status SqliteDb::Configure() {
  int rc = sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  if (rc != SQLITE_OK) return SqliteError(db_, rc, "setting busy_timeout");
  GT_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys = ON"));
  // FULL: a commit is on disk (WAL fsynced) before it returns. Lazy commits
  // switch to NORMAL for themselves (InTransaction).
  GT_RETURN_IF_ERROR(Exec("PRAGMA synchronous = FULL"));
  synchronous_ = Durability::kFlush;
  {
    // journal_mode answers with the mode in force: a filesystem without
    // shared memory support silently keeps another mode, which we refuse.
    GT_ASSIGN_OR_RETURN(Stmt s, Prepare("PRAGMA journal_mode = WAL"));
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    std::string mode = row ? s.ColText(0) : "";
    if (mode != "wal") {
      return absl::FailedPreconditionError(
          absl::StrCat("state database ", path_, ": cannot use WAL journal mode (got \"", mode,
                       "\"); put it on a local filesystem"));
    }
  }
  GT_ASSIGN_OR_RETURN(Stmt s, Prepare("PRAGMA foreign_keys"));
  GT_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row || s.ColInt(0) != 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state database ", path_, ": this SQLite build does not enforce foreign keys"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Stmt> SqliteDb::Prepare(const char* sql) {
  auto it = stmts_.find(sql);
  if (it != stmts_.end()) return Stmt(db_, it->second);
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(s);
    return SqliteError(db_, rc, absl::StrCat("preparing ", sql));
  }
  stmts_.emplace(sql, s);
  return Stmt(db_, s);
}

absl::Status SqliteDb::Exec(const char* sql) {
  GT_ASSIGN_OR_RETURN(Stmt s, Prepare(sql));
  while (true) {
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return absl::OkStatus();
  }
}

absl::Status SqliteDb::ExecScript(const char* sql, absl::string_view what) {
  // Several statements: sqlite3_exec is the tool for it.
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : "";
    sqlite3_free(err);
    return SqliteError(db_, rc, absl::StrCat(what, ": ", msg));
  }
  return absl::OkStatus();
}

int64_t SqliteDb::LastInsertRowid() { return sqlite3_last_insert_rowid(db_); }

absl::Status SqliteDb::SetSynchronous(Durability durability) {
  if (durability == synchronous_) return absl::OkStatus();
  GT_RETURN_IF_ERROR(Exec(durability == Durability::kFlush ? "PRAGMA synchronous = FULL"
                                                           : "PRAGMA synchronous = NORMAL"));
  synchronous_ = durability;
  return absl::OkStatus();
}

absl::Status SqliteDb::InTransaction(absl::FunctionRef<absl::Status()> body, bool write,
                                     Durability durability) {
  if (write) GT_RETURN_IF_ERROR(SetSynchronous(durability));
  GT_RETURN_IF_ERROR(Exec(write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED"));
  absl::Status st = body();
  if (st.ok()) {
    st = write && FaultSwitchOn("disk_full")
             ? SqliteFailure(db_, SQLITE_FULL, "running COMMIT", sqlite3_errstr(SQLITE_FULL))
             : Exec("COMMIT");
    if (st.ok()) return st;
  }
  if (sqlite3_get_autocommit(db_) == 0) {
    absl::Status rb = Exec("ROLLBACK");
    if (!rb.ok()) {
      absl::Status both = absl::InternalError(
          absl::StrCat(st.message(), "; rollback failed too: ", rb.message()));
      if (IsStorageFailure(st) || IsStorageFailure(rb)) {
        both.SetPayload(kStoragePayload, absl::Cord("1"));
      }
      return both;
    }
  }
  return st;
}

}  // namespace gputravel
