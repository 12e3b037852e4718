#include "trainer/data_loader.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

void ZeroizeAndClear(std::string* s) {
  // Growing to the capacity never reallocates, and makes every byte of the
  // buffer (including stale bytes past size()) legitimately writable.
  s->resize(s->capacity());
  if (!s->empty()) Zeroize(&(*s)[0], s->size());
  s->clear();
}

void ZeroizeAndClear(std::vector<uint16_t>* v) {
  v->resize(v->capacity());
  if (!v->empty()) Zeroize(v->data(), v->size() * sizeof(uint16_t));
  v->clear();
}

TrainingWindow::~TrainingWindow() { ZeroizeAndClear(&tokens); }

TrainingWindow::TrainingWindow(TrainingWindow&& other) noexcept
    : campaign(std::move(other.campaign)),
      trip(other.trip),
      holder(std::move(other.holder)),
      window_offset(other.window_offset),
      tokens(std::move(other.tokens)) {
  // A moved-from short string may keep its bytes in the inline buffer.
  ZeroizeAndClear(&other.tokens);
}

TrainingWindow& TrainingWindow::operator=(TrainingWindow&& other) noexcept {
  if (this != &other) {
    ZeroizeAndClear(&tokens);
    campaign = std::move(other.campaign);
    trip = other.trip;
    holder = std::move(other.holder);
    window_offset = other.window_offset;
    tokens = std::move(other.tokens);
    ZeroizeAndClear(&other.tokens);
  }
  return *this;
}

Batch::~Batch() { ZeroizeAndClear(&tokens); }

Batch::Batch(Batch&& other) noexcept
    : trip(other.trip),
      holder(std::move(other.holder)),
      offset_in_window(other.offset_in_window),
      tokens(std::move(other.tokens)),
      last_of_window(other.last_of_window) {
  ZeroizeAndClear(&other.tokens);
}

Batch& Batch::operator=(Batch&& other) noexcept {
  if (this != &other) {
    ZeroizeAndClear(&tokens);
    trip = other.trip;
    holder = std::move(other.holder);
    offset_in_window = other.offset_in_window;
    tokens = std::move(other.tokens);
    last_of_window = other.last_of_window;
    ZeroizeAndClear(&other.tokens);
  }
  return *this;
}

struct DataLoader::Slot {
  TrainingWindow window;
  uint64_t num_tokens = 0;     // N: whole uint16 tokens in the window
  uint64_t total_batches = 0;  // ceil((N - 1) / B)
  uint64_t handed = 0;         // batches given out by Next
  uint64_t reported = 0;       // batches whose loss came back
  double weighted_loss = 0;    // sum of loss * pairs over reported batches
  uint64_t pairs_reported = 0;
  double first_loss = 0;
  double last_loss = 0;
  Outcome outcome = Outcome::kPending;
};

DataLoader::DataLoader(size_t batch_tokens, KeepWindow keep)
    : batch_tokens_(batch_tokens), keep_(keep) {}

DataLoader::~DataLoader() = default;

void DataLoader::DetachCurrentLocked(Outcome outcome) {
  ZeroizeAndClear(&current_->window.tokens);
  current_->outcome = outcome;
  has_detached_ = true;
  detached_trip_ = current_->window.trip;
  current_ = nullptr;
}

absl::StatusOr<WindowResult> DataLoader::Offer(TrainingWindow window,
                                               absl::Duration timeout) {
  // The slot lives in this frame; every exit path destroys it, and with it
  // the window's bytes (TrainingWindow zeroizes itself).
  Slot slot;
  slot.window = std::move(window);
  const uint64_t trip = slot.window.trip;
  if (batch_tokens_ == 0) {
    return absl::InvalidArgumentError(
        "data loader: batch_tokens is 0; construct the DataLoader with at "
        "least 1 token per batch");
  }
  slot.num_tokens = slot.window.tokens.size() / 2;  // odd trailing byte ignored
  absl::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data loader is closed; trip ", trip, " cannot be offered"));
  }
  if (current_ != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data loader: trip ", trip, " offered while trip ",
        current_->window.trip, " is still being trained; offer windows one "
        "at a time"));
  }
  if (slot.num_tokens < 2) return WindowResult{};  // no pair to learn

  const uint64_t pairs = slot.num_tokens - 1;
  slot.total_batches = pairs / batch_tokens_ + (pairs % batch_tokens_ != 0);
  // A rest shorter than a batch joins the last batch: no optimiser step on
  // fewer than batch_tokens tokens (a holder's min_batch_tokens), whatever
  // window length the campaign chose.
  if (slot.total_batches > 1 &&
      slot.num_tokens - (slot.total_batches - 1) * batch_tokens_ < batch_tokens_) {
    --slot.total_batches;
  }
  current_ = &slot;
  auto settled = [&slot]() { return slot.outcome != Outcome::kPending; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&settled), timeout)) {
    const uint64_t reported = slot.reported;
    DetachCurrentLocked(Outcome::kTimedOut);
    return absl::DeadlineExceededError(absl::StrCat(
        "data loader: the trainer reported ", reported, " of ",
        slot.total_batches, " batches of trip ", trip, " (holder ",
        slot.window.holder, ") within ", absl::FormatDuration(timeout),
        "; the window was abandoned. Is the training loop running?"));
  }
  switch (slot.outcome) {
    case Outcome::kDone: {
      WindowResult result;
      result.batches = slot.total_batches;
      result.tokens = slot.num_tokens;
      result.mean_loss = slot.weighted_loss / slot.pairs_reported;
      result.first_loss = slot.first_loss;
      result.last_loss = slot.last_loss;
      return result;
    }
    case Outcome::kClosed:
      return absl::CancelledError(absl::StrCat(
          "data loader closed while trip ", trip, " was being trained (",
          slot.reported, " of ", slot.total_batches, " batches reported)"));
    default:
      return absl::CancelledError(absl::StrCat(
          "trip ", trip, " (holder ", slot.window.holder,
          ") was abandoned after ", slot.reported, " of ", slot.total_batches,
          " batches were reported"));
  }
}

