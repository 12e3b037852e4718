#ifndef GPUTRAVEL_ORCHESTRATOR_STORAGE_BACKOFF_H_
#define GPUTRAVEL_ORCHESTRATOR_STORAGE_BACKOFF_H_

// The campaign engine's record of a state database that cannot be written
// (a full or read-only file system, I/O errors: sqlite_db.h
// IsStorageFailure). Every trip step is committed before it happens (P7), so
// while nothing can be committed nothing may happen: the GPU workers leave
// the GPU alone (no route, no re-key, no trip) and only probe the storage,
// the first time kFirstDelay after the failure, then after a delay that
// doubles with every failed probe up to kMaxDelay. A write that commits,
// a probe or any other, ends the failure; the workers then make the
// interrupted trip safe (trip_recovery.h) and go on by themselves. Storage
// that fails again within kMaxDelay of working again (a nearly full disk
// that takes small commits and refuses larger ones) continues the doubling
// where it stopped, so even then the GPU is touched at most once per delay.
//
// The API shows the failure as it is (Show): a campaign the engine runs
// reads PAUSED with the storage error while the failure lasts, and a state
// a worker decided but could not commit (Hold) is shown until it is
// committed once the storage works.
//
// Thread-safe. The clock is injectable for tests.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "orchestrator/state_store.h"

namespace gputravel {

class StorageBackoff {
 public:
  static constexpr absl::Duration kFirstDelay = absl::Seconds(1);
  static constexpr absl::Duration kMaxDelay = absl::Seconds(60);
  using Clock = std::function<absl::Time()>;

  explicit StorageBackoff(Clock now = absl::Now, absl::Duration first = kFirstDelay,
                          absl::Duration max = kMaxDelay);

  // A read or write of the state database failed at the storage level:
  // starts a failure (its first probe due one delay from now) or, during
  // one, records the latest error. Every call counts (failures()).
  void Failed(const absl::Status& error);
  // A write committed: the failure, if any, is over.
  void Succeeded();

  // Whether the storage is failing now.
  bool failing() const;
  // Calls of Failed so far: a caller that saw this number change across an
  // operation knows the storage failed during it.
  uint64_t failures() const;
  // The latest storage error (OK when not failing).
  absl::Status error() const;
  // While failing: when the next probe is due (InfinitePast when not).
  absl::Time next_probe() const;
  // While failing and once the probe is due: true for one caller, which
  // probes (a write) and reports it with ProbeResult; the next probe is
  // then due one (doubled) delay later, whatever that caller does.
  bool ClaimProbe();
  // The claimed probe's result: OK ends the failure (as Succeeded does),
  // an error doubles the delay (at most the maximum).
  void ProbeResult(const absl::Status& result);
  // The failure in words, for the API and the log ("" when not failing):
  // the error, since when, how many probes failed, when the next one is,
  // and that the campaigns go on by themselves once the storage works.
  std::string Describe() const;

  // A campaign state a worker decided (a pause, a failure) but could not
  // commit because the storage failed: shown by Show until it is committed.
  struct HeldState {
    std::string campaign;
    std::string state;  // kCampaign*
    std::string error;
    std::string message;
    std::string gpu;  // whose worker commits it
  };
  void Hold(HeldState state);
  // The held states, for the worker to commit once the storage works.
  std::vector<HeldState> Held() const;
  // Committed (or overtaken by another change): no longer shown.
  void Release(const std::string& campaign);

  // What the API shows of `row` (edited in place): a held state of its
  // campaign, with a note that it is not recorded yet; else, while the
  // storage fails, a RUNNING or PAUSING campaign as PAUSED with Describe()
  // as its error. Any other row is left as stored.
  void Show(CampaignRow* row) const;

 private:
  std::string DescribeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The error, since when, failed retries and the next one's time.
  std::string FailureLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock now_;
  const absl::Duration first_, max_;
  mutable absl::Mutex mu_;
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  absl::Time since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // When the last failure ended (a write committed).
  absl::Time ended_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration delay_ ABSL_GUARDED_BY(mu_);
  absl::Time next_probe_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int failed_probes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, HeldState> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_STORAGE_BACKOFF_H_
