#include "orchestrator/trainer_service.h"

#include <utility>

#include "auth/authorize.h"
#include "auth/identity.h"
#include "orchestrator/trip_steps.h"
#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {
namespace {

// How often a waiting Attach looks at its campaign and its call again.
constexpr absl::Duration kPoll = absl::Milliseconds(200);

bool Final(const std::string& state) {
  return state == kCampaignCompleted || state == kCampaignFailed ||
         state == kCampaignCancelled;
}

// The stream's end for a campaign in a final state.
grpc::Status FinalStatus(const std::string& campaign, const TrainerCampaignInfo& info) {
  if (info.state == kCampaignCompleted) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      "campaign '" + campaign + "' is " + info.state +
                          (info.error.empty() ? "" : ": " + info.error));
}

// A RemoteTrainer's end of a stream: OutOfRange means the campaign is done.
grpc::Status StreamEnd(const absl::Status& s) {
  if (s.code() == absl::StatusCode::kOutOfRange) return grpc::Status::OK;
  return ToGrpc(s);
}

}  // namespace

MethodRoles TrainerServiceRoles() {
  MethodRoles m;
  for (const char* method : {"Attach", "ReportWindow", "ReleaseLease"}) {
    m[std::string("/gputravel.v1.Trainer/") + method] = {kRoleTrainer};
  }
  return m;
}

ServerLimits TrainerServiceLimits() {
  ServerLimits l;
  l.max_receive_bytes = 16 << 20;  // 2 Mi batch losses
  l.max_send_bytes = 34 << 20;     // a batch of 16 Mi + 1 tokens
  l.max_concurrent_streams = 16;
  l.quota_bytes = int64_t{256} << 20;
  l.max_threads = 64;
  return l;
}

void TrainerServiceImpl::Shutdown() {
  absl::MutexLock l(&mu_);
  stopping_ = true;
}

bool TrainerServiceImpl::stopping() {
  absl::MutexLock l(&mu_);
  return stopping_;
}

grpc::Status TrainerServiceImpl::Admit(grpc::ServerContext* ctx, const std::string& campaign,
                                       TrainerCampaignInfo* info) {
  Identity caller;
  grpc::Status authz = Authorize(*ctx, {kRoleTrainer}, &caller);
  if (!authz.ok()) return authz;
  auto found = lookup_(campaign);
  if (!found.ok()) return ToGrpc(found.status());
  *info = *std::move(found);
  // The name first: a trainer learns nothing of a campaign not its own.
  if (info->identity.empty() || caller.name != info->identity) {
    GT_LOG(1, "trainer service: ", DescribeIdentity(caller), " refused for campaign '",
           campaign, "'");
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        DescribeIdentity(caller) + " is not the trainer of campaign '" +
                            campaign + "'");
  }
  if (info->trainer_kind != "external") {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "campaign '" + campaign + "' has trainer kind \"" + info->trainer_kind +
                            "\", not \"external\"");
  }
  return grpc::Status::OK;
}

grpc::Status TrainerServiceImpl::AdmitRunning(grpc::ServerContext* ctx,
                                              const std::string& campaign,
                                              std::shared_ptr<RemoteTrainer>* trainer) {
  TrainerCampaignInfo info;
  grpc::Status admitted = Admit(ctx, campaign, &info);
  if (!admitted.ok()) return admitted;
  *trainer = registry_->WaitFor(campaign, absl::ZeroDuration());
  if (*trainer == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "campaign '" + campaign + "' is " + info.state +
                            " and not running: no window is in training and no lease held");
  }
  return grpc::Status::OK;
}

