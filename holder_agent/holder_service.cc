#include "holder_agent/holder_service.h"

#include <atomic>
#include <chrono>

#include "auth/authorize.h"
#include "holder_agent/dataset_source.h"

#include "keyxfer/handoff.h"
#include "keyxfer/random.h"
#include "util/files.h"
#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {
namespace {

constexpr size_t kMaxPendingChannels = 16;

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
      bounce_pool_(options_.writer.bounce_dir) {
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

grpc::Status HolderService::GetInfo(grpc::ServerContext* ctx, const v1::GetInfoRequest*,
                                    v1::HolderInfo* out) {
  grpc::Status auth = Authorize(*ctx, {kRoleOrchestrator});
  if (!auth.ok()) return auth;
  out->set_name(options_.name);
  out->set_dataset_name(options_.dataset_name);
  out->set_dataset_format(dataset_->format());
  out->set_dataset_bytes(dataset_->payload_bytes());
  out->set_domain(options_.domain);
  return grpc::Status::OK;
}

grpc::Status HolderService::OpenChannel(grpc::ServerContext* ctx,
                                        const v1::OpenChannelRequest* req,
                                        v1::OpenChannelResponse* out) {
  grpc::Status auth = Authorize(*ctx, {kRoleOrchestrator});
  if (!auth.ok()) return auth;
  auto responder = ChannelResponder::Respond(req->orchestrator_public_key(),
                                             req->orchestrator_nonce(), *attester_);
  if (!responder.ok()) return ToGrpc(responder.status());
  std::string id = HexEncode(RandomString(16));
  out->set_channel_id(id);
  out->set_holder_public_key(responder->public_key());
  out->set_holder_nonce(responder->nonce());
  *out->mutable_evidence() = responder->evidence();
  absl::MutexLock l(&mu_);
  if (pending_.size() >= kMaxPendingChannels) pending_.erase(pending_.begin());
  pending_[id] = std::make_unique<ChannelResponder>(std::move(*responder));
  GT_LOG(2, "channel ", id.substr(0, 8), " opened");
  return grpc::Status::OK;
}

grpc::Status HolderService::Provision(grpc::ServerContext* ctx,
                                      const v1::ProvisionRequest* req,
                                      grpc::ServerWriter<v1::ProvisionUpdate>* out) {
  grpc::Status auth = Authorize(*ctx, {kRoleOrchestrator});
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
  auto r = DoProvision(*req, progress, [ctx] { return ctx->IsCancelled(); });
  if (!r.ok()) {
    GT_LOG(0, "provisioning refused or failed: ", r.status().message());
    return ToGrpc(r.status());
  }
  v1::ProvisionUpdate u;
  *u.mutable_report() = std::move(*r);
  absl::MutexLock l(&write_mu);
  if (ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "caller went away");
  // The report is the last message: it leaves with the status, in one write.
  out->WriteLast(u, grpc::WriteOptions());
  return grpc::Status::OK;
}

absl::StatusOr<v1::ProvisionReport> HolderService::DoProvision(
    const v1::ProvisionRequest& req, const std::function<bool(uint64_t)>& progress,
    const std::function<bool()>& cancelled) {
  absl::MutexLock serial(&provision_mu_);
  if (cancelled()) {
    // Waited behind another trip, and the caller gave up meanwhile: its
    // channel stays unused and no key is unwrapped.
    return absl::CancelledError("the orchestrator cancelled provisioning before it started");
  }
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<ChannelResponder> responder;
  {
    absl::MutexLock l(&mu_);
    auto it = pending_.find(req.channel_id());
    if (it == pending_.end()) {
      return absl::FailedPreconditionError(
          "unknown or already used channel: open a new attested channel for each trip");
    }
    responder = std::move(it->second);
    pending_.erase(it);  // single use, whatever happens next
  }
  auto channel = responder->Confirm(req.orchestrator_evidence(), *verifier_);
  if (!channel.ok()) return channel.status();
  const v1::HandoffBinding& b = req.binding();
  if (b.holder() != options_.name) {
    return absl::PermissionDeniedError("hand-off is for holder '" + b.holder() +
                                       "', this is '" + options_.name + "'");
  }
  {
    absl::MutexLock l(&mu_);
    auto it = last_trip_.find(b.campaign());
    if (it != last_trip_.end() && b.trip() <= it->second) {
      return absl::PermissionDeniedError(
          "hand-off for trip " + std::to_string(b.trip()) + " of campaign '" +
          b.campaign() + "' is not fresh (trip " + std::to_string(it->second) +
          " was already accepted)");
    }
  }
  auto key = UnwrapHandoff(channel->handoff_key, b, req.wrapped_handoff());
  channel->handoff_key.Clear();
  if (!key.ok()) return key.status();
  double import_seconds = Since(t0);
  {
    absl::MutexLock l(&mu_);
    last_trip_[b.campaign()] = b.trip();
  }
  if (b.window_length() == 0 || b.window_offset() > dataset_->payload_bytes() ||
      b.window_length() > dataset_->payload_bytes() - b.window_offset()) {
    return absl::OutOfRangeError(
        "window [" + std::to_string(b.window_offset()) + ", +" +
        std::to_string(b.window_length()) + ") is outside dataset " +
        dataset_->path() + " (" + std::to_string(dataset_->payload_bytes()) + " bytes)");
  }
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
  auto stats = writer.Write(*key, b.gpu_session(), b.buffer_id(), 0, b.window_length(),
                            CounterWindow{b.first_counter(), b.counter_count()}, source);
  {
    absl::MutexLock l(&watch_mu_);
    watched_ = nullptr;
    watched_cancelled_ = nullptr;
  }
  // The key dies here, whatever the outcome (SecretBytes zeroizes).
  key->key.Clear();
  if (!stats.ok()) return stats.status();
  v1::ProvisionReport rep;
  rep.set_bytes(stats->bytes);
  rep.set_chunks(stats->chunks);
  rep.set_digest(stats->digest);
  rep.set_seconds(Since(t0));
  rep.set_import_key_seconds(import_seconds);
  rep.set_read_seconds(stats->read_seconds);
  rep.set_write_seconds(stats->total_seconds);
  GT_LOG(1, "trip ", b.trip(), ": provisioned ", stats->bytes, " bytes in ",
         stats->chunks, " chunks; key zeroized");
  return rep;
}

}  // namespace gputravel
