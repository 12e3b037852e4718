#ifndef GPUTRAVEL_ORCHESTRATOR_SQLITE_DB_H_
#define GPUTRAVEL_ORCHESTRATOR_SQLITE_DB_H_

// A small layer over one SQLite connection, as the state store uses it:
// opening a private WAL database, cached prepared statements with typed
// binding, transactions with a durability per commit, and SQLite's failures
// mapped to absl::Status naming the database file.
//
// Not thread-safe: the owner serializes every call (StateStore's mutex).

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gputravel {

// The largest value SQLite's signed 64-bit integers hold; unsigned values
// beyond it are refused rather than wrapped.
inline constexpr uint64_t kSqliteMaxInt =
    static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// How a write transaction reaches the disk.
//   kFlush: synchronous=FULL, the WAL is fsynced before COMMIT returns.
//   kLazy:  synchronous=NORMAL, the commit is in the WAL (safe from a
//           process crash) and fsynced with the next kFlush commit. Only for
//           records whose loss to a power cut nothing downstream notices
//           (the caller decides which; StateStore documents its choices).
enum class Durability { kFlush, kLazy };

// Maps an SQLite failure (result code `rc`) while doing `what` to a status
// naming the database file: busy/locked -> Unavailable (retry), constraint ->
// FailedPrecondition, full -> ResourceExhausted, corrupt/not a database ->
// DataLoss, cannot open/permission/read-only -> PermissionDenied, else
// Internal. A failure of the storage itself is marked (IsStorageFailure).
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what);

// Whether `s` is a failure of the storage under the state database rather
// than a refusal of what was asked: the file system is full, read-only or
// failing (I/O errors), the file cannot be opened or is corrupt, memory ran
// out, or another process held the database past the busy timeout. Then no
// read or write may get through, whatever it is, until the storage works
// again; asking again later may succeed. A constraint, a bad value or a
// check of the caller's is never one.
bool IsStorageFailure(const absl::Status& s);

// A blob bound without copying: the string must outlive the statement's
// execution (used for checkpoints, which may be large). An empty value is an
// empty blob, not NULL.
struct BlobRef {
  const std::string& value;
};

// A borrowed, cached prepared statement; resets itself and clears its
// bindings when it goes out of scope, so the next user starts clean and no
// read transaction is left open. Parameters are bound in order; the first
// failed bind is reported by Step/Run.
class Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  Stmt(Stmt&& o) noexcept;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt();

  Stmt& Int(int64_t v);
  // Values above kSqliteMaxInt are refused (InvalidArgument at Step/Run).
  Stmt& U64(uint64_t v);
  Stmt& Real(double v);
  Stmt& OptReal(const std::optional<double>& v);  // nullopt binds NULL
  Stmt& Text(absl::string_view v);                // copied (may be a temporary)
  Stmt& Blob(BlobRef v);

  // Binds each value by its type: uint64_t as U64, other integers and bool as
  // Int, double as Real, optional<double> as OptReal, BlobRef as Blob, and
  // anything a string_view can be made of as Text.
  template <typename... Ts>
  Stmt& Bind(const Ts&... vs) {
    (BindOne(vs), ...);
    return *this;
  }

  // Steps once: true when a row is available, false when done.
  absl::StatusOr<bool> Step();
  // For statements that return no rows (INSERT, UPDATE, DDL).
  absl::Status Run();

  int64_t ColInt(int i);
  uint64_t ColU64(int i);  // a negative value reads as 0
  bool ColBool(int i);
  double ColReal(int i);
  std::optional<double> ColOptReal(int i);  // NULL reads as nullopt
  std::string ColText(int i);
  std::string ColBlob(int i);

 private:
  template <typename T>
  void BindOne(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      Int(v ? 1 : 0);
    } else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> &&
                         sizeof(T) == sizeof(uint64_t)) {
      U64(v);
    } else if constexpr (std::is_integral_v<T>) {
      Int(static_cast<int64_t>(v));
    } else if constexpr (std::is_floating_point_v<T>) {
      Real(v);
    } else if constexpr (std::is_same_v<T, std::optional<double>>) {
      OptReal(v);
    } else if constexpr (std::is_same_v<T, BlobRef>) {
      Blob(v);
    } else {
      Text(absl::string_view(v));
    }
  }
  void Check(int rc);

  sqlite3* db_;
  sqlite3_stmt* s_;
  int next_ = 0;
  absl::Status status_;
};

// One connection to one database file.
class SqliteDb {
 public:
  // Opens (creating with mode 0600 if missing: the file may hold data trained
  // on holders' data, and SQLite gives its -wal/-shm files the same mode) the
  // database at `path`, with extended result codes, a busy timeout for other
  // connections' write locks, foreign keys enforced, synchronous=FULL and the
  // WAL journal; refuses a filesystem or build where WAL or foreign keys do
  // not take effect.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path);

  ~SqliteDb();  // finalizes the statements; closes (and checkpoints) the file
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  const std::string& path() const { return path_; }

  // The cached statement for `sql`, which must be a string literal (the
  // cache is keyed by its address): compiled once per connection. Values
  // always reach SQLite through Stmt's binding.
  absl::StatusOr<Stmt> Prepare(const char* sql);
  // Prepares `sql`, binds `args` (Stmt::Bind) and runs it; for statements
  // that return no rows.
  template <typename... Ts>
  absl::Status Run(const char* sql, const Ts&... args) {
    absl::StatusOr<Stmt> s = Prepare(sql);
    if (!s.ok()) return s.status();
    return s->Bind(args...).Run();
  }
  // Runs one statement, draining any rows it answers (some PRAGMAs do).
  absl::Status Exec(const char* sql);
  // Runs a constant script of several statements (DDL); `what` names it in
  // the error.
  absl::Status ExecScript(const char* sql, absl::string_view what);
  // The rowid of this connection's latest INSERT.
  int64_t LastInsertRowid();

  // Runs `body` inside BEGIN IMMEDIATE (write: the write lock is taken up
  // front, so a writer never fails half-way because another connection wrote
  // first) or BEGIN DEFERRED (read: a consistent snapshot that does not block
  // writers) .. COMMIT; rolls back if `body` or the commit fails. A write
  // commits with `durability`.
  //
  // Storage tests: with GPUTRAVEL_FAILPOINT=while:disk_full:PATH (util/
  // failpoint.h), every write's COMMIT fails as on a full file system
  // (SQLITE_FULL, "database or disk is full") while PATH exists, and rolls
  // back; reads are untouched.
  absl::Status InTransaction(absl::FunctionRef<absl::Status()> body, bool write = true,
                             Durability durability = Durability::kFlush);

 private:
  SqliteDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  absl::Status Configure();
  // Outside any transaction; applies to the commits that follow.
  absl::Status SetSynchronous(Durability durability);

  sqlite3* const db_;
  const std::string path_;
  // The PRAGMA synchronous in force on the connection.
  Durability synchronous_ = Durability::kFlush;
  std::unordered_map<const char*, sqlite3_stmt*> stmts_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_SQLITE_DB_H_
