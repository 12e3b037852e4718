#include "holder_agent/holder_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "auth/authorize.h"
#include "auth/caller_names.h"
#include "holder_agent/error_filter.h"
#include "holder_agent/dataset_source.h"
#include "holder_agent/provision_fault.h"
#include "keyxfer/handoff.h"
#include "keyxfer/handoff_lanes.h"
#include "keyxfer/random.h"
#include "keyxfer/report_seal.h"
#include "util/failpoint.h"
#include "util/files.h"
#include "util/grpc_status.h"
#include "util/hex.h"
#include "util/log.h"

namespace gputravel {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

HolderService::HolderService(HolderOptions options, std::unique_ptr<Dataset> dataset,
                             Attester* attester, Verifier* verifier)
    : options_(std::move(options)),
      dataset_(std::move(dataset)),
      attester_(attester),
      verifier_(verifier),
      device_(MakeChannel(options_.device_endpoint)),
      bounce_pool_(options_.writer.bounce_dir, options_.name) {
  watcher_ = std::thread([this] { WatchForCancel(); });
}

HolderService::~HolderService() {
  {
    absl::MutexLock l(&watch_mu_);
    stopping_ = true;
  }
  watcher_.join();
}

void HolderService::WatchForCancel() {
  absl::MutexLock l(&watch_mu_);
  while (!stopping_) {
    if (watched_ == nullptr) {
      watch_mu_.Await(absl::Condition(this, &HolderService::WatcherHasWork));
      continue;
    }
    if (watched_cancelled_()) watched_->Cancel();  // again next time: harmless
    watch_mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
  }
}

grpc::Status HolderService::AuthorizeOrchestrator(const grpc::ServerContext& ctx,
                                                  Identity* caller) const {
  Identity who;
  if (caller == nullptr) caller = &who;
  grpc::Status auth = Authorize(ctx, {kRoleOrchestrator}, caller);
  if (!auth.ok()) return auth;
  return CheckCallerName(*caller, {{kRoleOrchestrator, options_.orchestrator_names}});
}

grpc::Status HolderService::GetInfo(grpc::ServerContext* ctx, const v1::GetInfoRequest*,
                                    v1::HolderInfo* out) {
  grpc::Status auth = AuthorizeOrchestrator(*ctx);
  if (!auth.ok()) return auth;
  out->set_name(options_.name);
  out->set_dataset_name(options_.dataset_name);
  out->set_dataset_format(dataset_->format());
  out->set_dataset_bytes(dataset_->payload_bytes());
  out->set_domain(options_.domain);
  *out->mutable_training_policy() = options_.training_policy;
  return grpc::Status::OK;
}

grpc::Status HolderService::OpenChannel(grpc::ServerContext* ctx,
                                        const v1::OpenChannelRequest* req,
                                        v1::OpenChannelResponse* out) {
  grpc::Status auth = AuthorizeOrchestrator(*ctx);
  if (!auth.ok()) return auth;
  auto responder = ChannelResponder::Respond(req->orchestrator_public_key(),
                                             req->orchestrator_nonce(), *attester_);
  if (!responder.ok()) {
    GT_LOG(0, "channel refused: ", responder.status().message());
    return ToGrpc(ForOrchestrator(responder.status(), dataset_->path(), options_.dataset_name));
  }
  std::string id = HexEncode(RandomString(16));
  out->set_channel_id(id);
  out->set_holder_public_key(responder->public_key());
  out->set_holder_nonce(responder->nonce());
  *out->mutable_evidence() = responder->evidence();
  const auto now = options_.clock();
  absl::MutexLock l(&mu_);
  // Channels never claimed are dropped: first those past their lifetime,
  // then, if still full, the oldest. Erasing a channel destroys its
  // responder, whose SecretBytes zeroizes the ECDH secret.
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->second.opened > kPendingChannelLifetime) {
      GT_LOG(2, "channel ", it->first.substr(0, 8), " expired unused");
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  while (pending_.size() >= kMaxPendingChannels) {
    auto oldest = std::min_element(pending_.begin(), pending_.end(),
                                   [](const auto& a, const auto& b) {
                                     return a.second.opened < b.second.opened;
                                   });
    GT_LOG(1, "channel ", oldest->first.substr(0, 8), " dropped unused: ",
           kMaxPendingChannels, " channels are waiting for their Provision");
    pending_.erase(oldest);
  }
  PendingChannel& p = pending_[id];
  p.responder = std::make_unique<ChannelResponder>(std::move(*responder));
  p.opened = now;
  GT_LOG(2, "channel ", id.substr(0, 8), " opened");
  return grpc::Status::OK;
}

grpc::Status HolderService::Provision(grpc::ServerContext* ctx,
                                      const v1::ProvisionRequest* req,
                                      grpc::ServerWriter<v1::ProvisionUpdate>* out) {
  Identity caller;
  grpc::Status auth = AuthorizeOrchestrator(*ctx, &caller);
  if (!auth.ok()) return auth;
  // Progress comes from the encryption threads; one writer at a time, at most
  // one message per interval.
  absl::Mutex write_mu;
  auto last = std::chrono::steady_clock::now();
  const auto interval = std::chrono::duration<double>(options_.progress_interval_seconds);
  const uint64_t total = req->binding().window_length();
  std::atomic<uint64_t> done{0};
  auto progress = [&](uint64_t bytes) {
    if (ctx->IsCancelled()) return false;
    uint64_t now_done = done.fetch_add(bytes) + bytes;
    absl::MutexLock l(&write_mu);
    auto now = std::chrono::steady_clock::now();
    if (now - last < interval) return true;
    last = now;
    v1::ProvisionUpdate u;
    u.mutable_progress()->set_bytes(now_done);
    u.mutable_progress()->set_window_length(total);
    return out->Write(u);
  };
  // While the device holds a chunk unacknowledged, `bytes` stops moving:
  // progress keeps coming, saying how long the device has waited, so the
  // orchestrator can tell a stalled device from a stopped holder.
  absl::Mutex keepalive_mu;
  bool provisioning_done = false;
  std::thread keepalive([&] {
    absl::MutexLock kl(&keepalive_mu);
    const absl::Duration period = std::max(absl::Seconds(interval.count()), absl::Milliseconds(50));
    while (!keepalive_mu.AwaitWithTimeout(absl::Condition(&provisioning_done), period)) {
      const double wait = absl::ToDoubleSeconds(DeviceWait());
      if (wait <= 0 || ctx->IsCancelled()) continue;
      absl::MutexLock l(&write_mu);
      auto now = std::chrono::steady_clock::now();
      if (now - last < interval) continue;
      last = now;
      v1::ProvisionUpdate u;
      u.mutable_progress()->set_bytes(done.load());
      u.mutable_progress()->set_window_length(total);
      u.mutable_progress()->set_device_wait_seconds(wait);
      out->Write(u);
    }
  });
  ProvisionResult result;
  auto r = DoProvision(caller.name, *req, progress, [ctx] { return ctx->IsCancelled(); },
                       &result);
  const ProvisionFault fault = result.fault;
  {
    absl::MutexLock kl(&keepalive_mu);
    provisioning_done = true;
  }
  keepalive.join();
  if (!r.ok()) {
    if (options_.metrics != nullptr) {
      options_.metrics->Provision(result.accepted ? kProvisionFailed : kProvisionRefused, 0, 0);
    }
    GT_LOG(0, "provisioning refused or failed: ", r.status().message());
    if (fault == ProvisionFault::kDevice) {
      ctx->AddTrailingMetadata(kProvisionFaultKey, kProvisionFaultDevice);
    } else if (fault == ProvisionFault::kHolder) {
      ctx->AddTrailingMetadata(kProvisionFaultKey, kProvisionFaultHolder);
    }
    // The orchestrator passes trip errors on to operators: no local path
    // (dataset file, bounce ring, shared memory) leaves in them.
    return ToGrpc(ForOrchestrator(r.status(), dataset_->path(), options_.dataset_name));
  }
  v1::ProvisionUpdate u;
  u.set_sealed_report(std::move(*r));
  absl::MutexLock l(&write_mu);
  if (ctx->IsCancelled()) {
    if (options_.metrics != nullptr) options_.metrics->Provision(kProvisionFailed, 0, 0);
    return grpc::Status(grpc::StatusCode::CANCELLED, "caller went away");
  }
  // The report is the last message: it leaves with the status, in one write.
  const bool sent = out->Write(u, grpc::WriteOptions().set_last_message());
  if (options_.metrics != nullptr) {
    options_.metrics->Provision(sent ? kProvisionOk : kProvisionFailed, result.bytes,
                                result.seconds);
  }
  if (!sent) {
    // The window is on the GPU and the key is gone, but the orchestrator
    // did not get the report (it went away, or the stream broke): it will
    // treat the trip as failed and take the safe path.
    GT_LOG(0, "trip ", req->binding().trip(), " of campaign '", req->binding().campaign(),
           "': provisioned, but the report could not be sent to the orchestrator "
           "(the call was cancelled or the connection broke)");
  }
  return grpc::Status::OK;
}

absl::Duration HolderService::DeviceWait() {
  absl::MutexLock l(&watch_mu_);
  return watched_ == nullptr ? absl::ZeroDuration() : watched_->DeviceWait();
}

absl::StatusOr<std::string> HolderService::DoProvision(
    const std::string& orchestrator, const v1::ProvisionRequest& req,
    const std::function<bool(uint64_t)>& progress, const std::function<bool()>& cancelled,
    ProvisionResult* result) {
  // The channel is claimed as the call arrives, before waiting behind
  // another trip: from here it is this call's alone, out of reach of the
  // pending channels' lifetime and cap (OpenChannel), which so bound only
  // the time between OpenChannel and the Provision naming it.
  std::unique_ptr<ChannelResponder> responder;
  {
    absl::MutexLock l(&mu_);
    auto it = pending_.find(req.channel_id());
    if (it != pending_.end() && options_.clock() - it->second.opened > kPendingChannelLifetime) {
      pending_.erase(it);  // past its lifetime: dropped as OpenChannel would
      it = pending_.end();
    }
    if (it == pending_.end()) {
      return absl::FailedPreconditionError(
          "unknown or already used channel (an unused one is dropped after " +
          std::to_string(kPendingChannelLifetime.count()) +
          " s, or when more than " + std::to_string(kMaxPendingChannels) +
          " wait): open a new attested channel for each trip");
    }
    responder = std::move(it->second.responder);
    pending_.erase(it);  // single use, whatever happens next
  }
  absl::MutexLock serial(&provision_mu_);
  if (cancelled()) {
    // Waited behind another trip, and the caller gave up meanwhile: its
    // channel is dropped unused (the secret zeroized) and no key is
    // unwrapped.
    return absl::CancelledError("the orchestrator cancelled provisioning before it started");
  }
  auto t0 = std::chrono::steady_clock::now();
  auto channel = responder->Confirm(req.orchestrator_evidence(), *verifier_);
  if (!channel.ok()) return channel.status();
  const v1::HandoffBinding& b = req.binding();
  GT_LOG(3, "trip ", b.trip(), ": orchestrator ", orchestrator, " attested, hand-off bound to GPU ",
         b.gpu_serial(), " session ", b.gpu_session());
  if (b.holder() != options_.name) {
    result->fault = ProvisionFault::kHolder;  // this agent is not the one the campaign names
    return absl::PermissionDeniedError("hand-off is for holder '" + b.holder() +
                                       "', this is '" + options_.name + "'");
  }
  // Freshness (P5): a trip from this orchestrator on this GPU not newer
  // than the last one accepted (by this agent or before its restart) is
  // refused before its key is opened. Checked again, and the trip recorded
  // on disk, in one step once every check has passed below.
  if (options_.freshness == nullptr) {
    result->fault = ProvisionFault::kHolder;  // its own configuration
    return absl::FailedPreconditionError(
        "this agent has no trip freshness record (state_dir): it accepts no hand-off");
  }
  absl::Status fresh = options_.freshness->Check(orchestrator, b.gpu_serial(), b.trip(),
                                                 b.campaign());
  if (!fresh.ok()) return fresh;
  // The window must lie in the dataset; checked before the key is opened.
  // The binding is not authenticated yet, but the unwrap below is: a window
  // changed in transit fails there (it is in the hand-off's AAD). A window
  // outside it blames nobody: the orchestrator planned on the size this
  // agent reported, and a dataset shorter now lies on the TD's disk, which
  // the host can shrink while the TD is down, as it can fail a read.
  if (b.window_length() == 0 || b.window_offset() > dataset_->payload_bytes() ||
      b.window_length() > dataset_->payload_bytes() - b.window_offset()) {
    return absl::OutOfRangeError(
        "window [" + std::to_string(b.window_offset()) + ", +" +
        std::to_string(b.window_length()) + ") is outside the dataset '" +
        options_.dataset_name + "' (" + std::to_string(dataset_->payload_bytes()) +
        " bytes)");
  }
  // The holder's training policy (P1): what the campaign trains with and
  // reports, and the window's length, as bound into the hand-off (a binding
  // changed in transit fails the unwrap below). Whatever the orchestrator
  // checked at create, the agent decides.
  absl::Status allowed = CheckTerms(options_.training_policy, b.terms(), options_.name);
  if (allowed.ok()) allowed = CheckWindow(options_.training_policy, b.window_length(), options_.name);
  if (!allowed.ok()) {
    result->fault = ProvisionFault::kHolder;  // its own policy says no
    return allowed;
  }
  // The copy-engine lanes must tile the window exactly (each with one
  // counter per chunk), or a chunk would be written twice or not at all.
  absl::Status tiled = CheckLanes(b);
  if (!tiled.ok()) return tiled;
  auto keys = UnwrapHandoff(channel->handoff_key, b, req.wrapped_handoff());
  channel->handoff_key.Clear();
  if (!keys.ok()) return keys.status();
  // The keys die on every way out from here (SecretBytes zeroizes).
  struct Wipe {
    std::vector<ChannelMaterial>& keys;
    ~Wipe() {
      for (ChannelMaterial& k : keys) k.key.Clear();
    }
  } wipe{*keys};
  double import_seconds = Since(t0);
  // Every check passed and the keys are open: the trip counts from here,
  // whatever the write's outcome, so this hand-off is never accepted again,
  // not even by a restarted agent: it is on disk before a key is used. A
  // record that cannot be written (the TD's disk is the host's) blames
  // nobody.
  fresh = options_.freshness->Accept(orchestrator, b.gpu_serial(), b.trip(), b.campaign());
  if (!fresh.ok()) return fresh;
  // The power-cut tests die here: the acceptance durable, no key used yet.
  CrashPoint("after_accept");
  result->accepted = true;
  GT_LOG(3, "trip ", b.trip(), ": hand-off accepted, writing ", b.window_length(), " bytes in ",
         b.lanes_size(), " lane(s)");
  H2dWriterOptions wo = options_.writer;
  wo.chunk_size = b.chunk_size();
  wo.pool = &bounce_pool_;
  H2dWriter writer(device_, wo);
  // Chunks are mapped from the file and encrypted straight from the mapping
  // into the bounce ring (no plaintext copy); each mapping goes once its
  // chunk is encrypted.
  DatasetSource source(*dataset_, b.window_offset(), b.window_length(), progress);
  {
    absl::MutexLock l(&watch_mu_);
    watched_ = &writer;
    watched_cancelled_ = cancelled;
  }
  // Each lane's part of the window through its own copy engine, side by side.
  const std::vector<H2dLaneWrite> lanes =
      LaneWrites({b.lanes().begin(), b.lanes().end()}, *keys);
  auto stats = writer.Write(lanes, b.gpu_session(), b.buffer_id(), 0, b.window_length(), source);
  GT_LOG(3, "trip ", b.trip(), ": window written: ", stats.status().ToString());
  {
    absl::MutexLock l(&watch_mu_);
    watched_ = nullptr;
    watched_cancelled_ = nullptr;
  }
  // The keys die here, whatever the outcome (SecretBytes zeroizes).
  for (ChannelMaterial& k : *keys) k.key.Clear();
  if (!stats.ok()) {
    // Unless its dataset failed it, nothing on this side failed: the GPU
    // refused, or could not be reached from this TD (the host's route), or
    // stopped answering. A dataset that cannot be read blames nobody: the
    // disk under it is the host's.
    if (!cancelled() && !source.failed()) result->fault = ProvisionFault::kDevice;
    return stats.status();
  }
  v1::ProvisionReport rep;
  rep.set_bytes(stats->bytes);
  rep.set_chunks(stats->chunks);
  rep.set_digest(stats->digest);
  rep.set_seconds(Since(t0));
  rep.set_import_key_seconds(import_seconds);
  rep.set_read_seconds(stats->read_seconds);
  rep.set_write_seconds(stats->total_seconds);
  // Sealed under the channel that carried the hand-off: the orchestrator
  // takes only a report this TD made for this trip.
  auto sealed = SealReport(channel->report_key, b, rep);
  channel->report_key.Clear();
  if (!sealed.ok()) return sealed.status();
  result->bytes = stats->bytes;
  result->seconds = rep.seconds();
  GT_LOG(1, "trip ", b.trip(), ": provisioned ", stats->bytes, " bytes in ",
         stats->chunks, " chunks; key zeroized");
  return sealed;
}

}  // namespace gputravel
