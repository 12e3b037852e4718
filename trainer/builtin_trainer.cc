#include "trainer/builtin_trainer.h"

#include <utility>

namespace gputravel {

absl::StatusOr<std::unique_ptr<BuiltinTrainer>> BuiltinTrainer::Create(
    const NextTokenModelConfig& config) {
  absl::StatusOr<NextTokenModel> model = NextTokenModel::Create(config);
  if (!model.ok()) return model.status();
  return std::unique_ptr<BuiltinTrainer>(new BuiltinTrainer(*std::move(model)));
}

BuiltinTrainer::BuiltinTrainer(NextTokenModel model) : model_(std::move(model)) {}

BuiltinTrainer::~BuiltinTrainer() { Stop(); }

absl::Status BuiltinTrainer::Start(DataLoader* loader) {
  if (loader == nullptr) {
    return absl::InvalidArgumentError("builtin trainer: Start needs a DataLoader");
  }
  if (thread_.joinable()) {
    return absl::FailedPreconditionError(
        "builtin trainer: already running; Stop it before starting again");
  }
  loader_ = loader;
  thread_ = std::thread([this, loader] { Loop(loader); });
  return absl::OkStatus();
}

void BuiltinTrainer::Stop() {
  if (!thread_.joinable()) return;
  // Close is the loop's only way out of a blocking Next.
  loader_->Close();
  thread_.join();
  loader_ = nullptr;
}

void BuiltinTrainer::Loop(DataLoader* loader) {
  for (;;) {
    absl::StatusOr<Batch> batch = loader->Next(absl::InfiniteDuration());
    if (!batch.ok()) {
      if (!absl::IsOutOfRange(batch.status())) {  // not "closed": unexpected
        absl::MutexLock lock(&mu_);
        last_error_ = batch.status();
      }
      return;
    }
    float loss;
    {
      absl::MutexLock lock(&mu_);
      loss = model_.TrainBatch(batch->tokens.data(), batch->tokens.size());
    }
    absl::Status reported = loader->Report(batch->trip, batch->offset_in_window, loss);
    // Cancelled: the window was abandoned under us; carry on with the next.
    if (!reported.ok() && !absl::IsCancelled(reported)) {
      absl::MutexLock lock(&mu_);
      last_error_ = reported;
    }
  }
}

std::string BuiltinTrainer::Checkpoint() const {
  absl::MutexLock lock(&mu_);
  return model_.Serialize();
}

absl::Status BuiltinTrainer::Restore(absl::string_view checkpoint) {
  absl::StatusOr<NextTokenModel> model = NextTokenModel::Deserialize(checkpoint);
  if (!model.ok()) return model.status();
  absl::MutexLock lock(&mu_);
  model_ = *std::move(model);
  return absl::OkStatus();
}

float BuiltinTrainer::Evaluate(const uint16_t* tokens, size_t n) const {
  absl::MutexLock lock(&mu_);
  return model_.Evaluate(tokens, n);
}

uint64_t BuiltinTrainer::tokens_trained() const {
  absl::MutexLock lock(&mu_);
  return model_.tokens_trained();
}

absl::Status BuiltinTrainer::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

}  // namespace gputravel
