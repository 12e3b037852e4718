#include "orchestrator/trip_runner.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "auth/identity.h"
#include "auth/revocation_list.h"
#include "device/h2d_writer.h"
#include "device/window_digest.h"
#include "holder_agent/provision_fault.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/report_seal.h"
#include "keyxfer/counter_window.h"
#include "keyxfer/handoff.h"
#include "keyxfer/handoff_lanes.h"
#include "keyxfer/secret_bytes.h"
#include "orchestrator/state_store.h"
#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {
namespace {

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

absl::Status TripRunner::CallMux(
    const std::string& what, double deadline_seconds,
    const std::function<grpc::Status(grpc::ClientContext*)>& call) {
  absl::Status first;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(deadline_seconds));
    first = FromGrpc(call(&ctx), what);
  }
  if (!absl::IsUnavailable(first)) return first;
  // Either the channel is still failing after the MUX came back, or the MUX
  // is down: wait a bounded moment for it to connect, once. Repeating the
  // request is safe: it carries the same fencing token.
  GT_LOG(1, what, ": ", first.message(), "; trying once more for up to ",
         kMuxReconnectSeconds, " s");
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(Deadline(std::min<double>(kMuxReconnectSeconds, deadline_seconds)));
  absl::Status again = FromGrpc(call(&ctx), what);
  // A MUX that never came back: its own error says more than the wait's.
  return absl::IsDeadlineExceeded(again) ? first : again;
}

