#include "trainer/remote_trainer.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gputravel {
namespace {

constexpr size_t kSha256Bytes = 32;

std::string Seconds(absl::Duration d) { return absl::FormatDuration(d); }

}  // namespace

RemoteTrainer::RemoteTrainer(Options options, ResumePoint resume)
    : options_(std::move(options)),
      loader_(options_.batch_tokens, DataLoader::KeepWindow::kUntilReported),
      resume_(std::move(resume)) {}

RemoteTrainer::~RemoteTrainer() { Close(absl::CancelledError("the trainer's campaign ended")); }

std::string RemoteTrainer::Who() const {
  return absl::StrCat("trainer '", options_.identity, "' of campaign '", options_.campaign, "'");
}

ResumePoint RemoteTrainer::resume() const {
  absl::MutexLock l(&mu_);
  return resume_;
}

bool RemoteTrainer::lease_held() const {
  absl::MutexLock l(&mu_);
  return lease_granted_;
}

void RemoteTrainer::QueueLeaseLocked() {
  if (session_ == 0 || !lease_granted_) return;
  LeaseMessage m;
  m.lease_id = lease_id_;
  m.release = lease_withdrawn_;
  if (m.release) {
    m.timeout_seconds =
        static_cast<uint32_t>(absl::ToInt64Seconds(absl::Ceil(options_.release_timeout,
                                                              absl::Seconds(1))));
  }
  lease_out_.push_back(m);
  loader_.WakeConsumers();  // a stream waiting for a batch sends it now
}

absl::StatusOr<WindowResult> RemoteTrainer::TrainWindow(TrainingWindow window,
                                                        const CommitFn& commit,
                                                        const EventFn& event) {
  const uint64_t trip = window.trip;
  {
    absl::MutexLock l(&mu_);
    if (closed_.has_value()) {
      return absl::CancelledError(absl::StrCat(Who(), " is closed; trip ", trip,
                                               " was not trained"));
    }
    // The device lease comes before the window's first batch.
    ++lease_id_;
    lease_granted_ = true;
    lease_withdrawn_ = false;
    lease_delivered_ = false;
    QueueLeaseLocked();
  }
  auto r = loader_.Offer(std::move(window), options_.window_timeout);
  absl::Status status;
  if (r.ok()) {
    std::optional<WindowReportIn> report;
    ResumePoint after;
    {
      absl::MutexLock l(&mu_);
      report = pending_;
      after.tokens_committed = resume_.tokens_committed + r->tokens;
    }
    if (!report.has_value()) {
      status = absl::InternalError(absl::StrCat(Who(), ": trip ", trip,
                                                " was fully reported without a window report"));
    } else {
      after.committed_trip = trip;
      after.checkpoint_sha256 = report->checkpoint_sha256;
      status = commit(*r, after);
      if (status.ok()) {
        absl::MutexLock l(&mu_);
        resume_ = after;
      }
    }
  } else if (r.status().code() == absl::StatusCode::kDeadlineExceeded) {
    absl::MutexLock l(&mu_);
    status = absl::DeadlineExceededError(absl::StrCat(
        Who(), session_ == 0 ? " is not attached" : " did not report trip " + std::to_string(trip),
        " within ", Seconds(options_.window_timeout), " (trainer.timeout_seconds); the window "
        "is not committed and will be trained again"));
  } else {
    status = absl::Status(r.status().code(),
                          absl::StrCat(Who(), ": ", r.status().message()));
  }
  {
    absl::MutexLock l(&mu_);
    if (pending_.has_value()) {
      pending_.reset();
      commit_status_ = status;
      ++commits_;
    }
  }
  WithdrawLease(event);
  if (!status.ok()) return status;
  return *std::move(r);
}

