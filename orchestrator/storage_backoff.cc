#include "orchestrator/storage_backoff.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "orchestrator/trip_steps.h"

namespace gputravel {

StorageBackoff::StorageBackoff(Clock now, absl::Duration first, absl::Duration max)
    : now_(std::move(now)), first_(first), max_(std::max(first, max)), delay_(first) {}

void StorageBackoff::Failed(const absl::Status& error) {
  absl::MutexLock l(&mu_);
  ++failures_;
  error_ = error;
  if (failing_) return;
  const absl::Time now = now_();
  failing_ = true;
  since_ = now;
  failed_probes_ = 0;
  // Failing again soon after it worked: the doubling goes on from there.
  delay_ = now - ended_ < max_ ? std::min(2 * delay_, max_) : first_;
  next_probe_ = now + delay_;
}

void StorageBackoff::Succeeded() {
  absl::MutexLock l(&mu_);
  if (!failing_) return;
  failing_ = false;
  error_ = absl::OkStatus();
  ended_ = now_();
  next_probe_ = absl::InfinitePast();
}

bool StorageBackoff::failing() const {
  absl::MutexLock l(&mu_);
  return failing_;
}

uint64_t StorageBackoff::failures() const {
  absl::MutexLock l(&mu_);
  return failures_;
}

absl::Status StorageBackoff::error() const {
  absl::MutexLock l(&mu_);
  return error_;
}

absl::Time StorageBackoff::next_probe() const {
  absl::MutexLock l(&mu_);
  return next_probe_;
}

bool StorageBackoff::ClaimProbe() {
  absl::MutexLock l(&mu_);
  if (!failing_) return false;
  const absl::Time now = now_();
  if (now < next_probe_) return false;
  // Due again one doubled delay from now: if the claimant never reports,
  // another caller probes then.
  delay_ = std::min(2 * delay_, max_);
  next_probe_ = now + delay_;
  return true;
}

void StorageBackoff::ProbeResult(const absl::Status& result) {
  if (result.ok()) {
    Succeeded();
    return;
  }
  absl::MutexLock l(&mu_);
  ++failed_probes_;
  if (!failing_) {
    // A write committed meanwhile, and this probe failed after it: the
    // storage fails again.
    failing_ = true;
    since_ = now_();
    failed_probes_ = 1;
  }
  error_ = result;
  // ClaimProbe already set the next due time with the doubled delay.
  next_probe_ = std::max(next_probe_, now_() + delay_);
}

std::string StorageBackoff::Describe() const {
  absl::MutexLock l(&mu_);
  return DescribeLocked();
}

std::string StorageBackoff::DescribeLocked() const {
  if (!failing_) return "";
  return absl::StrCat(FailureLocked(),
                      ". No trip runs and the GPU is left alone until it can be written; "
                      "the campaign then goes on by itself");
}

std::string StorageBackoff::FailureLocked() const {
  const double wait = std::max(0.0, absl::ToDoubleSeconds(next_probe_ - now_()));
  return absl::StrCat(
      "the state database cannot be written: ", error_.message(), " (since ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", since_, absl::UTCTimeZone()), "; ",
      failed_probes_, " retr", failed_probes_ == 1 ? "y" : "ies", " failed, the next in ",
      static_cast<int64_t>(std::ceil(wait)), " s)");
}

void StorageBackoff::Hold(HeldState state) {
  absl::MutexLock l(&mu_);
  held_[state.campaign] = std::move(state);
}

std::vector<StorageBackoff::HeldState> StorageBackoff::Held() const {
  absl::MutexLock l(&mu_);
  std::vector<HeldState> out;
  for (const auto& [name, h] : held_) out.push_back(h);
  return out;
}

void StorageBackoff::Release(const std::string& campaign) {
  absl::MutexLock l(&mu_);
  held_.erase(campaign);
}

void StorageBackoff::Show(CampaignRow* row) const {
  absl::MutexLock l(&mu_);
  auto it = held_.find(row->name);
  if (it != held_.end()) {
    row->state = it->second.state;
    row->error = it->second.error;
    if (failing_) {
      absl::StrAppend(&row->error, " (not recorded yet, which it is once the state database "
                                   "can be written: ", FailureLocked(), ")");
    }
    return;
  }
  if (failing_ && (row->state == kCampaignRunning || row->state == kCampaignPausing)) {
    row->state = kCampaignPaused;
    row->error = DescribeLocked();
  }
}

}  // namespace gputravel
