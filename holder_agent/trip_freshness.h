#ifndef GPUTRAVEL_HOLDER_AGENT_TRIP_FRESHNESS_H_
#define GPUTRAVEL_HOLDER_AGENT_TRIP_FRESHNESS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gputravel {

// The last trip a holder agent accepted from each orchestrator (its
// certificate's name) on each GPU (serial), kept in a file of its state
// directory so that a restarted agent still refuses a hand-off of an older
// or the same trip (freshness, P5). An orchestrator hands out trip ids from
// one counter that only grows (its state database), so on one GPU each trip
// it sends is newer than the last.
//
// File: JSON {"version": 1, "accepted": [{"orchestrator", "gpu", "trip"}]},
// mode 0600, replaced whole and fsynced (util/private_files.h) before a
// trip counts as accepted.
class TripFreshness {
 public:
  // Reads `path`; a missing file is a first start (nothing accepted yet).
  // DATA_LOSS naming the file if it is there but not a record this class
  // wrote: the agent must not start without it (deleting it would forget
  // what was accepted).
  static absl::StatusOr<std::unique_ptr<TripFreshness>> Open(const std::string& path);

  // PERMISSION_DENIED, naming trip, campaign, orchestrator and GPU, unless
  // `trip` is newer than the last one accepted from `orchestrator` on `gpu`.
  absl::Status Check(const std::string& orchestrator, const std::string& gpu, uint64_t trip,
                     const std::string& campaign) const;
  // Check, then records `trip` as accepted, on disk first: when it returns
  // OK the record survives a crash or a power cut. UNAVAILABLE naming the
  // file if it cannot be written (then nothing is recorded).
  absl::Status Accept(const std::string& orchestrator, const std::string& gpu, uint64_t trip,
                      const std::string& campaign);

  const std::string& path() const { return path_; }

 private:
  explicit TripFreshness(std::string path) : path_(std::move(path)) {}
  absl::Status CheckLocked(const std::string& orchestrator, const std::string& gpu,
                           uint64_t trip, const std::string& campaign) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string path_;
  mutable absl::Mutex mu_;
  // (orchestrator, GPU serial) -> last trip accepted.
  std::map<std::pair<std::string, std::string>, uint64_t> last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_TRIP_FRESHNESS_H_