void RemoteTrainer::WithdrawLease(const EventFn& event) {
  uint64_t id = 0;
  {
    absl::MutexLock l(&mu_);
    if (!lease_granted_) return;
    if (!lease_delivered_) {
      lease_granted_ = false;  // no trainer ever held it
      return;
    }
    lease_withdrawn_ = true;
    id = lease_id_;
    QueueLeaseLocked();
    auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !lease_granted_ || closed_.has_value();
    };
    mu_.AwaitWithTimeout(absl::Condition(&settled), options_.release_timeout);
    if (!lease_granted_) return;
    // Taken back: the GPU goes on without the trainer's release.
    lease_granted_ = false;
    lease_withdrawn_ = false;
  }
  if (event) {
    event(absl::StrCat(Who(), " did not release device lease ", id, " within ",
                       Seconds(options_.release_timeout),
                       " (trainer.release_timeout_seconds); the GPU leaves without it"));
  }
}

void RemoteTrainer::Abandon() { loader_.AbandonCurrent(); }

void RemoteTrainer::Close(absl::Status why) {
  {
    absl::MutexLock l(&mu_);
    if (closed_.has_value()) return;
    closed_ = why.ok() ? absl::OutOfRangeError(absl::StrCat("campaign '", options_.campaign,
                                                            "' is done"))
                       : why;
  }
  loader_.Close();
}

absl::StatusOr<RemoteTrainer::Attached> RemoteTrainer::Attach(absl::Duration wait) {
  absl::MutexLock l(&mu_);
  auto free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return session_ == 0 || closed_.has_value();
  };
  mu_.AwaitWithTimeout(absl::Condition(&free), wait);
  if (closed_.has_value()) return *closed_;
  if (session_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "campaign '", options_.campaign, "' already has an attached trainer"));
  }
  session_ = ++last_session_;
  lease_out_.clear();
  held_.reset();
  QueueLeaseLocked();
  return Attached{session_, resume_};
}

void RemoteTrainer::Detach(uint64_t session) {
  absl::MutexLock l(&mu_);
  if (session_ != session) return;
  session_ = 0;
  lease_out_.clear();
  held_.reset();
  // The window is handed out again from its first batch (under mu_, so the
  // next Attach cannot take a batch first). With a report being committed
  // there is nothing to rewind.
  if (!pending_.has_value()) (void)loader_.Rewind();
}

absl::StatusOr<std::optional<TrainerStreamMessage>> RemoteTrainer::Next(
    uint64_t session, absl::Duration timeout) {
  {
    absl::MutexLock l(&mu_);
    if (closed_.has_value()) return *closed_;
    if (session_ != session) return absl::CancelledError(Who() + ": stream detached");
    if (!lease_out_.empty()) {
      TrainerStreamMessage m;
      m.lease = lease_out_.front();
      lease_out_.pop_front();
      if (!m.lease->release) lease_delivered_ = true;
      return m;
    }
    if (held_.has_value()) {
      std::optional<TrainerStreamMessage> m = std::move(held_);
      held_.reset();
      return m;
    }
  }
  auto b = loader_.Next(timeout);
  if (!b.ok()) {
    if (b.status().code() == absl::StatusCode::kDeadlineExceeded) {
      return std::optional<TrainerStreamMessage>();
    }
    absl::MutexLock l(&mu_);
    if (closed_.has_value()) return *closed_;
    return b.status();
  }
  TrainerStreamMessage m;
  const uint64_t per_batch = 2 * static_cast<uint64_t>(options_.batch_tokens);
  m.index = static_cast<uint32_t>(b->offset_in_window / per_batch);
  auto cur = loader_.Current();
  if (cur.has_value() && cur->trip == b->trip) {
    m.batches_in_window = static_cast<uint32_t>(cur->batches);
  }
  m.batch = std::move(*b);
  absl::MutexLock l(&mu_);
  if (!lease_out_.empty()) {
    // A lease message queued meanwhile goes first.
    held_ = std::move(m);
    TrainerStreamMessage lease;
    lease.lease = lease_out_.front();
    lease_out_.pop_front();
    if (!lease.lease->release) lease_delivered_ = true;
    return lease;
  }
  return m;
}

