#ifndef GPUTRAVEL_TRAINER_DATA_LOADER_H_
#define GPUTRAVEL_TRAINER_DATA_LOADER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gputravel {

// One trip's plaintext window of a holder's llm.c token data, as the campaign
// engine hands it to the trainer. Move-only, so a second copy of plaintext is
// visible in review; the token bytes are zeroized (including spare capacity)
// on destruction and before being overwritten by a move assignment.
struct TrainingWindow {
  TrainingWindow() = default;
  ~TrainingWindow();
  TrainingWindow(TrainingWindow&& other) noexcept;
  TrainingWindow& operator=(TrainingWindow&& other) noexcept;
  TrainingWindow(const TrainingWindow&) = delete;
  TrainingWindow& operator=(const TrainingWindow&) = delete;

  std::string campaign;
  uint64_t trip = 0;
  std::string holder;
  // Byte offset of this window in the holder's dataset payload.
  uint64_t window_offset = 0;
  // Raw llm.c token bytes (uint16 little-endian). A trailing odd byte is
  // ignored.
  std::string tokens;
};

// A slice of a window handed to the training loop. Move-only and zeroized on
// destruction like TrainingWindow.
//
// Overlap: batch k of a window of N tokens holds tokens [k·B, k·B+B+1)
// where B = batch_tokens: B tokens plus the first token of the next batch, so
// the pair that straddles two batches is trained exactly once; the last batch
// holds the rest [k·B, N). A window of N >= 2 tokens yields ceil((N-1)/B)
// batches, one fewer when the last would hold fewer than B tokens (that rest
// joins the batch before it): every pair (i, i+1) of the window is in exactly
// one batch, and no batch has fewer than min(B, N) tokens. Windows are
// not stitched to each other (they may come from different holders).
struct Batch {
  Batch() = default;
  ~Batch();
  Batch(Batch&& other) noexcept;
  Batch& operator=(Batch&& other) noexcept;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  uint64_t trip = 0;
  std::string holder;
  // Byte offset of tokens[0] in the window (add TrainingWindow::window_offset
  // for the offset in the dataset payload). Always a multiple of 2·B.
  uint64_t offset_in_window = 0;
  std::vector<uint16_t> tokens;
  bool last_of_window = false;
};

// What the trainer made of one window.
struct WindowResult {
  uint64_t batches = 0;
  // Tokens of the window delivered (N; the overlap tokens counted once).
  uint64_t tokens = 0;
  // Mean of the batch losses weighted by each batch's pair count, i.e. the
  // mean loss per predicted token over the window (nats).
  double mean_loss = 0;
  double first_loss = 0;
  double last_loss = 0;
};

// Pull-mode data loader between the campaign engine (producer thread) and a
// training loop (consumer thread), after llm.c's data loader: the trainer asks
// for its next batch and blocks while the GPU is travelling (no window yet).
//
// Protocol: the producer Offers one window at a time and blocks until the
// consumer has reported the loss of every batch of it. The consumer loops
// Next -> train -> Report. Several batches may be taken before reporting, but
// reports must come in the order the batches were handed out.
//
// Plaintext hygiene: the window's bytes are zeroized as soon as its last batch
// was handed out (the consumer owns its Batch copies, which zeroize
// themselves), or when it is abandoned, times out or the loader closes. A
// loader made with kUntilReported keeps them until the window is fully
// reported (or abandoned, timed out, closed) instead, so that Rewind can hand
// the window out again to a consumer that lost its batches (a remote trainer
// that reconnects: trainer/remote_trainer.h).
//
// Thread-safe.
class DataLoader {
 public:
  // How long the current window's bytes stay in the loader (see above).
  enum class KeepWindow { kUntilHandedOut, kUntilReported };