absl::Status TripRunner::RouteTo(const std::string& domain, uint64_t token) {
  v1::RouteRequest req;
  req.set_gpu(gpu_name_);
  req.set_domain(domain);
  req.set_fencing_token(token);
  absl::Status s = CallMux("MUX Route " + gpu_name_ + " -> " + domain, 30,
                           [&](grpc::ClientContext* ctx) {
                             v1::RouteResponse resp;
                             return mux_->Route(ctx, req, &resp);
                           });
  GT_LOG(3, "MUX Route ", gpu_name_, " -> '", domain, "' (token ", token, "): ", s.ToString());
  return s;
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
    s = CallMux("MUX Reset " + gpu_name_, 60, [&](grpc::ClientContext* ctx) {
      v1::ResetGpuResponse resp;
      return mux_->Reset(ctx, req, &resp);
    });
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

absl::Status TripRunner::Provision(const TripPlan& plan, v1::HolderAgent::Stub* holder,
                                   const v1::ProvisionRequest& req, TripHooks* hooks,
                                   const SecretBytes& report_key, TripControl* control,
                                   v1::ProvisionReport* report, TripFault* fault) {
  grpc::ClientContext ctx;
  // With the heartbeat on, the GPU must be home and re-keyed before it misses
  // two periods: the hand-off ends by then, whatever the holder's progress.
  const absl::Duration away = MaxTimeAway();
  if (away != absl::InfiniteDuration()) ctx.set_deadline(absl::ToChronoTime(absl::Now() + away));
  control->SetCall(&ctx);
  // Watchdog: a holder that sends nothing, or whose bytes do not move, for
  // holder_timeout_seconds is cut off (nobody is charged: the host can stop
  // either). While its agent says the device holds its chunks, its bytes may
  // stand still: the call is cut off once the device has held them for
  // holder_timeout_seconds, and the host's side is charged.
  absl::Mutex mu;
  bool done = false, timed_out = false;
  auto last = std::chrono::steady_clock::now();  // the bytes last moved
  auto last_word = last;                          // the holder last sent anything
  uint64_t last_bytes = 0;
  double device_wait = 0;  // as the agent last said
  bool device_stalled = false;
  const auto limit = std::chrono::duration<double>(plan.holder_timeout_seconds);
  // On the runner's long-lived thread (waited for below, so the references
  // it holds stay valid).
  std::future<void> watchdog = watchdog_thread_.Run([&] {
    absl::MutexLock l(&mu);
    while (!done) {
      mu.AwaitWithTimeout(absl::Condition(&done), absl::Milliseconds(50));
      if (done) break;
      if (device_wait > plan.holder_timeout_seconds) {
        device_stalled = true;
        ctx.TryCancel();
        return;
      }
      const auto now = std::chrono::steady_clock::now();
      // A device wait that never grows past the limit while the bytes stand
      // still is no progress either: cut off at twice the limit.
      if (now - last_word > limit || (now - last > limit && device_wait == 0) ||
          now - last > 2 * limit) {
        timed_out = true;
        ctx.TryCancel();
        return;
      }
    }
  });
  auto reader = holder->Provision(&ctx, req);
  v1::ProvisionUpdate u;
  bool got_report = false;
  std::string sealed;
  while (reader->Read(&u)) {
    {
      absl::MutexLock l(&mu);
      last_word = std::chrono::steady_clock::now();
      if (u.has_sealed_report() || u.progress().bytes() != last_bytes ||
          u.progress().device_wait_seconds() == 0) {
        last = std::chrono::steady_clock::now();
      }
      last_bytes = u.progress().bytes();
      device_wait = u.has_sealed_report() ? 0 : u.progress().device_wait_seconds();
    }
    if (u.has_progress()) hooks->Progress(u.progress().bytes(), u.progress().window_length());
    if (u.has_sealed_report()) {
      sealed = u.sealed_report();
      got_report = true;
    }
  }
  grpc::Status st = reader->Finish();
  {
    absl::MutexLock l(&mu);
    done = true;
  }
  // Whose side failed, as the agent said it (over mTLS: the host relays it
  // but cannot forge it). Without its word nobody is charged.
  *fault = TripFault::kUndetermined;
  if (!st.ok()) {
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto said = trailers.find(kProvisionFaultKey);
    const std::string word = said == trailers.end()
                                 ? ""
                                 : std::string(said->second.data(), said->second.size());
    if (word == kProvisionFaultDevice) *fault = TripFault::kHost;
    if (word == kProvisionFaultHolder) *fault = TripFault::kHolder;
    // The campaign CA revoked the holder's certificate: this process's own
    // check of the CA-signed CRL refused it (never the call's message, which
    // the agent may pass on from the host's device path).
    if (RefusedAsRevoked(Identity{kRoleHolder, plan.holder})) *fault = TripFault::kHolder;
  }
  watchdog.wait();
  control->SetCall(nullptr);
  if (device_stalled) {
    *fault = TripFault::kHost;
    return absl::DeadlineExceededError(
        "GPU " + gpu_name_ + " held holder " + plan.holder + "'s chunks unacknowledged for " +
        Seconds(plan.holder_timeout_seconds) +
        " (holder_timeout_seconds), as its agent reported: the device, or the host's route "
        "to it, stopped");
  }
  if (timed_out) {
    *fault = TripFault::kUndetermined;
    return absl::DeadlineExceededError(
        "holder " + plan.holder + " made no progress for " +
        Seconds(plan.holder_timeout_seconds) +
        " (holder_timeout_seconds); the holder or the network between it and the "
        "orchestrator stopped");
  }
  if (control->cancelled()) {
    *fault = TripFault::kNone;
    return absl::CancelledError("the campaign was cancelled");
  }
  if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && away != absl::InfiniteDuration()) {
    *fault = TripFault::kUndetermined;
    return absl::DeadlineExceededError(
        "holder " + plan.holder + " did not finish within " + absl::FormatDuration(away) +
        ", the longest GPU " + gpu_name_ + " may stay away with a CC heartbeat period of " +
        absl::FormatDuration(heartbeat_period_) + " (use smaller windows, or a longer period)");
  }
  absl::Status s = FromGrpc(st, "holder " + plan.holder + " Provision");
  if (!s.ok() && *fault == TripFault::kHost) {
    return absl::Status(s.code(), "the GPU failed holder " + plan.holder +
                                      "'s write, or could not be reached from its TD (the "
                                      "host's route or the device): " +
                                      std::string(s.message()));
  }
  if (!s.ok()) return s;
  if (!got_report) {
    *fault = TripFault::kHolder;  // its agent said OK and sent nothing
    return absl::InternalError("holder " + plan.holder + " ended Provision without a report");
  }
  // Only the holder's attested TD holds the channel's report key: a report
  // anyone else made, changed or replayed from another trip does not open.
  // Only the holder's agent speaks on this stream (mTLS under its
  // certificate), so a report that does not open is the holder's doing.
  auto opened = OpenReport(report_key, req.binding(), sealed);
  if (!opened.ok()) {
    *fault = TripFault::kHolder;
    return opened.status();
  }
  *report = *std::move(opened);
  *fault = TripFault::kNone;
  return absl::OkStatus();
}

