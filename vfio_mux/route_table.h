#ifndef GPUTRAVEL_VFIO_MUX_ROUTE_TABLE_H_
#define GPUTRAVEL_VFIO_MUX_ROUTE_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "vfio_mux/routing_backend.h"

namespace gputravel {

struct Route {
  std::string domain;      // empty: unrouted
  uint64_t fencing_token = 0;
};

// The bounds on a fencing token. The orchestrator's tokens are its trip ids,
// consecutive from one int64 counter, so a token beyond int64's largest, or
// more than 2^32 above the GPU's last accepted one, is never legitimate: it
// is refused (OUT_OF_RANGE, before any work and without a journal line).
// Accepted, one such token would make every later token stale for good.
inline constexpr uint64_t kMaxFencingToken = (uint64_t{1} << 63) - 1;
inline constexpr uint64_t kMaxFencingTokenStep = uint64_t{1} << 32;

// Whether `status` is the table's refusal of a request's fencing token
// (stale, or too far ahead): what the MUX's metrics count as a fencing
// refusal.
bool IsFencingRefusal(const absl::Status& status);

// How a RouteTable reaches stable storage.
struct RouteTableOptions {
  // Flushes one file descriptor to stable storage (a regular file's data and
  // size, or a directory's entries); returns 0, or -1 with errno set, like
  // fdatasync(2), which it is when unset. Every flush the table makes goes
  // through it, so tests can count them.
  std::function<int(int fd)> sync;
  // The only domains RouteTo routes a GPU to (besides "", unrouted): the MUX
  // configuration's "domains". Empty: every route to a domain is refused.
  std::set<std::string> domains;
  // The journal is compacted once it reaches this size: a snapshot of the
  // table takes its place, it is renamed AUDIT.1 (replacing the one before)
  // and a new one starts, so the journal and its one predecessor hold at most
  // about twice this. 0: never while the MUX runs.
  uint64_t journal_max_bytes = uint64_t{64} << 20;
};

// Ordering and fencing of GPU moves, durable across restarts: one owner per
// GPU; a move carrying a token older than the last accepted one is refused,
// so an orchestrator that lost its lease (or a replayed request) cannot move
// the GPU behind a newer trip; a token too far ahead is refused too
// (kMaxFencingToken, kMaxFencingTokenStep). Thread-safe.
//
// Requests are checked before any work and before the lock: names
// (ValidateMuxName), the GPU (configured), the domain (in
// RouteTableOptions::domains, else the one DomainNotConfigured refusal) and
// the token. A request refused there leaves no journal line (the MUX's log
// says why). Errors that name only the request's own GPU, domain and token
// are marked ForCaller (vfio_mux/mux_policy.h).
//
// Locking: the table's mutex is never held across a backend's Move or
// Reset. The GPU is marked busy for the duration instead, so decisions about
// one GPU stay serialized (a second route or reset of a busy GPU is refused
// UNAVAILABLE, to be retried), while reads and other GPUs go on.
//
// Durability: the audit log is the journal. Every decision that changed
// something is appended to it as one JSON line
// {"action","from","gpu","result","time","to","token"} through a descriptor
// kept open (O_APPEND) and flushed with one fdatasync before the call
// returns, so a decision is durable before it is answered: a route that
// changed the GPU's owner or raised its token, every reset, and every move
// or reset that failed in the backend (it may have changed the GPU on the
// way). What changed nothing leaves no line, so a caller cannot grow the
// journal by repeating itself: a route the backend confirms to where the
// table already has the GPU, with no higher token, and a failure that
// repeats, exactly, the GPU's last journaled line (the MUX's log still says
// why). For a route the line is written after the backend's move, with the
// move's result. The state
// file is a snapshot of the table plus the journal length it covers; it is
// rewritten atomically only by Open (after replaying the journal past it),
// Close and a compaction, never per decision. Open restores every GPU's owner and last
// accepted token from the snapshot and the journal's "ok" lines after it; a
// torn last line (a crash during its write: it was never answered) is cut
// off. Any other unreadable line, or a journal that does not continue the
// one the snapshot was taken with, is refused (DATA_LOSS) rather than
// forgetting a fencing token, unless the snapshot was written by Close: then
// the journal may have been rotated while the MUX was stopped. While it runs,
// the MUX compacts the journal itself (RouteTableOptions::journal_max_bytes):
// a snapshot of the table that covers none of the journal (replaying all of
// it on that snapshot changes nothing: the last route and the highest token
// win), then the rename to AUDIT.1, then a new, empty journal; a crash
// between any two steps leaves a pair that Open accepts.
class RouteTable {
 public:
  static absl::StatusOr<std::unique_ptr<RouteTable>> Open(
      RoutingBackend* backend, std::string state_path, std::string audit_path,
      RouteTableOptions options = {});
  ~RouteTable();
  RouteTable(const RouteTable&) = delete;
  RouteTable& operator=(const RouteTable&) = delete;

