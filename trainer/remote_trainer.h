#ifndef GPUTRAVEL_TRAINER_REMOTE_TRAINER_H_
#define GPUTRAVEL_TRAINER_REMOTE_TRAINER_H_

// The consumer side of a campaign's DataLoader on behalf of a training
// process outside the orchestrator (proto/trainer.proto), and the steps the
// campaign engine takes for each of the campaign's windows: grant the device
// lease, offer the window, wait for the trainer's report of it, commit the
// report, withdraw the lease and wait for its release.
//
// Exactly once: the campaign's training state is its resume point (the last
// committed trip, the SHA-256 of the trainer's checkpoint reported with it,
// the tokens committed so far). A window is committed only with a report that
// matches what was delivered (trip, batch count, tokens); a trainer that
// detaches before its report is committed gets the same window again, from
// its first batch, at its next Attach (the loader keeps the window's bytes
// until the report: DataLoader::KeepWindow::kUntilReported).
//
// No gRPC here: orchestrator/trainer_service.h serves it. Thread-safe.

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "trainer/data_loader.h"

namespace gputravel {

// Where a campaign's model stands (proto Resume).
struct ResumePoint {
  uint64_t committed_trip = 0;     // 0: nothing committed yet
  std::string checkpoint_sha256;   // empty with committed_trip 0
  uint64_t tokens_committed = 0;
};

// The device lease (proto Lease).
struct LeaseMessage {
  bool release = false;
  uint64_t lease_id = 0;
  uint32_t timeout_seconds = 0;  // with release
};

// One message for the attached trainer: a batch or a lease change.
struct TrainerStreamMessage {
  std::optional<Batch> batch;
  uint32_t index = 0;              // of the batch in its window
  uint32_t batches_in_window = 0;
  std::optional<LeaseMessage> lease;
};

// A window report (proto WindowReport).
struct WindowReportIn {
  uint64_t trip = 0;
  std::vector<double> batch_loss;
  uint64_t tokens = 0;
  std::string checkpoint_sha256;
};

class RemoteTrainer {
 public:
  struct Options {
    std::string campaign;
    std::string identity;  // the trainer's certificate name (for messages)
    size_t batch_tokens = 0;
    uint32_t vocab = 0;
    // Attach, train and report one window within this, or the window fails.
    absl::Duration window_timeout = absl::Seconds(600);
    // Release the lease within this after it is withdrawn.
    absl::Duration release_timeout = absl::Seconds(30);
    // The checkpoint digest and the campaign's tokens committed through
    // `trip`, if `trip` is a trip of this campaign whose window is committed
    // (nullopt if it is not). Answers repeated reports of older trips.
    std::function<absl::StatusOr<std::optional<ResumePoint>>(uint64_t trip)> committed;
  };

  RemoteTrainer(Options options, ResumePoint resume);
  // Close() first if not closed; no thread may be inside any method.
  ~RemoteTrainer();
  RemoteTrainer(const RemoteTrainer&) = delete;
  RemoteTrainer& operator=(const RemoteTrainer&) = delete;

  // ---- The engine's side.

  // Commits a reported window with `after` (the new resume point) in the
  // same transaction as the trip's training step; the window's loss summary
  // is `result`. A non-OK status leaves the window uncommitted.
  using CommitFn = std::function<absl::Status(const WindowResult& result,
                                              const ResumePoint& after)>;
  // Something the operator should see (an event), e.g. a lease not released.
  using EventFn = std::function<void(const std::string& message)>;

  // Grants a new lease, offers `window`, waits for the trainer's report and
  // commits it with `commit`, then withdraws the lease and waits for its
  // release (release_timeout; a late release is an `event`, not an error:
  // the window is committed). A grant no stream received is withdrawn
  // without waiting. Errors name the trainer: DeadlineExceeded when
  // it did not attach or report within window_timeout, the commit's error,
  // Cancelled when Abandon or Close was called meanwhile.
  absl::StatusOr<WindowResult> TrainWindow(TrainingWindow window, const CommitFn& commit,
                                           const EventFn& event);

  // The window in training is abandoned (its TrainWindow returns Cancelled).
  void Abandon();
  // No more windows: every stream ends with `why` (OK: the campaign is
  // done), waiting reports get it too. Idempotent; the first reason stays.
  void Close(absl::Status why);

  // ---- The trainer's side (one attached stream at a time).

  struct Attached {
    uint64_t session = 0;
    ResumePoint resume;
  };
  // Waits up to `wait` for an attached stream to detach (a trainer that
  // reconnects at once, before its old stream's end was noticed), then
  // FailedPrecondition if one still is; the Close reason once closed
  // (OutOfRange: the campaign is done).
  absl::StatusOr<Attached> Attach(absl::Duration wait = absl::ZeroDuration());
  // The stream of `session` ended: a window it did not report is handed out
  // again from its first batch to the next Attach.
  void Detach(uint64_t session);
  // The next message for `session`, waiting up to `timeout` (nullopt: none
  // yet; the GPU may be travelling). The Close reason once closed (OK:
  // the campaign is done); Cancelled when `session` is not attached.
  absl::StatusOr<std::optional<TrainerStreamMessage>> Next(uint64_t session,
                                                           absl::Duration timeout);

  // Checks `report` against the window delivered and blocks until it is
  // committed; returns the resume point it made. A report of a committed
  // trip with the same digest returns that trip's point (a retry); with
  // another digest AlreadyExists. FailedPrecondition for a trip that is not
  // the one in training (naming it), while no stream is attached, or before
  // every batch was delivered; InvalidArgument for a batch count, token
  // count or digest that does not match; Unavailable while another report
  // of the window is being committed.
  absl::StatusOr<ResumePoint> Report(const WindowReportIn& report);

  // The trainer released lease `lease_id`. FailedPrecondition if that lease
  // is not being withdrawn (unknown, never withdrawn, or released already).
  absl::Status ReleaseLease(uint64_t lease_id);

  ResumePoint resume() const;
  const Options& options() const { return options_; }
  // Whether the trainer holds the device lease now (granted, not released).
  bool lease_held() const;

 private:
  // Who the trainer is, for messages: "trainer 'name' of campaign 'c'".
  std::string Who() const;
  // Queues the lease's current state for the attached stream.
  void QueueLeaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Withdraws the lease and waits for its release (or the timeout).
  void WithdrawLease(const EventFn& event);

  const Options options_;
  DataLoader loader_;

  mutable absl::Mutex mu_;
  std::optional<absl::Status> closed_ ABSL_GUARDED_BY(mu_);
  ResumePoint resume_ ABSL_GUARDED_BY(mu_);
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 0;  // 0: none attached
  uint64_t last_session_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<LeaseMessage> lease_out_ ABSL_GUARDED_BY(mu_);
  // A batch taken from the loader while a lease message was queued.
  std::optional<TrainerStreamMessage> held_ ABSL_GUARDED_BY(mu_);
  // The lease: granted (held) -> withdrawn (release sent) -> released.
  uint64_t lease_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool lease_granted_ ABSL_GUARDED_BY(mu_) = false;
  bool lease_withdrawn_ ABSL_GUARDED_BY(mu_) = false;
  // The grant reached a stream (a trainer that never got it holds nothing:
  // withdrawing it then waits for no release).
  bool lease_delivered_ ABSL_GUARDED_BY(mu_) = false;
  // A report fed to the loader and waiting for its commit.
  std::optional<WindowReportIn> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t commits_ ABSL_GUARDED_BY(mu_) = 0;  // resolved reports
  absl::Status commit_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_TRAINER_REMOTE_TRAINER_H_
