#include "vfio_mux/route_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>

#include "keyxfer/counter_window.h"
#include "nlohmann/json.hpp"
#include "util/files.h"

namespace gputravel {

absl::StatusOr<std::unique_ptr<RouteTable>> RouteTable::Open(
    RoutingBackend* backend, std::string state_path, std::string audit_path) {
  std::unique_ptr<RouteTable> t(
      new RouteTable(backend, std::move(state_path), std::move(audit_path)));
  auto gpus = backend->ListGpus();
  if (!gpus.ok()) return gpus.status();
  absl::MutexLock l(&t->mu_);
  for (const auto& g : *gpus) t->routes_[g.name] = Route{};
  if (access(t->state_path_.c_str(), F_OK) == 0) {
    auto j = ReadJsonFile(t->state_path_);
    if (!j.ok()) {
      return absl::DataLossError("MUX state " + t->state_path_ +
                                 " is unreadable; refusing to forget fencing tokens: " +
                                 std::string(j.status().message()));
    }
    if (j->contains("gpus") && (*j)["gpus"].is_object()) {
      for (auto it = (*j)["gpus"].begin(); it != (*j)["gpus"].end(); ++it) {
        auto r = t->routes_.find(it.key());
        if (r == t->routes_.end()) continue;  // GPU no longer configured
        const auto& v = it.value();
        if (v.contains("domain") && v["domain"].is_string()) {
          r->second.domain = v["domain"].get<std::string>();
        }
        if (v.contains("token") && v["token"].is_number_unsigned()) {
          r->second.fencing_token = v["token"].get<uint64_t>();
        }
      }
    }
  }
  return t;
}

absl::Status RouteTable::CheckKnownLocked(const std::string& gpu) {
  if (routes_.count(gpu) == 0) {
    std::string known;
    for (const auto& r : routes_) known += (known.empty() ? "" : ", ") + r.first;
    return absl::NotFoundError("unknown GPU '" + gpu + "' (this MUX has: " + known + ")");
  }
  return absl::OkStatus();
}

absl::Status RouteTable::PersistLocked() {
  nlohmann::json j;
  j["gpus"] = nlohmann::json::object();
  for (const auto& r : routes_) {
    j["gpus"][r.first] = {{"domain", r.second.domain}, {"token", r.second.fencing_token}};
  }
  return WriteFileAtomically(state_path_, j.dump(2) + "\n");
}

void RouteTable::AuditLocked(const std::string& action, const std::string& gpu,
                             const std::string& from, const std::string& to,
                             uint64_t token, const absl::Status& result) {
  nlohmann::json j = {
      {"time", std::chrono::duration<double>(
                   std::chrono::system_clock::now().time_since_epoch()).count()},
      {"action", action}, {"gpu", gpu}, {"from", from}, {"to", to},
      {"token", token},
      {"result", result.ok() ? "ok" : std::string(result.message())}};
  std::string line = j.dump() + "\n";
  int fd = ::open(audit_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return;
  ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
  ::fsync(fd);
  ::close(fd);
}

absl::StatusOr<Route> RouteTable::RouteTo(const std::string& gpu,
                                          const std::string& domain,
                                          uint64_t fencing_token) {
  absl::MutexLock l(&mu_);
  absl::Status known = CheckKnownLocked(gpu);
  if (!known.ok()) return known;
  Route& cur = routes_[gpu];
  if (fencing_token < cur.fencing_token) {
    absl::Status s = absl::FailedPreconditionError(
        "stale fencing token " + std::to_string(fencing_token) + " for " + gpu +
        ": token " + std::to_string(cur.fencing_token) + " was already accepted");
    AuditLocked("route", gpu, cur.domain, domain, fencing_token, s);
    return s;
  }
  absl::Status moved = absl::OkStatus();
  if (cur.domain != domain) moved = backend_->Move(gpu, cur.domain, domain);
  AuditLocked("route", gpu, cur.domain, domain, fencing_token, moved);
  if (!moved.ok()) return moved;
  cur.domain = domain;
  cur.fencing_token = fencing_token;
  absl::Status p = PersistLocked();
  if (!p.ok()) return p;
  return cur;
}

absl::StatusOr<Route> RouteTable::Get(const std::string& gpu) {
  absl::MutexLock l(&mu_);
  absl::Status known = CheckKnownLocked(gpu);
  if (!known.ok()) return known;
  return routes_[gpu];
}

absl::Status RouteTable::Reset(const std::string& gpu, uint64_t fencing_token) {
  absl::MutexLock l(&mu_);
  absl::Status known = CheckKnownLocked(gpu);
  if (!known.ok()) return known;
  Route& cur = routes_[gpu];
  if (fencing_token < cur.fencing_token) {
    absl::Status s = absl::FailedPreconditionError(
        "stale fencing token " + std::to_string(fencing_token) + " for reset of " + gpu);
    AuditLocked("reset", gpu, cur.domain, cur.domain, fencing_token, s);
    return s;
  }
  absl::Status r = backend_->Reset(gpu);
  AuditLocked("reset", gpu, cur.domain, cur.domain, fencing_token, r);
  if (!r.ok()) return r;
  cur.fencing_token = fencing_token;
  return PersistLocked();
}

std::map<std::string, Route> RouteTable::All() {
  absl::MutexLock l(&mu_);
  return routes_;
}

}  // namespace gputravel