absl::StatusOr<PreparedChannel> TripRunner::PrepareChannel(const std::string& holder_name,
                                                           v1::HolderAgent::Stub* holder,
                                                           double timeout_seconds,
                                                           TripControl* control,
                                                           TripFault* fault) {
  TripFault ignored;
  if (fault == nullptr) fault = &ignored;
  // Evidence that does not verify or meet the policy is no evidence against
  // the holder: the host makes the quote (its quote service) and launches
  // the TD (the firmware MRTD measures, the disk the agent comes from).
  *fault = TripFault::kUndetermined;
  bool call_failed = false;
  auto opened = OpenHolderChannel(
      holder, holder_name, "holder " + holder_name, timeout_seconds, *verifier_, *attester_,
      control == nullptr ? std::function<void(grpc::ClientContext*)>()
                         : [control](grpc::ClientContext* ctx) { control->SetCall(ctx); },
      &call_failed);
  // The campaign CA revoked the holder's certificate (this process's own
  // check of the CA-signed CRL refused it): the CA's word.
  if (!opened.ok() && call_failed && RefusedAsRevoked(Identity{kRoleHolder, holder_name})) {
    *fault = TripFault::kHolder;
  }
  return opened;
}

// Everything one trip carries from phase to phase.
struct TripRunner::Trip {
  Trip(const TripPlan& p, v1::HolderAgent::Stub* h, TripHooks* k, TripControl* c)
      : plan(p), holder(h), hooks(k), control(c) {}
  ~Trip() { Zeroize(&data[0], data.size()); }

  // A failure before the GPU leaves: nothing needs making safe, the buffer
  // is clean and no key has been handed out.
  TripOutcome Fail(const std::string& msg, TripFault fault) {
    out.error = msg;
    out.fault = fault;
    out.cancelled = control->cancelled();
    return out;
  }

  const TripPlan& plan;
  v1::HolderAgent::Stub* const holder;
  TripHooks* const hooks;
  TripControl* const control;
  TripOutcome out;
  std::optional<PreparedChannel> channel;  // attested, with the holder
  v1::ProvisionRequest request;            // our evidence, the wrapped hand-off
  // The copy-engine lanes handed to the holder, each with its own counter
  // window from the first counter (P4), and their union on one key
  // ([first, first + the longest lane's count)), recorded with route_out.
  std::vector<v1::H2dLane> lanes;
  CounterWindow window;
  uint64_t handed_session = 0;             // the session whose key it was
  // How the holder's provisioning went (OK, or why not), and whose side a
  // failure is charged to.
  absl::Status provisioned;
  TripFault provision_fault = TripFault::kNone;
  v1::ProvisionReport report;
  // The window's plaintext as read back: wiped on every way out.
  std::string data;
  absl::Status read;      // how reading it back went
  bool at_scrub = false;  // step "scrub" is committed (with training or the report)
  // Chunks the device's copy engines accepted in the session the holder was
  // handed, as the device said under it (sealed) just before the re-key.
  uint64_t chunks_accepted = 0;
};