absl::StatusOr<ResumePoint> RemoteTrainer::Report(const WindowReportIn& report) {
  if (report.checkpoint_sha256.size() != kSha256Bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint_sha256 is ", report.checkpoint_sha256.size(),
        " bytes; a SHA-256 is 32"));
  }
  auto same = [&](const ResumePoint& c) -> absl::StatusOr<ResumePoint> {
    if (c.checkpoint_sha256 == report.checkpoint_sha256) return c;  // a retry
    return absl::AlreadyExistsError(absl::StrCat(
        "trip ", report.trip, " of campaign '", options_.campaign,
        "' is already committed with another checkpoint digest; a window is trained into "
        "the model once"));
  };
  {
    absl::MutexLock l(&mu_);
    if (closed_.has_value() && !closed_->ok() &&
        closed_->code() != absl::StatusCode::kOutOfRange) {
      return *closed_;
    }
    if (report.trip != 0 && report.trip == resume_.committed_trip) return same(resume_);
  }
  if (options_.committed) {
    auto c = options_.committed(report.trip);
    if (!c.ok()) return c.status();
    if (c->has_value()) return same(**c);
  }
  const auto cur = loader_.Current();
  const uint64_t my = [&]() {
    absl::MutexLock l(&mu_);
    return commits_;
  }();
  {
    absl::MutexLock l(&mu_);
    if (!cur.has_value() || cur->trip != report.trip) {
      return absl::FailedPreconditionError(
          cur.has_value()
              ? absl::StrCat("trip ", report.trip, " is not in training; the window being "
                             "delivered is trip ", cur->trip)
              : absl::StrCat("trip ", report.trip, " is not in training (no window is: the GPU "
                             "is travelling); the last committed trip is ",
                             resume_.committed_trip));
    }
    if (session_ == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no trainer is attached to campaign '", options_.campaign, "': attach, load the "
          "Resume checkpoint and train trip ", report.trip, " again from its first batch"));
    }
    if (pending_.has_value()) {
      return absl::UnavailableError(absl::StrCat("a report of trip ", report.trip,
                                                 " is being committed; retry"));
    }
    if (cur->handed < cur->batches) {
      return absl::FailedPreconditionError(absl::StrCat(
          "trip ", report.trip, ": ", cur->handed, " of its ", cur->batches,
          " batches were delivered on this stream; report after the last"));
    }
    if (report.batch_loss.size() != cur->batches) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trip ", report.trip, ": ", report.batch_loss.size(), " batch losses reported; the "
          "window has ", cur->batches, " batches"));
    }
    if (report.tokens != cur->tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trip ", report.trip, ": ", report.tokens, " tokens reported; the window delivered ",
          cur->tokens));
    }
    pending_ = report;
  }
  const uint64_t per_batch = 2 * static_cast<uint64_t>(options_.batch_tokens);
  for (size_t k = 0; k < report.batch_loss.size(); ++k) {
    absl::Status s = loader_.Report(report.trip, k * per_batch, report.batch_loss[k]);
    if (!s.ok()) {
      absl::MutexLock l(&mu_);
      if (pending_.has_value() && commits_ == my) pending_.reset();
      return s;
    }
  }
  absl::MutexLock l(&mu_);
  auto resolved = [this, my]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return commits_ > my || closed_.has_value();
  };
  mu_.Await(absl::Condition(&resolved));
  if (commits_ > my) {
    if (!commit_status_.ok()) return commit_status_;
    return resume_;
  }
  return *closed_;
}

absl::Status RemoteTrainer::ReleaseLease(uint64_t lease_id) {
  absl::MutexLock l(&mu_);
  if (!lease_granted_ || !lease_withdrawn_ || lease_id != lease_id_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lease ", lease_id, " of campaign '", options_.campaign, "' is not being withdrawn",
        lease_granted_ ? absl::StrCat(" (the current lease is ", lease_id_, ")") : ""));
  }
  lease_granted_ = false;
  lease_withdrawn_ = false;
  return absl::OkStatus();
}

}  // namespace gputravel