  absl::StatusOr<Route> RouteTo(const std::string& gpu, const std::string& domain,
                                uint64_t fencing_token);
  absl::StatusOr<Route> Get(const std::string& gpu);
  absl::Status Reset(const std::string& gpu, uint64_t fencing_token);
  std::map<std::string, Route> All();

  // Clean shutdown: writes a snapshot that covers every decision (so the
  // audit log may be rotated before the next start) and refuses any later
  // decision. Not needed for safety: without it the next Open replays the
  // journal.
  absl::Status Close();

 private:
  RouteTable(RoutingBackend* backend, std::string state_path, std::string audit_path,
             RouteTableOptions options);
  absl::Status LoadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A snapshot of the table that covers the journal's first `covered`
  // bytes (all of them by default).
  absl::Status WriteSnapshotLocked(bool complete) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return WriteSnapshotLocked(complete, journal_bytes_);
  }
  absl::Status WriteSnapshotLocked(bool complete, uint64_t covered)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Compacts the journal once it reaches journal_max_bytes (see there).
  void CompactJournalLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends one decision to the journal and flushes it.
  absl::Status JournalLocked(const std::string& action, const std::string& gpu,
                             const std::string& from, const std::string& to,
                             uint64_t token, const absl::Status& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a failed decision repeats exactly the GPU's last journal line.
  bool RepeatsLastFailureLocked(const std::string& action, const std::string& gpu,
                                const std::string& from, const std::string& to,
                                uint64_t token, const absl::Status& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refuses decisions once the journal can no longer record them.
  absl::Status CheckWritableLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckKnownLocked(const std::string& gpu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `gpu` busy for one decision, or refuses while another runs.
  absl::Status BeginLocked(const std::string& gpu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a route and a reset check before their backend call: a known GPU,
  // a writable journal, a token not below the one accepted (`what` names
  // the decision in the refusal: "" or "reset of "), then BeginLocked.
  // Returns the domain the table names for the GPU.
  absl::StatusOr<std::string> BeginDecisionLocked(const std::string& gpu,
                                                  uint64_t fencing_token, const char* what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndLocked(const std::string& gpu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RoutingBackend* const backend_;
  const std::string state_path_, audit_path_;
  const RouteTableOptions options_;
  absl::Mutex mu_;
  std::map<std::string, Route> routes_ ABSL_GUARDED_BY(mu_);
  // GPUs whose move or reset is in the backend now.
  std::set<std::string> busy_ ABSL_GUARDED_BY(mu_);
  int journal_fd_ ABSL_GUARDED_BY(mu_) = -1;
  // Length of the journal's well-formed prefix: where the next line goes.
  uint64_t journal_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Set when the journal could not be written or flushed (or after Close):
  // why decisions are refused until the MUX restarts.
  std::string unwritable_ ABSL_GUARDED_BY(mu_);
  // Per GPU, the failed decision its last journal line recorded (action,
  // names, token and result): an exact repeat is not journaled again.
  std::map<std::string, std::string> last_failure_ ABSL_GUARDED_BY(mu_);
  // GPUs whose route or token in the table is ahead of the journal (moved
  // or reset, but the line saying so could not be written), each with its
  // route as last journaled. A route to where the table says the GPU is, is
  // then journaled before it is answered OK, never taken as already
  // recorded, and snapshots hold the journaled route, so no restart takes
  // the unrecorded one as decided.
  std::map<std::string, Route> unjournaled_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_ROUTE_TABLE_H_