// What a trip must never leave behind, in one owner. The hand-off key (the
// copy engine's key wrapped for the holder) is wiped once the trip no longer
// needs it, and at the latest when the guard goes. Once the GPU has left,
// the way back to a safe state (route home, re-key, scrub and verify, each
// committed before it happens) runs on every way out: Finish() runs what the
// trip's path has not, and a guard that goes without it (an exit path that
// forgot it) runs it itself. A step of it that fails leaves the GPU to the
// caller, which must stop using it (recovery makes it safe).
class TripRunner::SafetyGuard {
 public:
  SafetyGuard(TripRunner* runner, Trip* trip) : runner_(runner), trip_(trip) {}
  ~SafetyGuard() {
    WipeKey();
    if (stage_ != Stage::kHome && stage_ != Stage::kSafe && stage_ != Stage::kUnsafe) {
      GT_LOG(0, "trip ", trip_->plan.trip, ": an exit path left GPU ", runner_->gpu_name_,
             " without making it safe; doing it now");
      absl::Status s = Finish();
      if (!s.ok()) GT_LOG(0, "trip ", trip_->plan.trip, ": ", s.message());
    }
  }
  SafetyGuard(const SafetyGuard&) = delete;
  SafetyGuard& operator=(const SafetyGuard&) = delete;

  void HoldKeys(std::vector<ChannelMaterial> keys) { keys_ = std::move(keys); }
  const std::vector<ChannelMaterial>& keys() const { return keys_; }
  void WipeKey() {
    for (ChannelMaterial& k : keys_) k.key.Clear();
  }

  // The GPU is about to leave (route_out is committed): from here on the
  // safe path runs whatever happens.
  void Departing() { stage_ = Stage::kAway; }

  // Route home, committed first (a failed commit is logged: the GPU must
  // come home regardless).
  absl::Status RouteBack() {
    Commit(TripStep::kRouteBack, "routing " + runner_->gpu_name_ + " home");
    return Advance(runner_->RouteHome(trip_->plan.trip), Stage::kRoutedHome);
  }
  // The fresh key agreement (every key of the session the holder saw dies),
  // with `prior` run under the old session first (see GpuSession).
  absl::Status Rekey(const v1::DeviceCommand& prior, GpuSession::PriorOutcome* came_back) {
    Commit(TripStep::kRekey, "same-device check and fresh key agreement");
    absl::Status s = runner_->gpu_->EstablishAfter(prior, came_back);
    if (s.ok()) trip_->out.rekeyed = runner_->gpu_->session_id() != trip_->handed_session;
    return Advance(s, Stage::kRekeyed);
  }
  // Scrub and verify the buffer before any other holder can get the GPU
  // (P2). A trip already at "scrub" (committed with its training or its
  // report) is not moved there again.
  absl::Status Scrub() {
    if (!trip_->at_scrub) Commit(TripStep::kScrub, "zeroing and verifying the buffer");
    absl::Status s = runner_->ScrubOrGone(trip_->plan.buffer_id, trip_->plan.buffer_bytes,
                                          &trip_->out.buffer_gone);
    if (s.ok()) trip_->out.scrub_verified = true;
    return Advance(s, Stage::kSafe);
  }
  // Runs what the safe path still needs (nothing if the GPU never left);
  // the first failure means the GPU cannot be shown safe.
  absl::Status Finish() {
    WipeKey();
    if (stage_ == Stage::kUnsafe) {
      return absl::FailedPreconditionError("trip " + std::to_string(trip_->plan.trip) +
                                           ": GPU " + runner_->gpu_name_ +
                                           " could not be made safe");
    }
    if (stage_ == Stage::kAway) {
      absl::Status s = RouteBack();
      if (!s.ok()) return s;
    }
    if (stage_ == Stage::kRoutedHome) {
      v1::DeviceCommand query;
      query.mutable_query();
      GpuSession::PriorOutcome ignored;
      absl::Status s = Rekey(query, &ignored);
      if (!s.ok()) return s;
    }
    if (stage_ == Stage::kRekeyed) return Scrub();
    return absl::OkStatus();
  }

