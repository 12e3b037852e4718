#include "orchestrator/trip_runner.h"


#include <chrono>
#include <thread>

#include "device/h2d_writer.h"
#include "holder_agent/provision_fault.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/counter_window.h"
#include "keyxfer/handoff.h"
#include "keyxfer/secret_bytes.h"
#include "orchestrator/state_store.h"
#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {
namespace {

std::chrono::system_clock::time_point Deadline(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", s);
  return buf;
}

}  // namespace

void TripControl::Cancel() {
  absl::MutexLock l(&mu_);
  cancelled_ = true;
  if (call_ != nullptr) call_->TryCancel();
}

bool TripControl::cancelled() const {
  absl::MutexLock l(&mu_);
  return cancelled_;
}

void TripControl::SetCall(grpc::ClientContext* ctx) {
  absl::MutexLock l(&mu_);
  call_ = ctx;
  if (call_ != nullptr && cancelled_) call_->TryCancel();
}

absl::Status TripRunner::RouteTo(const std::string& domain, uint64_t token) {
  v1::RouteRequest req;
  req.set_gpu(gpu_name_);
  req.set_domain(domain);
  req.set_fencing_token(token);
  v1::RouteResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(30));
  return FromGrpc(mux_->Route(&ctx, req, &resp),
                  "MUX Route " + gpu_name_ + " -> " + domain);
}

absl::Status TripRunner::RouteHome(uint64_t token) { return RouteTo(domain_, token); }

absl::Status TripRunner::KeepAlive() {
  if (heartbeat_period_ <= absl::ZeroDuration() || !gpu_->established()) {
    return absl::OkStatus();
  }
  if (absl::Now() - gpu_->last_heartbeat() < heartbeat_period_ / 4) return absl::OkStatus();
  return gpu_->Heartbeat();
}

absl::Duration TripRunner::MaxTimeAway() const {
  if (heartbeat_period_ <= absl::ZeroDuration()) return absl::InfiniteDuration();
  return 2 * heartbeat_period_ - kHeartbeatMargin;
}

absl::Status TripRunner::MakeSafe(uint64_t token, uint64_t buffer_id, uint64_t buffer_bytes,
                                  const std::string& gpu_serial) {
  absl::Status s = RouteHome(token);
  if (!s.ok()) return s;
  s = gpu_->Establish();
  if (absl::IsDataLoss(s)) {
    // The device missed its heartbeat: its session and memory are gone, and
    // only a reset (through the MUX, which owns the PCIe function) lets it
    // work again. Nothing of the old buffer survives it.
    GT_LOG(0, "GPU ", gpu_name_, ": ", s.message(), "; resetting it through the MUX");
    v1::ResetGpuRequest req;
    req.set_gpu(gpu_name_);
    req.set_fencing_token(token);
    v1::ResetGpuResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(60));
    s = FromGrpc(mux_->Reset(&ctx, req, &resp), "MUX Reset " + gpu_name_);
    if (!s.ok()) return s;
    s = gpu_->Establish();
  }
  if (!s.ok()) return s;
  if (!gpu_serial.empty() && gpu_->serial() != gpu_serial) {
    return absl::FailedPreconditionError(
        "GPU " + gpu_name_ + " answers as serial " + gpu_->serial() +
        ", but the trip's key and buffer are on serial " + gpu_serial +
        ": that device must be brought home, re-keyed and scrubbed first (check "
        "gpus[].device_endpoint and gpus[].serial, and where the host routes it)");
  }
  if (buffer_id == 0) return absl::OkStatus();
  return ScrubOrGone(buffer_id, buffer_bytes, nullptr);
}

absl::Status TripRunner::CheckHeartbeatPeriod() {
  // A device expecting heartbeats nobody sends loses its session whenever
  // the GPU idles; a device expecting none makes this side's heartbeats and
  // shorter hand-off deadlines pointless.
  auto query = gpu_->QueryChannel();
  if (!query.ok()) return query.status();
  const int64_t mine = absl::ToInt64Seconds(heartbeat_period_);
  if (query->heartbeat_period_seconds() != mine) {
    return absl::FailedPreconditionError(
        "GPU " + gpu_name_ + " enforces a CC heartbeat every " +
        std::to_string(query->heartbeat_period_seconds()) +
        " s (0: off), but gpus[].heartbeat_period_seconds here is " + std::to_string(mine) +
        ": make them the same");
  }
  return absl::OkStatus();
}

