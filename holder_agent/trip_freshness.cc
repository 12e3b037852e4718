#include "holder_agent/trip_freshness.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/private_files.h"

namespace gputravel {
namespace {

constexpr int kVersion = 1;

bool PrintableAscii(const std::string& s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return !s.empty();
}

absl::Status NotARecord(const std::string& path, const std::string& why) {
  return absl::DataLossError(
      "trip freshness record " + path + " " + why +
      ": the agent would forget which trips it accepted; restore the file, or (knowing that "
      "an older hand-off is then accepted once more) move it away");
}

}  // namespace

absl::StatusOr<std::unique_ptr<TripFreshness>> TripFreshness::Open(const std::string& path) {
  std::unique_ptr<TripFreshness> f(new TripFreshness(path));
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return f;  // first start
    return absl::UnavailableError("cannot read trip freshness record " + path + ": " +
                                  std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return NotARecord(path, "is not a regular file");
  auto j = ReadJsonFile(path);
  if (!j.ok()) {
    return NotARecord(path, "cannot be read (" + std::string(j.status().message()) + ")");
  }
  if (!j->contains("version") || !(*j)["version"].is_number_unsigned() ||
      (*j)["version"].get<uint64_t>() != kVersion) {
    return NotARecord(path, "has no version " + std::to_string(kVersion));
  }
  if (!j->contains("accepted") || !(*j)["accepted"].is_array()) {
    return NotARecord(path, "has no list 'accepted'");
  }
  absl::MutexLock l(&f->mu_);
  for (const nlohmann::json& e : (*j)["accepted"]) {
    if (!e.is_object() || !e.contains("orchestrator") || !e["orchestrator"].is_string() ||
        !e.contains("gpu") || !e["gpu"].is_string() || !e.contains("trip") ||
        !e["trip"].is_number_unsigned()) {
      return NotARecord(path, "has an entry without orchestrator, gpu and trip");
    }
    uint64_t& last = f->last_[{e["orchestrator"].get<std::string>(), e["gpu"].get<std::string>()}];
    last = std::max(last, e["trip"].get<uint64_t>());
  }
  return f;
}

absl::Status TripFreshness::CheckLocked(const std::string& orchestrator, const std::string& gpu,
                                        uint64_t trip, const std::string& campaign) const {
  auto it = last_.find({orchestrator, gpu});
  if (it != last_.end() && trip <= it->second) {
    return absl::PermissionDeniedError(
        "hand-off for trip " + std::to_string(trip) + " of campaign '" + campaign +
        "' is not fresh (trip " + std::to_string(it->second) + " from orchestrator '" +
        orchestrator + "' on GPU '" + gpu + "' was already accepted)");
  }
  return absl::OkStatus();
}

absl::Status TripFreshness::Check(const std::string& orchestrator, const std::string& gpu,
                                  uint64_t trip, const std::string& campaign) const {
  absl::ReaderMutexLock l(&mu_);
  return CheckLocked(orchestrator, gpu, trip, campaign);
}

absl::Status TripFreshness::Accept(const std::string& orchestrator, const std::string& gpu,
                                   uint64_t trip, const std::string& campaign) {
  if (!PrintableAscii(orchestrator) || !PrintableAscii(gpu)) {
    return absl::InvalidArgumentError(
        "hand-off for trip " + std::to_string(trip) + " of campaign '" + campaign +
        "' refused: its orchestrator name or GPU serial is empty or not printable ASCII, "
        "so it cannot be recorded in " + path_);
  }
  absl::MutexLock l(&mu_);
  absl::Status fresh = CheckLocked(orchestrator, gpu, trip, campaign);
  if (!fresh.ok()) return fresh;
  nlohmann::json accepted = nlohmann::json::array();
  for (const auto& [key, last] : last_) {
    if (key == std::make_pair(orchestrator, gpu)) continue;
    accepted.push_back({{"orchestrator", key.first}, {"gpu", key.second}, {"trip", last}});
  }
  accepted.push_back({{"orchestrator", orchestrator}, {"gpu", gpu}, {"trip", trip}});
  const nlohmann::json record = {{"version", kVersion}, {"accepted", accepted}};
  absl::Status written = ReplacePrivateFileDurably(
      path_, record.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (!written.ok()) {
    return absl::UnavailableError("hand-off for trip " + std::to_string(trip) + " of campaign '" +
                                  campaign + "' not accepted: cannot record it: " +
                                  std::string(written.message()));
  }
  last_[{orchestrator, gpu}] = trip;
  return absl::OkStatus();
}

}  // namespace gputravel