std::shared_ptr<RemoteTrainer> TrainerServiceImpl::WaitForTrainer(
    grpc::ServerContext* ctx, const std::string& campaign, const TrainerCampaignInfo& admitted,
    grpc::Status* end) {
  // The campaign the caller was admitted to, still: not deleted and created
  // again under its name, perhaps for another trainer, while it waited.
  auto same_campaign = [&](const TrainerCampaignInfo& now) {
    if (now.instance == admitted.instance && now.identity == admitted.identity) return true;
    *end = grpc::Status(grpc::StatusCode::ABORTED,
                        "campaign '" + campaign +
                            "' was deleted and created again since this trainer attached; "
                            "attach again");
    return false;
  };
  while (true) {
    if (stopping()) {
      *end = grpc::Status(grpc::StatusCode::CANCELLED, "the orchestrator is shutting down");
      return nullptr;
    }
    if (ctx->IsCancelled()) {
      *end = grpc::Status(grpc::StatusCode::CANCELLED, "the trainer cancelled");
      return nullptr;
    }
    auto info = lookup_(campaign);
    if (!info.ok()) {
      *end = ToGrpc(info.status());
      return nullptr;
    }
    if (!same_campaign(*info)) return nullptr;
    if (Final(info->state)) {
      *end = FinalStatus(campaign, *info);
      return nullptr;
    }
    // Not running now (created, paused, or between two runs): wait for it.
    auto trainer = registry_->WaitFor(campaign, kPoll);
    if (trainer == nullptr) continue;
    // Read again after the registry: its trainer is of the campaign now.
    auto now = lookup_(campaign);
    if (!now.ok()) {
      *end = ToGrpc(now.status());
      return nullptr;
    }
    if (!same_campaign(*now)) return nullptr;
    return trainer;
  }
}

grpc::Status TrainerServiceImpl::EnterAttach(const std::string& caller,
                                             const std::string& campaign) {
  absl::MutexLock l(&mu_);
  if (attaches_by_campaign_[campaign] >= kMaxAttachesPerCampaign) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "campaign '" + campaign + "' already has " +
                            std::to_string(kMaxAttachesPerCampaign) +
                            " Attach streams open; one trainer attaches once");
  }
  if (attaches_by_caller_[caller] >= kMaxAttachesPerCaller) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        caller + " already has " + std::to_string(kMaxAttachesPerCaller) +
                            " Attach streams open");
  }
  ++attaches_by_campaign_[campaign];
  ++attaches_by_caller_[caller];
  return grpc::Status::OK;
}

void TrainerServiceImpl::LeaveAttach(const std::string& caller, const std::string& campaign) {
  absl::MutexLock l(&mu_);
  if (--attaches_by_campaign_[campaign] <= 0) attaches_by_campaign_.erase(campaign);
  if (--attaches_by_caller_[caller] <= 0) attaches_by_caller_.erase(caller);
}