absl::Status TripRunner::ScrubOrGone(uint64_t buffer_id, uint64_t buffer_bytes, bool* gone) {
  auto r = gpu_->ScrubUnlessGone(buffer_id, buffer_bytes);
  if (!r.ok()) return r.status();
  if (*r == GpuSession::ScrubResult::kGone) {
    GT_LOG(1, "GPU ", gpu_name_, " says buffer ", buffer_id,
           " is gone (a reset or a key exchange it did not authorise wiped its memory)");
  }
  if (gone != nullptr) *gone = *r == GpuSession::ScrubResult::kGone;
  return absl::OkStatus();
}

absl::Status TripRunner::SafeReturn(const TripPlan& plan, TripOutcome* out) {
  absl::Status s = RouteHome(plan.trip);
  if (!s.ok()) return s;
  const uint64_t old_session = gpu_->session_id();
  // Whatever happened, the session whose key the holder saw must end.
  s = gpu_->Establish();
  if (!s.ok()) return s;
  out->rekeyed = gpu_->session_id() != old_session;
  s = ScrubOrGone(plan.buffer_id, plan.buffer_bytes, &out->buffer_gone);
  if (!s.ok()) return s;
  out->scrub_verified = true;
  return absl::OkStatus();
}

absl::Status TripRunner::Provision(const TripPlan& plan, v1::HolderAgent::Stub* holder,
                                   const v1::ProvisionRequest& req, TripHooks* hooks,
                                   TripControl* control, v1::ProvisionReport* report,
                                   bool* device_fault) {
  grpc::ClientContext ctx;
  // With the heartbeat on, the GPU must be home and re-keyed before it misses
  // two periods: the hand-off ends by then, whatever the holder's progress.
  const absl::Duration away = MaxTimeAway();
  if (away != absl::InfiniteDuration()) ctx.set_deadline(absl::ToChronoTime(absl::Now() + away));
  control->SetCall(&ctx);
  // Watchdog: a holder that sends nothing for holder_timeout_seconds (it
  // streams progress while it writes) is cut off.
  absl::Mutex mu;
  bool done = false, timed_out = false;
  auto last = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(plan.holder_timeout_seconds);
  // On the runner's long-lived thread (waited for below, so the references
  // it holds stay valid).
  std::future<void> watchdog = watchdog_thread_.Run([&] {
    absl::MutexLock l(&mu);
    while (!done) {
      mu.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(50));
      if (!done && std::chrono::steady_clock::now() - last > limit) {
        timed_out = true;
        ctx.TryCancel();
        return;
      }
    }
  });
  auto reader = holder->Provision(&ctx, req);
  v1::ProvisionUpdate u;
  bool got_report = false;
  while (reader->Read(&u)) {
    {
      absl::MutexLock l(&mu);
      last = std::chrono::steady_clock::now();
    }
    if (u.has_progress()) hooks->Progress(u.progress().bytes(), u.progress().window_length());
    if (u.has_report()) {
      *report = u.report();
      got_report = true;
    }
  }
  grpc::Status st = reader->Finish();
  {
    absl::MutexLock l(&mu);
    done = true;
  }
  if (!st.ok()) {
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto fault = trailers.find(kProvisionFaultKey);
    *device_fault = fault != trailers.end() &&
                    std::string(fault->second.data(), fault->second.size()) ==
                        kProvisionFaultDevice;
  }
  watchdog.wait();
  control->SetCall(nullptr);
  if (timed_out) {
    return absl::DeadlineExceededError("holder " + plan.holder + " made no progress for " +
                                       Seconds(plan.holder_timeout_seconds) +
                                       " (holder_timeout_seconds)");
  }
  if (control->cancelled()) return absl::CancelledError("the campaign was cancelled");
  if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && away != absl::InfiniteDuration()) {
    return absl::DeadlineExceededError(
        "holder " + plan.holder + " did not finish within " + absl::FormatDuration(away) +
        ", the longest GPU " + gpu_name_ + " may stay away with a CC heartbeat period of " +
        absl::FormatDuration(heartbeat_period_) + " (use smaller windows, or a longer period)");
  }
  absl::Status s = FromGrpc(st, "holder " + plan.holder + " Provision");
  if (!s.ok()) return s;
  if (!got_report) {
    return absl::InternalError("holder " + plan.holder + " ended Provision without a report");
  }
  return absl::OkStatus();
}