 private:
  enum class Stage { kHome, kAway, kRoutedHome, kRekeyed, kSafe, kUnsafe };

  void Commit(TripStep step, const std::string& message) {
    absl::Status s = trip_->hooks->Step(step, message);
    if (!s.ok()) GT_LOG(0, "trip ", trip_->plan.trip, ": ", s.message());
  }
  absl::Status Advance(absl::Status s, Stage next) {
    stage_ = s.ok() ? next : Stage::kUnsafe;
    return s;
  }

  TripRunner* const runner_;
  Trip* const trip_;
  std::vector<ChannelMaterial> keys_;  // one per lane of the hand-off
  Stage stage_ = Stage::kHome;
};

absl::StatusOr<TripOutcome> TripRunner::Run(const TripPlan& plan,
                                            v1::HolderAgent::Stub* holder,
                                            TripHooks* hooks, TripControl* control,
                                            std::optional<PreparedChannel> prepared) {
  GT_LOG(1, "trip ", plan.trip, ": ", plan.holder, " window [", plan.window_offset, ", +",
         plan.window_length, ")");
  Trip trip(plan, holder, hooks, control);
  if (!OpenChannel(&trip, std::move(prepared))) return trip.out;
  GT_LOG(3, "trip ", plan.trip, ": channel with holder ", plan.holder, " attested");
  hooks->Attested(trip.channel->channel.peer);
  SafetyGuard guard(this, &trip);
  auto ready = PrepareHandoff(&trip, &guard);
  if (!ready.ok()) return ready.status();
  if (!*ready) return trip.out;
  GT_LOG(3, "trip ", plan.trip, ": hand-off prepared, ", trip.lanes.size(),
         " lane(s), counter window first ", trip.window.first, " count ", trip.window.count,
         ", device session ", trip.handed_session);
  if (!Leave(&trip, &guard)) return trip.out;
  GT_LOG(3, "trip ", plan.trip, ": provisioning by ", plan.holder, ": ",
         trip.provisioned.ToString());
  absl::Status home = ComeHome(&trip, &guard);
  if (!home.ok()) return home;  // cannot prove a safe state
  GT_LOG(3, "trip ", plan.trip, ": GPU home and re-keyed, device session ",
         gpu_->session_id(), ", ", trip.chunks_accepted, " chunk(s) accepted");
  VerifyAndTrain(&trip, &guard);
  GT_LOG(3, "trip ", plan.trip, ": verified", trip.out.trained ? " and trained" : "",
         trip.out.error.empty() ? "" : ", error: ", trip.out.error);
  absl::Status safe = guard.Finish();  // the scrub
  if (!safe.ok()) return safe;  // residue cannot be ruled out
  GT_LOG(3, "trip ", plan.trip, ": buffer ", plan.buffer_id, " scrubbed");
  hooks->Scrubbed();
  trip.out.cancelled = control->cancelled();
  trip.out.ok = trip.out.error.empty() && trip.out.rekeyed && trip.out.scrub_verified;
  return trip.out;
}

bool TripRunner::OpenChannel(Trip* trip, std::optional<PreparedChannel> prepared) {
  // The channel with the holder, mutually attested, before anything leaves:
  // the one prepared while the previous trip's GPU was scrubbed, if it is for
  // this holder and fresh, else a new one.
  const TripPlan& plan = trip->plan;
  if (prepared.has_value() && prepared->holder == plan.holder &&
      std::chrono::steady_clock::now() - prepared->opened < kPreparedChannelLifetime) {
    trip->channel = std::move(prepared);
  }
  prepared.reset();
  if (trip->channel.has_value()) return true;
  TripFault fault = TripFault::kNone;
  auto opened = PrepareChannel(plan.holder, trip->holder, plan.holder_timeout_seconds,
                               trip->control, &fault);
  if (trip->control->cancelled()) {
    trip->Fail("cancelled", TripFault::kNone);
    return false;
  }
  if (!opened.ok()) {
    trip->Fail(std::string(opened.status().message()), fault);
    return false;
  }
  trip->channel = std::move(*opened);
  return true;
}