absl::StatusOr<Batch> DataLoader::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const uint64_t wakes = wakes_;
  auto ready = [this, wakes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return closed_ || wakes_ != wakes ||
           (current_ != nullptr && current_->handed < current_->total_batches);
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout) ||
      (wakes_ != wakes && !closed_ &&
       !(current_ != nullptr && current_->handed < current_->total_batches))) {
    return absl::DeadlineExceededError(absl::StrCat(
        "data loader: no batch within ", absl::FormatDuration(timeout),
        " (GPU still travelling); call Next again"));
  }
  if (closed_) {
    return absl::OutOfRangeError("data loader: no more data (closed)");
  }
  Slot& slot = *current_;
  const uint64_t k = slot.handed++;
  const uint64_t begin = k * batch_tokens_;
  const uint64_t remaining = slot.num_tokens - begin;  // >= 2 by construction
  // B tokens plus the next batch's first token, or (the last batch) the
  // rest of the window.
  const bool last = slot.handed == slot.total_batches;
  const uint64_t len = last ? remaining : batch_tokens_ + 1;

  Batch batch;
  batch.trip = slot.window.trip;
  batch.holder = slot.window.holder;
  batch.offset_in_window = begin * 2;
  batch.last_of_window = last;
  batch.tokens.resize(len);
  const unsigned char* bytes =
      reinterpret_cast<const unsigned char*>(slot.window.tokens.data()) + begin * 2;
  for (uint64_t i = 0; i < len; ++i) {
    batch.tokens[i] = static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
  }
  // Every byte now lives in the consumer's batches: drop the plaintext.
  if (batch.last_of_window && keep_ == KeepWindow::kUntilHandedOut) {
    ZeroizeAndClear(&slot.window.tokens);
  }
  return batch;
}

absl::Status DataLoader::Report(uint64_t trip, uint64_t offset_in_window,
                                double loss) {
  absl::MutexLock lock(&mu_);
  Slot* slot = current_;
  if (slot != nullptr && slot->window.trip == trip && slot->reported < slot->handed) {
    const uint64_t k = slot->reported;
    const uint64_t expected = k * batch_tokens_ * 2;
    if (offset_in_window != expected) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data loader: Report(trip ", trip, ", offset ", offset_in_window,
          "): expected the loss of the batch at offset ", expected, " (batch ",
          k + 1, " of ", slot->total_batches,
          "); report batches in the order Next handed them out"));
    }
    const uint64_t begin = k * batch_tokens_;
    const uint64_t pairs = k + 1 == slot->total_batches ? slot->num_tokens - 1 - begin
                                                        : batch_tokens_;
    slot->weighted_loss += loss * static_cast<double>(pairs);
    slot->pairs_reported += pairs;
    if (k == 0) slot->first_loss = loss;
    slot->last_loss = loss;
    if (++slot->reported == slot->total_batches) {
      slot->outcome = Outcome::kDone;  // wakes its Offer
      current_ = nullptr;
    }
    return absl::OkStatus();
  }
  if (has_detached_ && trip == detached_trip_) {
    return absl::CancelledError(absl::StrCat(
        "data loader: trip ", trip, " was abandoned; its loss is discarded"));
  }
  if (closed_) {
    return absl::CancelledError("data loader: closed; the loss is discarded");
  }
  if (slot == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data loader: Report(trip ", trip, ", offset ", offset_in_window,
        "): no window is being trained"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "data loader: Report(trip ", trip, ", offset ", offset_in_window,
      "): no such batch awaits a report (trip ", slot->window.trip, ": ",
      slot->reported, " of ", slot->handed, " handed-out batches reported)"));
}

absl::Status DataLoader::Rewind() {
  absl::MutexLock lock(&mu_);
  if (keep_ != KeepWindow::kUntilReported) {
    return absl::FailedPreconditionError(
        "data loader: Rewind needs a loader that keeps each window until it is reported");
  }
  if (current_ == nullptr) {
    return absl::FailedPreconditionError("data loader: Rewind: no window is being trained");
  }
  if (current_->reported != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data loader: Rewind: ", current_->reported, " batches of trip ",
        current_->window.trip, " were already reported"));
  }
  current_->handed = 0;
  return absl::OkStatus();
}

std::optional<DataLoader::CurrentWindow> DataLoader::Current() {
  absl::MutexLock lock(&mu_);
  if (current_ == nullptr) return std::nullopt;
  CurrentWindow c;
  c.trip = current_->window.trip;
  c.holder = current_->window.holder;
  c.tokens = current_->num_tokens;
  c.batches = current_->total_batches;
  c.handed = current_->handed;
  c.reported = current_->reported;
  return c;
}

void DataLoader::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  if (current_ != nullptr) DetachCurrentLocked(Outcome::kClosed);
}

void DataLoader::WakeConsumers() {
  absl::MutexLock lock(&mu_);
  ++wakes_;
}

void DataLoader::AbandonCurrent() {
  absl::MutexLock lock(&mu_);
  if (current_ != nullptr) DetachCurrentLocked(Outcome::kAbandoned);
}

}  // namespace gputravel
