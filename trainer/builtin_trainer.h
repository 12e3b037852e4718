#ifndef GPUTRAVEL_TRAINER_BUILTIN_TRAINER_H_
#define GPUTRAVEL_TRAINER_BUILTIN_TRAINER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "trainer/data_loader.h"
#include "trainer/next_token_model.h"

namespace gputravel {

// The orchestrator's built-in trainer: owns a NextTokenModel and a thread that
// runs the consumer side of a DataLoader (Next -> TrainBatch -> Report) until
// the loader is closed. The producer (campaign engine) Offers windows and gets
// each window's loss summary back from Offer.
//
// Threading: Start, Stop and the destructor belong to one owner thread.
// Checkpoint, Restore, Evaluate and the accessors are thread-safe, but a
// checkpoint is only consistent with the windows reported so far when taken at
// a window boundary — see Checkpoint.
class BuiltinTrainer {
 public:
  static absl::StatusOr<std::unique_ptr<BuiltinTrainer>> Create(
      const NextTokenModelConfig& config);
  // Stops (closing the loader) if still running.
  ~BuiltinTrainer();
  BuiltinTrainer(const BuiltinTrainer&) = delete;
  BuiltinTrainer& operator=(const BuiltinTrainer&) = delete;

  // Starts the training thread on `loader`, which must outlive Stop().
  // FailedPrecondition if already started (Stop first).
  absl::Status Start(DataLoader* loader);

  // Closes the loader (no more windows; a window being trained is abandoned
  // and its Offer returns Cancelled — to finish it, wait for Offer to return
  // first) and joins the training thread. Idempotent; a later Start may
  // reuse the model with a new loader.
  void Stop();

  // The model's checkpoint (NextTokenModel::Serialize). To be called by the
  // producer after Offer returned and before the next Offer, when no batch is
  // in flight, so the checkpoint holds exactly the reported windows.
  std::string Checkpoint() const;

  // Replaces the model with a checkpoint's (crash recovery). Call before
  // Start, or between windows like Checkpoint. On error the model is
  // unchanged.
  absl::Status Restore(absl::string_view checkpoint);

  // Mean loss of `tokens` under the current model (e.g. on held-out data).
  float Evaluate(const uint16_t* tokens, size_t n) const;

  // Next-token predictions trained on so far (survives Restore).
  uint64_t tokens_trained() const;

  // The last unexpected error of the training loop (OK if none): anything but
  // the loader closing or a report landing after its window was abandoned.
  absl::Status last_error() const;

 private:
  explicit BuiltinTrainer(NextTokenModel model);
  void Loop(DataLoader* loader);

  mutable absl::Mutex mu_;
  NextTokenModel model_ ABSL_GUARDED_BY(mu_);
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);

  // Owner thread only.
  DataLoader* loader_ = nullptr;
  std::thread thread_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_TRAINER_BUILTIN_TRAINER_H_