absl::StatusOr<bool> TripRunner::PrepareHandoff(Trip* trip, SafetyGuard* guard) {
  const TripPlan& plan = trip->plan;
  AttestedChannel* channel = &trip->channel->channel;
  v1::ProvisionRequest& preq = trip->request;
  *preq.mutable_orchestrator_evidence() = trip->channel->own_evidence;

  // The counter windows on the session's copy-engine H2D keys (P4). The
  // session is fresh for this trip and its keys exist only in this process's
  // memory. The hand-off is a key fetch with an IV space of its own per engine
  // (H2dKeysForHandoff: the untouched one, as every trip re-keys on its way
  // home; after an earlier hand-off in the same session, a rotated one), so
  // each window starts at the first counter, and after a crash the keys are
  // gone and recovery re-keys. The windows are recorded with the route_out commit
  // (Leave), before it leaves.
  // The window goes through `copy_engines` engines side by side, one lane
  // (a contiguous part of whole chunks) each, each with its own engine's key
  // and counter window.
  auto lanes_or = PlanLanes(plan.window_length, plan.chunk_bytes, plan.copy_engines);
  if (!lanes_or.ok()) return lanes_or.status();
  trip->lanes = std::move(*lanes_or);
  uint32_t longest = 0;
  for (const v1::H2dLane& l : trip->lanes) longest = std::max(longest, l.counter_count());
  auto window_or = CounterWindowAt(kFirstMessageCounter, longest);
  if (!window_or.ok()) return window_or.status();
  trip->window = *window_or;
  auto keys_or = gpu_->H2dKeysForHandoff(static_cast<uint32_t>(trip->lanes.size()));
  if (!keys_or.ok()) return keys_or.status();
  guard->HoldKeys(std::move(*keys_or));
  // The device accepts nothing under these keys outside their lanes: not
  // another buffer, not other bytes, not past their counters. A holder that
  // keeps them can write no more than it was handed, even before the
  // re-key, and what it tries is counted (ComeHome).
  absl::Status bounded = gpu_->GrantH2d(LaneGrants(trip->lanes, plan.buffer_id));
  if (!bounded.ok()) {
    trip->Fail("granting the copy engines the trip's window: " + std::string(bounded.message()),
               TripFault::kNone);
    return false;
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
  b->set_chunk_size(plan.chunk_bytes);
  for (const v1::H2dLane& l : trip->lanes) *b->add_lanes() = l;
  *b->mutable_terms() = plan.terms;
  trip->handed_session = gpu_->session_id();
  auto blob = WrapHandoff(channel->handoff_key, *b, guard->keys());
  channel->handoff_key.Clear();
  if (!blob.ok()) return blob.status();
  preq.set_channel_id(trip->channel->channel_id);
  preq.set_wrapped_handoff(*blob);

  // With the heartbeat on, one now: the GPU then has two full periods before
  // it must be home and re-keyed (Provision's deadline keeps to that).
  if (heartbeat_period_ > absl::ZeroDuration()) {
    absl::Status hb = gpu_->Heartbeat();
    if (!hb.ok()) {
      trip->Fail("heartbeat before the GPU leaves: " + std::string(hb.message()),
                 TripFault::kNone);
      return false;
    }
  }
  return true;
}

bool TripRunner::Leave(Trip* trip, SafetyGuard* guard) {
  const TripPlan& plan = trip->plan;
  TripControl* control = trip->control;
  // Route out: committed first, and from here on every exit goes through the
  // safe path (the guard).
  absl::Status s = trip->hooks->RouteOut(
      TripCounterWindow{trip->handed_session, trip->window.first, trip->window.count,
                        gpu_->serial()},
      "routing " + gpu_name_ + " to " + plan.holder_domain);
  if (s.ok() && control->cancelled()) s = absl::CancelledError("the campaign was cancelled");
  if (!s.ok()) {
    trip->Fail(std::string(s.message()), TripFault::kNone);
    return false;
  }
  guard->Departing();
  s = RouteTo(plan.holder_domain, plan.trip);
  // The MUX is the host's: a route it refused or failed is the host's side.
  if (!s.ok() && !control->cancelled()) trip->provision_fault = TripFault::kHost;
  if (s.ok()) s = trip->hooks->Step(TripStep::kProvision, "hand-off and provisioning");
  if (s.ok() && control->cancelled()) s = absl::CancelledError("the campaign was cancelled");
  if (s.ok()) {
    TripFault fault = TripFault::kNone;
    s = Provision(plan, trip->holder, trip->request, trip->hooks,
                  trip->channel->channel.report_key, control, &trip->report, &fault);
    // Whose side a failure is: the holder's only on its agent's word (or
    // its OK without a report), the host's when the agent (attested) says
    // the device path failed or stalled, nobody's otherwise.
    trip->provision_fault = s.ok() || control->cancelled() ? TripFault::kNone : fault;
  }
  trip->request.clear_wrapped_handoff();
  trip->channel->channel.report_key.Clear();  // one report per channel
  trip->provisioned = s;
  return true;
}

absl::Status TripRunner::ComeHome(Trip* trip, SafetyGuard* guard) {
  const TripPlan& plan = trip->plan;
  TripOutcome& out = trip->out;
  // Route back and re-key whether or not provisioning worked.
  absl::Status back = guard->RouteBack();
  if (!back.ok()) return back;
  // The GPU that came back must still hold the session H saw: a sealed
  // command on it must round-trip. That command rides on the re-key's own
  // request (the device runs it under the old session, then the exchange
  // ends that session, with nothing in between): when provisioning worked,
  // it is the read-back of the window's last piece (the earlier pieces of a
  // window over 8 MiB are read before), else a query. The GPU is home, so
  // H's key cannot be used meanwhile, and only this process holds the
  // session's control keys. A read the device refuses under that session
  // (an authenticated answer) is told apart from a lost session.
  std::string& data = trip->data;
  constexpr uint64_t kReadPiece = 8u << 20;
  absl::Status& rd = trip->read;
  v1::DeviceCommand prior;
  bool reads_last_piece = false;
  uint64_t last_off = 0;
  if (trip->provisioned.ok()) {
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
  absl::Status rekey = guard->Rekey(prior, &came_back);
  if (!rekey.ok()) return rekey;  // cannot prove a safe state
  const absl::Status same = came_back.session;
  trip->chunks_accepted = came_back.h2d_chunks_accepted;
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
  trip->hooks->Rekeyed();
  // The device signed the new session's number: our own exchange right after
  // the one the holder was handed is handed_session + 1. A larger number
  // means that somebody else exchanged keys with this GPU while it was
  // routed to the holder, which ended the holder's session and wiped device
  // memory: the holder's TD, or the host (it can route the GPU anywhere in
  // between). Nobody owns up to it, so nobody is charged.
  const uint64_t handed_session = trip->handed_session;
  const absl::Status& s = trip->provisioned;
  const bool foreign_exchange =
      !came_back.retried && gpu_->session_id() > handed_session + 1;
  if (!same.ok() && foreign_exchange) {
    out.error = "while GPU " + gpu_name_ + " was routed to holder " + plan.holder +
                ", a key exchange the orchestrator did not make ended the session the "
                "holder was handed (device session " + std::to_string(handed_session) +
                " -> " + std::to_string(gpu_->session_id()) +
                ") and wiped device memory (holder " + plan.holder +
                "'s TD or the host made it)";
    out.fault = TripFault::kUndetermined;
  } else if (same.ok() && came_back.h2d_grant_refusals != 0) {
    // The device refused chunks that authenticated under the keys handed to
    // this holder but aimed outside its window (another buffer, other bytes,
    // counters past its own): only the holder had those keys.
    out.error = "holder " + plan.holder + " wrote outside its window: GPU " + gpu_name_ +
                " refused " + std::to_string(came_back.h2d_grant_refusals) +
                " chunk(s) made with its keys for another buffer, other bytes or counters "
                "past its window; the trip is not trusted";
    out.fault = TripFault::kHolder;
  } else if (!same.ok()) {
    // The session was lost without an exchange the device counted (a reset,
    // or another device): the host's doing, whatever the holder saw.
    out.error = "GPU substitution detected: " + std::string(same.message()) +
                (s.ok() ? "" : " (holder " + plan.holder + " reported: " +
                                   std::string(s.message()) + ")");
    out.fault = TripFault::kHost;
  } else if (!s.ok()) {
    out.error = std::string(s.message());
    out.fault = trip->provision_fault;
  }
  return absl::OkStatus();
}

void TripRunner::VerifyAndTrain(Trip* trip, SafetyGuard* guard) {
  const TripPlan& plan = trip->plan;
  TripOutcome& out = trip->out;
  if (!out.error.empty()) return;
  TripHooks* hooks = trip->hooks;
  const absl::Status& rd = trip->read;
  std::string& data = trip->data;
  const v1::ProvisionReport& prep = trip->report;
  // The window read back: the device must hold exactly what the holder
  // encrypted.
  bool digest_match = false;
  if (rd.ok()) {
    auto digest = WindowDigest(LaneWrites(trip->lanes, guard->keys()), trip->handed_session, plan.buffer_id, 0, data,
                               plan.chunk_bytes);
    digest_match = digest.ok() && *digest == prep.digest() &&
                   prep.bytes() == plan.window_length;
  }
  // The report is committed with the next step: train when the window is
  // good and a trainer waits, else straight to scrub.
  const bool train = rd.ok() && digest_match && !trip->control->cancelled() && hooks->Trains();
  absl::Status rec = hooks->Provisioned(
      prep.bytes(), prep.chunks(), prep.seconds(), digest_match, StepAfterProvisioned(train),
      train ? "training on the window" : "zeroing and verifying the buffer");
  trip->at_scrub = rec.ok() && !train;
  if (!rd.ok()) {
    out.error = std::string(rd.message());
  } else if (!digest_match) {
    // Evidence against the holder only when every chunk of the window
    // reached the device under the keys only it held: then what it wrote is
    // not what it reported. Fewer chunks mean some were held back on the
    // way, or their acknowledgements faked, which the host can do.
    const uint64_t chunks = H2dWriter::ChunksFor(plan.window_length, plan.chunk_bytes);
    if (trip->chunks_accepted == chunks) {
      out.error = "digest mismatch: the device holds something other than what holder " +
                  plan.holder + " reported";
      out.fault = TripFault::kHolder;
    } else {
      out.error = "digest mismatch: GPU " + gpu_name_ + " accepted " +
                  std::to_string(trip->chunks_accepted) + " of the window's " +
                  std::to_string(chunks) + " chunks that holder " + plan.holder +
                  " reported written (held back on the way, or the holder's report is false)";
      out.fault = TripFault::kUndetermined;
    }
  } else if (!rec.ok()) {
    out.error = std::string(rec.message());
  } else if (trip->control->cancelled()) {
    out.error = "cancelled";
  } else if (train) {
    // A trained trip is at "scrub", committed with the checkpoint.
    auto t = hooks->Train(data);
    if (t.ok()) {
      trip->at_scrub = *t;
      out.trained = *t;
    } else {
      out.error = std::string(t.status().message());
    }
  }
  Zeroize(&data[0], data.size());  // consumed; wiped again on the way out
}

const char* TripFaultName(TripFault fault) {
  switch (fault) {
    case TripFault::kNone:
      return "none";
    case TripFault::kHolder:
      return "holder";
    case TripFault::kHost:
      return "host";
    case TripFault::kUndetermined:
      return "undetermined";
  }
  return "none";
}

}  // namespace gputravel