absl::StatusOr<PreparedChannel> TripRunner::PrepareChannel(const std::string& holder_name,
                                                           v1::HolderAgent::Stub* holder,
                                                           double timeout_seconds,
                                                           TripControl* control) {
  auto initiator = ChannelInitiator::Create();
  if (!initiator.ok()) return initiator.status();
  v1::OpenChannelRequest oreq;
  oreq.set_orchestrator_public_key(initiator->public_key());
  oreq.set_orchestrator_nonce(initiator->nonce());
  v1::OpenChannelResponse oresp;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(timeout_seconds));
    if (control != nullptr) control->SetCall(&ctx);
    absl::Status s = FromGrpc(holder->OpenChannel(&ctx, oreq, &oresp),
                              "holder " + holder_name + " OpenChannel");
    if (control != nullptr) control->SetCall(nullptr);
    if (!s.ok()) return s;
  }
  PreparedChannel out;
  out.holder = holder_name;
  out.channel_id = oresp.channel_id();
  auto channel = initiator->Complete(oresp.holder_public_key(), oresp.holder_nonce(),
                                     oresp.evidence(), *verifier_, *attester_,
                                     &out.own_evidence);
  if (!channel.ok()) {
    return absl::Status(channel.status().code(),
                        "holder " + holder_name + ": " + std::string(channel.status().message()));
  }
  out.channel = std::move(*channel);
  out.opened = std::chrono::steady_clock::now();
  return out;
}

