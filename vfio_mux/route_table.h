#ifndef GPUTRAVEL_VFIO_MUX_ROUTE_TABLE_H_
#define GPUTRAVEL_VFIO_MUX_ROUTE_TABLE_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "vfio_mux/routing_backend.h"

namespace gputravel {

struct Route {
  std::string domain;      // empty: unrouted
  uint64_t fencing_token = 0;
};

// Ordering and fencing of GPU moves, durable across restarts: one owner per
// GPU; a move carrying a token older than the last accepted one is refused,
// so an orchestrator that lost its lease (or a replayed request) cannot move
// the GPU behind a newer trip. The state file is rewritten atomically after
// each move and every attempt is appended to the audit log. Thread-safe.
class RouteTable {
 public:
  static absl::StatusOr<std::unique_ptr<RouteTable>> Open(
      RoutingBackend* backend, std::string state_path, std::string audit_path);

  absl::StatusOr<Route> RouteTo(const std::string& gpu, const std::string& domain,
                                uint64_t fencing_token);
  absl::StatusOr<Route> Get(const std::string& gpu);
  absl::Status Reset(const std::string& gpu, uint64_t fencing_token);
  std::map<std::string, Route> All();

 private:
  RouteTable(RoutingBackend* backend, std::string state_path, std::string audit_path)
      : backend_(backend), state_path_(std::move(state_path)),
        audit_path_(std::move(audit_path)) {}
  absl::Status PersistLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AuditLocked(const std::string& action, const std::string& gpu,
                   const std::string& from, const std::string& to,
                   uint64_t token, const absl::Status& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckKnownLocked(const std::string& gpu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RoutingBackend* const backend_;
  const std::string state_path_, audit_path_;
  absl::Mutex mu_;
  std::map<std::string, Route> routes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_ROUTE_TABLE_H_
