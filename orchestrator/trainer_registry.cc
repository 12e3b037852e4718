#include "orchestrator/trainer_registry.h"

#include <utility>

namespace gputravel {

void TrainerRegistry::Register(const std::string& campaign,
                               std::shared_ptr<RemoteTrainer> trainer) {
  absl::MutexLock l(&mu_);
  trainers_[campaign] = std::move(trainer);
}

void TrainerRegistry::Unregister(const std::string& campaign, const RemoteTrainer* trainer) {
  absl::MutexLock l(&mu_);
  auto it = trainers_.find(campaign);
  if (it != trainers_.end() && it->second.get() == trainer) trainers_.erase(it);
}

std::shared_ptr<RemoteTrainer> TrainerRegistry::WaitFor(const std::string& campaign,
                                                        absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return trainers_.count(campaign) != 0;
  };
  mu_.AwaitWithTimeout(absl::Condition(&present), timeout);
  auto it = trainers_.find(campaign);
  return it == trainers_.end() ? nullptr : it->second;
}

}  // namespace gputravel