  // batch_tokens: tokens per batch, not counting the one overlap token. 0 is
  // refused by every Offer with InvalidArgument.
  explicit DataLoader(size_t batch_tokens,
                      KeepWindow keep = KeepWindow::kUntilHandedOut);
  // Destroy only once no thread is inside Offer, Next or Report.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Producer: hands `window` to the trainer and blocks until the loss of every
  // batch of it was reported; returns the loss summary. Errors:
  //   FailedPrecondition  the loader is closed, or another window is still
  //                       being trained (offer windows one at a time);
  //   InvalidArgument     batch_tokens is 0;
  //   DeadlineExceeded    not fully reported within `timeout` (the window is
  //                       then abandoned as by AbandonCurrent);
  //   Cancelled           AbandonCurrent() or Close() was called meanwhile.
  // A window of fewer than 2 tokens has no pair to learn: it returns at once
  // with an all-zero result. The window's bytes are zeroized in every case.
  absl::StatusOr<WindowResult> Offer(TrainingWindow window, absl::Duration timeout);

  // Consumer: the next batch, in window order. Blocks while there is none
  // (GPU travelling). Errors:
  //   OutOfRange        "no more data": the loader was closed; the training
  //                     loop should exit;
  //   DeadlineExceeded  nothing arrived within `timeout`, or WakeConsumers
  //                     was called meanwhile (call again).
  absl::StatusOr<Batch> Next(absl::Duration timeout);

  // Consumer: the loss (mean nats over the batch's pairs) of the oldest batch
  // handed out and not yet reported, identified by its trip and
  // offset_in_window. Errors:
  //   Cancelled           its window was abandoned (or the loader closed): the
  //                       loss is discarded; go back to Next;
  //   FailedPrecondition  no such batch is awaiting a report (wrong trip,
  //                       wrong offset or out of order); the message says
  //                       which batch is expected.
  // A non-finite loss is accepted and makes the window's summary non-finite,
  // so the producer sees that training diverged.
  absl::Status Report(uint64_t trip, uint64_t offset_in_window, double loss);

  // No more windows: abandons the current window (if any) and wakes every
  // waiter. Offer then fails with FailedPrecondition and Next with OutOfRange.
  // Idempotent. To finish the current window first, wait for Offer to return.
  void Close();

  // Makes every Next waiting now return DeadlineExceeded at once (the
  // consumer has something else to do: a remote trainer's lease message).
  void WakeConsumers();

  // Abandons the current window (campaign cancelled): its Offer returns
  // Cancelled, its bytes are zeroized, its unreported batches get Cancelled
  // from Report, and Next waits for the next window. No-op without a window.
  void AbandonCurrent();

  // Hands the current window out again from its first batch: its batches
  // handed out and not reported are forgotten (their reports are refused
  // with FailedPrecondition). FailedPrecondition without a current window,
  // when a batch of it was already reported, or with a loader made
  // kUntilHandedOut (its bytes may be gone).
  absl::Status Rewind();

  // The window being trained now, as the consumer sees it.
  struct CurrentWindow {
    uint64_t trip = 0;
    std::string holder;
    uint64_t tokens = 0;   // N: whole uint16 tokens
    uint64_t batches = 0;  // batches it is cut into
    uint64_t handed = 0;   // handed out by Next since the Offer or Rewind
    uint64_t reported = 0;
  };
  // nullopt while there is none (the GPU travelling).
  std::optional<CurrentWindow> Current();

  size_t batch_tokens() const { return batch_tokens_; }

 private:
  // The window being trained; owned by the stack frame of its Offer.
  struct Slot;
  enum class Outcome { kPending, kDone, kAbandoned, kTimedOut, kClosed };

  // Zeroizes the current window's bytes, marks it `outcome` (waking its
  // Offer), detaches it and remembers its trip for Report. Requires a current
  // window.
  void DetachCurrentLocked(Outcome outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t batch_tokens_;
  const KeepWindow keep_;
  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t wakes_ ABSL_GUARDED_BY(mu_) = 0;  // WakeConsumers calls
  Slot* current_ ABSL_GUARDED_BY(mu_) = nullptr;
  // The trip of the last window detached before it was fully reported:
  // late reports for it get Cancelled rather than FailedPrecondition.
  bool has_detached_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t detached_trip_ ABSL_GUARDED_BY(mu_) = 0;
};

// Zeroizes a plaintext buffer's whole capacity, then empties it.
void ZeroizeAndClear(std::string* s);
void ZeroizeAndClear(std::vector<uint16_t>* v);

}  // namespace gputravel

#endif  // GPUTRAVEL_TRAINER_DATA_LOADER_H_
