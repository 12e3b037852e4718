#ifndef GPUTRAVEL_ORCHESTRATOR_TRAINER_REGISTRY_H_
#define GPUTRAVEL_ORCHESTRATOR_TRAINER_REGISTRY_H_

// The campaigns whose windows an external trainer may take now: the campaign
// engine registers a campaign's RemoteTrainer while it runs the campaign (of
// trainer kind "external") and unregisters it when it stops; the Trainer
// service (orchestrator/trainer_service.h) finds it there for an Attach.

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "trainer/remote_trainer.h"

namespace gputravel {

class TrainerRegistry {
 public:
  // Replaces any earlier registration of `campaign`.
  void Register(const std::string& campaign, std::shared_ptr<RemoteTrainer> trainer);
  // Removes `campaign`'s registration if it is `trainer`.
  void Unregister(const std::string& campaign, const RemoteTrainer* trainer);
  // The campaign's trainer, waiting up to `timeout` for one (null: none).
  std::shared_ptr<RemoteTrainer> WaitFor(const std::string& campaign, absl::Duration timeout);

 private:
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<RemoteTrainer>> trainers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_TRAINER_REGISTRY_H_
