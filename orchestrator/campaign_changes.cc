#include "orchestrator/campaign_changes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gputravel {

CampaignChanges::Campaign* CampaignChanges::Find(const std::string& campaign) {
  std::unique_ptr<Campaign>& c = campaigns_[campaign];
  if (c == nullptr) c = std::make_unique<Campaign>();
  return c.get();
}

void CampaignChanges::EventCommitted(const std::string& campaign, int64_t seq) {
  absl::MutexLock l(&mu_);
  Campaign* c = Find(campaign);
  c->event_seq = std::max(c->event_seq, seq);
}

void CampaignChanges::ProgressMoved(const std::string& campaign, uint64_t version) {
  absl::MutexLock l(&mu_);
  Campaign* c = Find(campaign);
  c->progress = std::max(c->progress, version);
}

void CampaignChanges::Stop() {
  absl::MutexLock l(&mu_);
  stopped_ = true;
}

CampaignChanges::Version CampaignChanges::Current(const std::string& campaign) {
  absl::MutexLock l(&mu_);
  const Campaign* c = Find(campaign);
  return Version{c->event_seq, c->progress};
}

bool CampaignChanges::WaitForChange(const std::string& campaign, const Version& seen,
                                    absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  const Campaign* c = Find(campaign);
  // Evaluated by whichever thread releases the lock: a waiter whose
  // campaign did not move is not woken.
  auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || c->event_seq > seen.event_seq || c->progress > seen.progress;
  };
  ++waiting_;
  const bool woke = mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  --waiting_;
  if (woke) ++wakeups_;
  return woke;
}

absl::StatusOr<std::unique_ptr<CampaignChanges::Watch>> CampaignChanges::StartWatch(
    const std::string& caller) {
  absl::MutexLock l(&mu_);
  int& n = watches_[caller];
  if (n >= max_watchers_per_caller_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        caller, " already has ", n, " campaign watches open, the most one caller may hold; ",
        "end one (each holds a server thread) and watch again"));
  }
  ++n;
  return std::unique_ptr<Watch>(new Watch(this, caller));
}

CampaignChanges::Watch::~Watch() {
  absl::MutexLock l(&owner_->mu_);
  auto it = owner_->watches_.find(caller_);
  if (it != owner_->watches_.end() && --it->second <= 0) owner_->watches_.erase(it);
}

uint64_t CampaignChanges::wakeups() {
  absl::MutexLock l(&mu_);
  return wakeups_;
}

int CampaignChanges::waiting() {
  absl::MutexLock l(&mu_);
  return waiting_;
}

}  // namespace gputravel
