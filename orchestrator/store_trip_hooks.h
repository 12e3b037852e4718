#ifndef GPUTRAVEL_ORCHESTRATOR_STORE_TRIP_HOOKS_H_
#define GPUTRAVEL_ORCHESTRATOR_STORE_TRIP_HOOKS_H_

// The hooks of one trip as the campaign engine runs it: every step is
// committed to the store before its side effect (P7), published to
// watchers, and followed by its crash point ("after_commit:<step>",
// util/failpoint.h); training goes through the campaign's trainer.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "orchestrator/state_store.h"
#include "orchestrator/trip_runner.h"
#include "orchestrator/trip_steps.h"
#include "trainer/builtin_trainer.h"
#include "trainer/data_loader.h"
#include "trainer/remote_trainer.h"

namespace gputravel {

class StoreTripHooks final : public TripHooks {
 public:
  // `notify` publishes committed events; `progress` takes the live
  // provisioning progress. `trainer` may be null (no built-in training);
  // `eval_tokens` (may be empty) is the held-out set measured after each
  // window it trained. `remote` (a campaign of trainer kind "external"; null
  // otherwise) trains instead: each window goes to the attached trainer and
  // its report is committed with the trip (RecordTrained with the report).
  StoreTripHooks(StateStore* store, CommitNotifier notify,
                 std::function<void(uint64_t bytes, uint64_t total)> progress,
                 const TripPlan* plan, DataLoader* loader, BuiltinTrainer* trainer,
                 const std::vector<uint16_t>* eval_tokens, double train_timeout_seconds,
                 RemoteTrainer* remote = nullptr);

  absl::Status Step(TripStep step, const std::string& message) override;
  absl::Status RouteOut(const TripCounterWindow& window, const std::string& message) override;
  void Progress(uint64_t bytes, uint64_t total) override;
  absl::Status Provisioned(uint64_t bytes, uint64_t chunks, double seconds, bool digest_match,
                           TripStep then_step, const std::string& then_message) override;
  bool Trains() const override;
  void Rekeyed() override;
  void Scrubbed() override;
  void Attested(const AttestedIdentity& peer) override;
  absl::StatusOr<bool> Train(const std::string& plaintext) override;
  // Called once the GPU is home under a fresh session.
  void set_on_rekeyed(std::function<void()> f);
  // Whether the trip failed because the external trainer did not train its
  // window (not attached, no report in time, or its report not committed):
  // the campaign's trainer.on_failure applies, not the holder's.
  bool trainer_failed() const { return trainer_failed_; }

 private:
  StateStore* const store_;
  const CommitNotifier notify_;
  const std::function<void(uint64_t, uint64_t)> progress_;
  const TripPlan* const plan_;
  DataLoader* const loader_;
  BuiltinTrainer* const trainer_;
  const std::vector<uint16_t>* const eval_tokens_;
  const double train_timeout_;
  std::function<void()> on_rekeyed_;
  RemoteTrainer* const remote_;
  bool trainer_failed_ = false;

  // The trip's window for a loader, holding a copy of `plaintext`.
  TrainingWindow Window(const std::string& plaintext) const;
  absl::StatusOr<bool> TrainRemote(const std::string& plaintext);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_STORE_TRIP_HOOKS_H_