grpc::Status TrainerServiceImpl::Attach(grpc::ServerContext* ctx, const v1::AttachRequest* req,
                                        grpc::ServerWriter<v1::TrainerMessage>* writer) {
  TrainerCampaignInfo info;
  grpc::Status admitted = Admit(ctx, req->campaign(), &info);
  if (!admitted.ok()) return admitted;
  // Bounded before it may wait: a waiting stream holds a server thread.
  grpc::Status entered = EnterAttach(info.identity, req->campaign());
  if (!entered.ok()) return entered;
  struct Leave {
    TrainerServiceImpl* self;
    const std::string& caller;
    const std::string& campaign;
    ~Leave() { self->LeaveAttach(caller, campaign); }
  } leave{this, info.identity, req->campaign()};
  grpc::Status end;
  while (true) {
    std::shared_ptr<RemoteTrainer> trainer = WaitForTrainer(ctx, req->campaign(), info, &end);
    if (trainer == nullptr) return end;
    // A trainer that reconnects at once may come before its old stream's
    // end was noticed (within kPoll).
    auto attached = trainer->Attach(5 * kPoll);
    if (!attached.ok()) {
      if (attached.status().code() == absl::StatusCode::kFailedPrecondition) {
        return ToGrpc(attached.status());  // another stream is attached
      }
      if (attached.status().code() == absl::StatusCode::kOutOfRange) return grpc::Status::OK;
      // A run that just ended: wait for the next one (or the final state).
      absl::SleepFor(kPoll);
      continue;
    }
    const uint64_t session = attached->session;
    GT_LOG(1, "trainer '", info.identity, "' attached to campaign '", req->campaign(),
           "' (resumes after trip ", attached->resume.committed_trip, ")");
    v1::TrainerMessage first;
    v1::Resume* r = first.mutable_resume();
    r->set_committed_trip(attached->resume.committed_trip);
    r->set_checkpoint_sha256(attached->resume.checkpoint_sha256);
    r->set_tokens_committed(attached->resume.tokens_committed);
    r->set_batch_tokens(trainer->options().batch_tokens);
    r->set_vocab(trainer->options().vocab);
    absl::Status result = absl::OkStatus();
    bool open = writer->Write(first);
    while (open) {
      if (ctx->IsCancelled()) break;
      if (stopping()) {
        result = absl::CancelledError("the orchestrator is shutting down");
        break;
      }
      auto next = trainer->Next(session, kPoll);
      if (!next.ok()) {
        result = next.status();
        break;
      }
      if (!next->has_value()) continue;
      TrainerStreamMessage& m = **next;
      v1::TrainerMessage out;
      if (m.lease.has_value()) {
        v1::Lease* l = out.mutable_lease();
        l->set_release(m.lease->release);
        l->set_lease_id(m.lease->lease_id);
        l->set_timeout_seconds(m.lease->timeout_seconds);
      } else {
        v1::Batch* b = out.mutable_batch();
        b->set_trip(m.batch->trip);
        b->set_holder(m.batch->holder);
        b->set_offset_in_window(m.batch->offset_in_window);
        b->set_last_of_window(m.batch->last_of_window);
        b->set_index(m.index);
        b->set_batches_in_window(m.batches_in_window);
        // uint16 little-endian, as llm.c stores them.
        std::string* bytes = b->mutable_tokens();
        bytes->resize(m.batch->tokens.size() * 2);
        for (size_t i = 0; i < m.batch->tokens.size(); ++i) {
          (*bytes)[2 * i] = static_cast<char>(m.batch->tokens[i] & 0xff);
          (*bytes)[2 * i + 1] = static_cast<char>(m.batch->tokens[i] >> 8);
        }
      }
      // Blocks while the trainer does not read (gRPC's flow control): only
      // this campaign waits.
      open = writer->Write(out);
      if (out.has_batch()) ZeroizeAndClear(out.mutable_batch()->mutable_tokens());
    }
    trainer->Detach(session);
    GT_LOG(1, "trainer '", info.identity, "' detached from campaign '", req->campaign(), "'");
    if (!open || ctx->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the trainer's stream ended");
    }
    return StreamEnd(result);
  }
}

grpc::Status TrainerServiceImpl::ReportWindow(grpc::ServerContext* ctx,
                                              const v1::WindowReport* req,
                                              v1::WindowCommitted* out) {
  std::shared_ptr<RemoteTrainer> trainer;
  grpc::Status admitted = AdmitRunning(ctx, req->campaign(), &trainer);
  if (!admitted.ok()) return admitted;
  WindowReportIn report;
  report.trip = req->trip();
  report.batch_loss.assign(req->batch_loss().begin(), req->batch_loss().end());
  report.tokens = req->tokens();
  report.checkpoint_sha256 = req->checkpoint_sha256();
  auto committed = trainer->Report(report);
  if (!committed.ok()) return ToGrpc(committed.status());
  out->set_trip(req->trip());
  out->set_tokens_committed(committed->tokens_committed);
  return grpc::Status::OK;
}

grpc::Status TrainerServiceImpl::ReleaseLease(grpc::ServerContext* ctx,
                                              const v1::LeaseReleased* req,
                                              v1::LeaseReleasedAck* out) {
  (void)out;
  std::shared_ptr<RemoteTrainer> trainer;
  grpc::Status admitted = AdmitRunning(ctx, req->campaign(), &trainer);
  if (!admitted.ok()) return admitted;
  return ToGrpc(trainer->ReleaseLease(req->lease_id()));
}

}  // namespace gputravel
