#ifndef GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_CHANGES_H_
#define GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_CHANGES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gputravel {

// What WatchCampaign streams wait on: per campaign, the newest committed
// event and the live progress version. A stream waits for ITS campaign only,
// so an event of one campaign wakes that campaign's watchers and no other.
// Each caller identity may hold at most
// `max_watchers_per_caller` streams: each holds a server thread while it
// waits (orchestrator/api_limits.h).
//
// Told by the state store after each commit (StateStore::AddEventObserver)
// and by the engine when live progress moves. Thread-safe; its lock is a
// leaf (nothing is called while it is held), so the store may call it with
// its own lock held.
class CampaignChanges {
 public:
  explicit CampaignChanges(int max_watchers_per_caller)
      : max_watchers_per_caller_(max_watchers_per_caller) {}

  // Where a campaign stands; compare with what a watcher has seen.
  struct Version {
    int64_t event_seq = 0;    // newest committed event of the campaign
    uint64_t progress = 0;    // its live progress version
  };

  void EventCommitted(const std::string& campaign, int64_t seq);
  void ProgressMoved(const std::string& campaign, uint64_t version);
  // Every wait returns (the engine is stopping).
  void Stop();

  Version Current(const std::string& campaign);
  // Blocks until `campaign` moves past `seen` (a newer event or progress),
  // Stop, or `timeout`. False if it returned for the timeout alone.
  bool WaitForChange(const std::string& campaign, const Version& seen, absl::Duration timeout);

  // A watch stream's place, given back when destroyed.
  class Watch {
   public:
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    friend class CampaignChanges;
    Watch(CampaignChanges* owner, std::string caller)
        : owner_(owner), caller_(std::move(caller)) {}
    CampaignChanges* const owner_;
    const std::string caller_;
  };
  // RESOURCE_EXHAUSTED when `caller` (e.g. "operator 'ops'") already holds
  // max_watchers_per_caller watches.
  absl::StatusOr<std::unique_ptr<Watch>> StartWatch(const std::string& caller);

  // For tests: how many waits returned because their campaign changed, and
  // how many are blocked in WaitForChange now.
  uint64_t wakeups();
  int waiting();

 private:
  struct Campaign {
    int64_t event_seq = 0;
    uint64_t progress = 0;
  };
  Campaign* Find(const std::string& campaign) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int max_watchers_per_caller_;
  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // Entries are never removed (one per campaign the store knows), so a
  // waiter may keep a pointer to its own.
  std::map<std::string, std::unique_ptr<Campaign>> campaigns_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> watches_ ABSL_GUARDED_BY(mu_);
  uint64_t wakeups_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_CHANGES_H_