absl::StatusOr<TripOutcome> TripRunner::Run(const TripPlan& plan,
                                            v1::HolderAgent::Stub* holder,
                                            TripHooks* hooks, TripControl* control,
                                            std::optional<PreparedChannel> prepared) {
  TripOutcome out;
  GT_LOG(1, "trip ", plan.trip, ": ", plan.holder, " window [", plan.window_offset, ", +",
         plan.window_length, ")");
  // Before the GPU leaves nothing needs making safe: the buffer is clean and
  // no key has been handed out.
  auto fail_early = [&](const std::string& msg, bool holder_fault) {
    out.error = msg;
    out.holder_fault = holder_fault;
    out.cancelled = control->cancelled();
    return out;
  };

  // The channel with the holder, mutually attested, before anything leaves:
  // the one prepared while the previous trip's GPU was scrubbed, if it is for
  // this holder and fresh, else a new one.
  std::optional<PreparedChannel> ready;
  if (prepared.has_value() && prepared->holder == plan.holder &&
      std::chrono::steady_clock::now() - prepared->opened < kPreparedChannelLifetime) {
    ready = std::move(prepared);
  }
  prepared.reset();
  if (!ready.has_value()) {
    auto opened = PrepareChannel(plan.holder, holder, plan.holder_timeout_seconds, control);
    if (control->cancelled()) return fail_early("cancelled", false);
    if (!opened.ok()) return fail_early(std::string(opened.status().message()), true);
    ready = std::move(*opened);
  }
  AttestedChannel* channel = &ready->channel;
  v1::ProvisionRequest preq;
  *preq.mutable_orchestrator_evidence() = ready->own_evidence;

  // The counter window on the session's LCE H2D key (P4). The session is
  // fresh for this trip and its key exists only in this process's memory.
  // The hand-off is a key fetch with an IV space of its own
  // (LceH2dForHandoff: the untouched one, as every trip re-keys on its way
  // home; after an earlier hand-off in the same session, a rotated one), so
  // the window starts at the first counter, and after a crash the key is gone
  // and recovery re-keys. The window is recorded with the route_out commit
  // below, before it leaves.
  const uint32_t chunks = H2dWriter::ChunksFor(plan.window_length, plan.chunk_bytes);
  auto window_or = CounterWindowAt(kFirstMessageCounter, chunks);
  if (!window_or.ok()) return window_or.status();
  const CounterWindow window = *window_or;
  auto lce_or = gpu_->LceH2dForHandoff();
  if (!lce_or.ok()) return lce_or.status();
  ChannelMaterial lce = std::move(*lce_or);
  // The device accepts nothing past the window under this key: a holder that
  // keeps it can write no more than it was handed, even before the re-key.
  absl::Status bounded = gpu_->LimitH2d(window.first + window.count - 1);
  if (!bounded.ok()) {
    lce.key.Clear();
    return fail_early("bounding the copy engine to the trip's counter window: " +
                          std::string(bounded.message()),
                      false);
  }

  v1::HandoffBinding* b = preq.mutable_binding();
  b->set_campaign(plan.campaign);
  b->set_trip(plan.trip);
  b->set_gpu_serial(gpu_->serial());
  b->set_gpu_session(gpu_->session_id());
  b->set_holder(plan.holder);
  b->set_buffer_id(plan.buffer_id);
  b->set_window_offset(plan.window_offset);
  b->set_window_length(plan.window_length);
  b->set_first_counter(window.first);
  b->set_counter_count(window.count);
  b->set_chunk_size(plan.chunk_bytes);
  *b->mutable_terms() = plan.terms;
  const uint64_t handed_session = gpu_->session_id();
  auto blob = WrapHandoff(channel->handoff_key, *b, lce);
  channel->handoff_key.Clear();
  if (!blob.ok()) return blob.status();
  preq.set_channel_id(ready->channel_id);
  preq.set_wrapped_handoff(*blob);

  // With the heartbeat on, one now: the GPU then has two full periods before
  // it must be home and re-keyed (Provision's deadline keeps to that).
  if (heartbeat_period_ > absl::ZeroDuration()) {
    absl::Status hb = gpu_->Heartbeat();
    if (!hb.ok()) {
      lce.key.Clear();
      return fail_early("heartbeat before the GPU leaves: " + std::string(hb.message()), false);
    }
  }

  // Route out: committed first, and from here on every exit goes through the
  // safe path.
  absl::Status s = hooks->RouteOut(
      TripCounterWindow{handed_session, window.first, window.count, gpu_->serial()},
      "routing " + gpu_name_ + " to " + plan.holder_domain);
  if (s.ok() && control->cancelled()) s = absl::CancelledError("the campaign was cancelled");
  if (!s.ok()) {
    lce.key.Clear();
    return fail_early(std::string(s.message()), false);
  }
  s = RouteTo(plan.holder_domain, plan.trip);
  bool holder_fault = false;
  v1::ProvisionReport prep;
  if (s.ok()) s = hooks->Step(TripStep::kProvision, "hand-off and provisioning");
  if (s.ok() && control->cancelled()) s = absl::CancelledError("the campaign was cancelled");
  if (s.ok()) {
    bool device_fault = false;
    s = Provision(plan, holder, preq, hooks, control, &prep, &device_fault);
    // What goes wrong inside Provision is the holder's side (refused, timed
    // out, unreachable, a bad dataset), unless we cancelled it or the agent
    // (attested) says its write failed on the device path: the GPU, or the
    // way the host gives the holder's TD to it.
    holder_fault = !s.ok() && !control->cancelled() && !device_fault;
    if (device_fault) {
      s = absl::Status(s.code(), "the GPU failed holder " + plan.holder +
                                     "'s write, or could not be reached from its TD (the "
                                     "host's route or the device): " +
                                     std::string(s.message()));
    }
  }
  preq.clear_wrapped_handoff();

  // Route back and re-key whether or not provisioning worked.
  absl::Status commit = hooks->Step(TripStep::kRouteBack, "routing " + gpu_name_ + " home");
  if (!commit.ok()) GT_LOG(0, "trip ", plan.trip, ": ", commit.message());
  absl::Status back = RouteHome(plan.trip);
  if (!back.ok()) return back;
  commit = hooks->Step(TripStep::kRekey, "same-device check and fresh key agreement");
  if (!commit.ok()) GT_LOG(0, "trip ", plan.trip, ": ", commit.message());
  // The GPU that came back must still hold the session H saw: a sealed
  // command on it must round-trip. That command rides on the re-key's own
  // request (the device runs it under the old session, then the exchange
  // ends that session, with nothing in between): when provisioning worked,
  // it is the read-back of the window's last piece (the earlier pieces of a
  // window over 8 MiB are read before), else a query. The GPU is home, so
  // H's key cannot be used meanwhile, and only this process holds the
  // session's control keys. A read the device refuses under that session
  // (an authenticated answer) is told apart from a lost session.
  std::string data;  // the window's plaintext: wiped on every way out
  struct WipeOnExit {
    std::string* d;
    ~WipeOnExit() { Zeroize(&(*d)[0], d->size()); }
  } wipe_data{&data};
  constexpr uint64_t kReadPiece = 8u << 20;
  absl::Status rd;
  v1::DeviceCommand prior;
  bool reads_last_piece = false;
  uint64_t last_off = 0;
  if (s.ok()) {
    data.reserve(plan.window_length);
    last_off = plan.window_length == 0 ? 0 : (plan.window_length - 1) / kReadPiece * kReadPiece;
    for (uint64_t off = 0; off < last_off && rd.ok(); off += kReadPiece) {
      auto piece = gpu_->Read(plan.buffer_id, off, kReadPiece);
      if (!piece.ok()) {
        rd = piece.status();
      } else {
        data += *piece;
        Zeroize(&(*piece)[0], piece->size());  // plaintext: wiped before it is freed
      }
    }
    reads_last_piece = rd.ok();
  }
  if (reads_last_piece) {
    v1::ReadBufferCommand* r = prior.mutable_read();
    r->set_buffer_id(plan.buffer_id);
    r->set_offset(last_off);
    r->set_length(plan.window_length - last_off);
  } else {
    prior.mutable_query();
  }
  GpuSession::PriorOutcome came_back;
  absl::Status rekey = gpu_->EstablishAfter(prior, &came_back);
  if (!rekey.ok()) return rekey;  // cannot prove a safe state
  const absl::Status same = came_back.session;
  if (!same.ok()) {
    GT_LOG(0, "trip ", plan.trip, ": the GPU that came back does not hold our session: ",
           same.message());
  }
  if (reads_last_piece) {
    if (came_back.reply.ok()) {
      std::string* piece = came_back.reply->mutable_data();
      data += *piece;
      Zeroize(&(*piece)[0], piece->size());
    } else {
      rd = came_back.reply.status();
    }
  }
  out.rekeyed = gpu_->session_id() != handed_session;
  hooks->Rekeyed();
  // The device signed the new session's number: our own exchange right after
  // the one the holder was handed is handed_session + 1. A larger number
  // means that somebody else exchanged keys with this GPU while it was
  // routed to the holder, which ended the holder's session and wiped device
  // memory: the holder's doing, as far as the orchestrator can tell.
  const bool foreign_exchange =
      !came_back.retried && gpu_->session_id() > handed_session + 1;
  if (!same.ok() && foreign_exchange) {
    out.error = "while GPU " + gpu_name_ + " was routed to holder " + plan.holder +
                ", a key exchange the orchestrator did not make ended the session the "
                "holder was handed (device session " + std::to_string(handed_session) +
                " -> " + std::to_string(gpu_->session_id()) + ") and wiped device memory";
    out.holder_fault = true;
  } else if (!same.ok()) {
    // The session was lost without an exchange the device counted (a reset,
    // or another device): the host's doing, whatever the holder saw.
    out.error = "GPU substitution detected: " + std::string(same.message()) +
                (s.ok() ? "" : " (holder " + plan.holder + " reported: " +
                                   std::string(s.message()) + ")");
  } else if (!s.ok()) {
    out.error = std::string(s.message());
    out.holder_fault = holder_fault;
  }
  bool trained = false;
  bool at_scrub = false;  // step "scrub" is committed
  if (out.error.empty()) {
    // The window read back above: the device must hold exactly what the
    // holder encrypted.
    bool digest_match = false;
    if (rd.ok()) {
      auto digest = WindowDigest(lce, handed_session, plan.buffer_id, 0, data,
                                 plan.chunk_bytes, window.first);
      digest_match = digest.ok() && *digest == prep.digest() &&
                     prep.bytes() == plan.window_length;
    }
    // The report is committed with the next step: train when the window is
    // good and a trainer waits, else straight to scrub.
    const bool train = rd.ok() && digest_match && !control->cancelled() && hooks->Trains();
    absl::Status rec = hooks->Provisioned(
        prep.bytes(), prep.chunks(), prep.seconds(), digest_match,
        StepAfterProvisioned(train),
        train ? "training on the window" : "zeroing and verifying the buffer");
    at_scrub = rec.ok() && !train;
    if (!rd.ok()) {
      out.error = std::string(rd.message());
    } else if (!digest_match) {
      out.error = "digest mismatch: the device holds something other than what holder " +
                  plan.holder + " reported";
      out.holder_fault = true;
    } else if (!rec.ok()) {
      out.error = std::string(rec.message());
    } else if (control->cancelled()) {
      out.error = "cancelled";
    } else if (train) {
      auto t = hooks->Train(data);
      if (t.ok()) {
        trained = *t;
        out.trained = *t;
      } else {
        out.error = std::string(t.status().message());
      }
    }
    Zeroize(&data[0], data.size());  // consumed; wiped again on the way out
  }
  lce.key.Clear();
  // Scrub before any other holder can get the GPU (P2). A trained trip is
  // already at "scrub" (committed with the checkpoint), and so is one whose
  // report was committed with it.
  if (!trained && !at_scrub) {
    commit = hooks->Step(TripStep::kScrub, "zeroing and verifying the buffer");
    if (!commit.ok()) GT_LOG(0, "trip ", plan.trip, ": ", commit.message());
  }
  absl::Status scrub = ScrubOrGone(plan.buffer_id, plan.buffer_bytes, &out.buffer_gone);
  if (!scrub.ok()) return scrub;  // residue cannot be ruled out
  out.scrub_verified = true;
  hooks->Scrubbed();
  out.cancelled = control->cancelled();
  out.ok = out.error.empty() && out.rekeyed && out.scrub_verified;
  return out;
}

}  // namespace gputravel
