#include "orchestrator/orchestrator_service.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "auth/authorize.h"
#include "orchestrator/trip_steps.h"
#include "util/grpc_status.h"
#include "util/log.h"

namespace gputravel {
namespace {

// WatchCampaign sends live events at most this often (see there).
constexpr absl::Duration kWatchBatchInterval = absl::Milliseconds(10);

// Operators and schedulers drive campaigns; nobody else.
grpc::Status AuthorizeControl(grpc::ServerContext* ctx) {
  return Authorize(*ctx, {kRoleOperator, kRoleScheduler});
}

v1::CampaignState StateToProto(const std::string& s) {
  const std::optional<CampaignState> state = CampaignStateFromString(s);
  if (!state.has_value()) return v1::CAMPAIGN_STATE_UNSPECIFIED;
  switch (*state) {
    case CampaignState::kCreated: return v1::CREATED;
    case CampaignState::kRunning: return v1::RUNNING;
    case CampaignState::kPausing: return v1::PAUSING;
    case CampaignState::kPaused: return v1::PAUSED;
    case CampaignState::kCancelling: return v1::CANCELLING;
    case CampaignState::kCompleted: return v1::COMPLETED;
    case CampaignState::kFailed: return v1::FAILED;
    case CampaignState::kCancelled: return v1::CANCELLED;
  }
  return v1::CAMPAIGN_STATE_UNSPECIFIED;
}

v1::TripStep StepToProto(const std::string& s) {
  const std::optional<TripStep> step = TripStepFromString(s);
  if (!step.has_value()) return v1::TRIP_STEP_UNSPECIFIED;
  switch (*step) {
    case TripStep::kPlanned: return v1::PLANNED;
    case TripStep::kRouteOut: return v1::ROUTE_OUT;
    case TripStep::kProvision: return v1::PROVISION;
    case TripStep::kRouteBack: return v1::ROUTE_BACK;
    case TripStep::kRekey: return v1::REKEY;
    case TripStep::kTrain: return v1::TRAIN;
    case TripStep::kScrub: return v1::SCRUB;
    case TripStep::kDone: return v1::DONE;
    case TripStep::kAborted: return v1::ABORTED;
  }
  return v1::TRIP_STEP_UNSPECIFIED;
}

v1::EventKind KindToProto(const std::string& s) {
  static const std::map<std::string, v1::EventKind> m = {
      {"campaign_state", v1::CAMPAIGN_STATE}, {"trip_started", v1::TRIP_STARTED},
      {"step", v1::STEP},                     {"provisioned", v1::PROVISIONED},
      {"trained", v1::TRAINED},               {"scrubbed", v1::SCRUBBED},
      {"trip_finished", v1::TRIP_FINISHED},   {"error", v1::ERROR},
      {"recovery", v1::RECOVERY}};
  auto it = m.find(s);
  return it == m.end() ? v1::EVENT_KIND_UNSPECIFIED : it->second;
}

bool IsTerminal(v1::CampaignState s) {
  return s == v1::COMPLETED || s == v1::FAILED || s == v1::CANCELLED;
}

void TripToProto(const TripRow& t, v1::Trip* out) {
  out->set_id(t.id);
  out->set_campaign(t.campaign);
  out->set_holder(t.holder);
  out->set_window_offset(t.window_offset);
  out->set_window_length(t.window_length);
  out->set_round(t.round);
  out->set_step(StepToProto(t.step));
  out->set_outcome(t.outcome);
  out->set_error(t.error);
  out->set_bytes(t.bytes);
  out->set_chunks(t.chunks);
  out->set_provision_seconds(t.provision_seconds);
  out->set_seconds(t.duration_us / 1e6);
  out->set_gpu_session(t.gpu_session);
  out->set_first_counter(t.first_counter);
  out->set_counter_count(t.counter_count);
  // A record that does not parse is left out (it is informational).
  if (!t.attestation.empty()) (void)out->mutable_attestation()->ParseFromString(t.attestation);
  out->set_digest_match(t.digest_match);
  out->set_scrub_verified(t.scrub_verified);
  out->set_rekeyed(t.rekeyed);
  // Only what the campaign's terms report (never the window's own loss).
  out->set_has_loss(t.reported_loss.has_value());
  out->set_loss(t.reported_loss.value_or(0));
  out->set_has_eval_loss(t.reported_eval_loss.has_value());
  out->set_eval_loss(t.reported_eval_loss.value_or(0));
  out->set_started_unix_ms(t.started_ms);
  out->set_ended_unix_ms(t.ended_ms);
}

// `campaign_state`: the campaign's stored state. A holder still active in a
// campaign that ended says how it ended for it.
void HolderToProto(const HolderRow& h, const HolderSpec* spec, const std::string& campaign_state,
                   v1::HolderStatus* out) {
  out->set_campaign(h.campaign);
  out->set_name(h.name);
  if (spec != nullptr) {
    out->set_endpoint(spec->endpoint);
    out->set_domain(spec->domain);
    out->set_dataset(spec->dataset.name);
  }
  out->set_dataset_bytes(h.dataset_bytes);
  out->set_cursor_offset(h.cursor_offset);
  out->set_round(h.round);
  out->set_state(h.state);
  if (h.state == kHolderActive && campaign_state == kCampaignCancelled) {
    out->set_state("cancelled");
  } else if (h.state == kHolderActive && campaign_state == kCampaignFailed) {
    out->set_state("unfinished");
  }
  out->set_error(h.error);
  out->set_trips(h.trips);
  out->set_bytes(h.bytes);
  if (!h.attestation.empty()) (void)out->mutable_attestation()->ParseFromString(h.attestation);
}

}  // namespace

grpc::Status OrchestratorService::Fill(const CampaignRow& stored, bool include_trips,
                                       v1::Campaign* out) {
  // As it is: a campaign stopped by a state database that cannot be
  // written reads PAUSED with that error, and a state decided but not yet
  // recorded is shown (orchestrator/storage_backoff.h).
  CampaignRow row = stored;
  engine_->storage().Show(&row);
  out->set_name(row.name);
  out->set_state(StateToProto(row.state));
  out->set_spec_json(row.spec_json);
  out->set_gpu(row.gpu);
  out->set_error(row.error);
  out->set_trips_ok(row.trips_ok);
  out->set_trips_failed(row.trips_failed + row.trips_aborted);
  out->set_bytes_provisioned(row.bytes_provisioned);
  out->set_has_loss(row.last_loss.has_value());
  out->set_last_loss(row.last_loss.value_or(0));
  out->set_has_eval_loss(row.last_eval_loss.has_value());
  out->set_last_eval_loss(row.last_eval_loss.value_or(0));
  if (!row.terms.empty() && !out->mutable_terms()->ParseFromString(row.terms)) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS,
                        "campaign '" + row.name + "': its training terms cannot be parsed");
  }
  out->set_created_unix_ms(row.created_ms);
  out->set_updated_unix_ms(row.updated_ms);
  if (row.state == kCampaignRunning) {
    const std::string holder = engine_->GpuAssignments()[row.gpu];
    if (holder != row.name) {
      out->set_waiting_for_gpu(true);
      out->set_gpu_holder(holder);
    }
  }
  auto holders = engine_->store()->ListHolders(row.name);
  if (!holders.ok()) return ToGrpc(holders.status());
  auto spec = ParseCampaignSpecText(row.spec_json, "", SpecOptions{{row.gpu}, {}});
  uint64_t total = 0;
  for (const auto& h : *holders) {
    const HolderSpec* hs = nullptr;
    if (spec.ok()) {
      for (const auto& s : spec->holders) {
        if (s.name == h.name) hs = &s;
      }
    }
    HolderToProto(h, hs, row.state, out->add_holders());
    total += h.dataset_bytes * row.rounds;
  }
  out->set_bytes_total(total);
  if (include_trips) {
    auto trips = engine_->store()->ListTrips(row.name);
    if (!trips.ok()) return ToGrpc(trips.status());
    for (const auto& t : *trips) TripToProto(t, out->add_trips());
  }
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::CreateCampaign(grpc::ServerContext* ctx,
                                                 const v1::CreateCampaignRequest* req,
                                                 v1::CreateCampaignResponse* out) {
  Identity who;
  grpc::Status auth = Authorize(*ctx, {kRoleOperator, kRoleScheduler}, &who);
  if (!auth.ok()) return auth;
  auto r = engine_->Create(req->request_id(), req->spec_json());
  if (!r.ok()) return ToGrpc(r.status());
  GT_LOG(1, DescribeIdentity(who), " created campaign '", r->campaign.name, "'",
         r->created ? "" : " (repeated request)");
  out->set_created(r->created);
  return Fill(r->campaign, false, out->mutable_campaign());
}

grpc::Status OrchestratorService::GetCampaign(grpc::ServerContext* ctx,
                                              const v1::GetCampaignRequest* req,
                                              v1::Campaign* out) {
  grpc::Status auth = AuthorizeControl(ctx);
  if (!auth.ok()) return auth;
  auto row = engine_->store()->GetCampaign(req->name());
  if (!row.ok()) return ToGrpc(row.status());
  return Fill(*row, req->include_trips(), out);
}

grpc::Status OrchestratorService::ListCampaigns(grpc::ServerContext* ctx,
                                                const v1::ListCampaignsRequest*,
                                                v1::ListCampaignsResponse* out) {
  grpc::Status auth = AuthorizeControl(ctx);
  if (!auth.ok()) return auth;
  auto rows = engine_->store()->ListCampaigns();
  if (!rows.ok()) return ToGrpc(rows.status());
  // Newest first.
  for (auto it = rows->rbegin(); it != rows->rend(); ++it) {
    grpc::Status s = Fill(*it, false, out->add_campaigns());
    if (!s.ok()) return s;
  }
  return grpc::Status::OK;
}

#define GT_CONTROL_RPC(Method, EngineCall, Verb)                                        \
  grpc::Status OrchestratorService::Method(grpc::ServerContext* ctx,                    \
                                           const v1::CampaignRef* req,                  \
                                           v1::Campaign* out) {                         \
    Identity who;                                                                       \
    grpc::Status auth = Authorize(*ctx, {kRoleOperator, kRoleScheduler}, &who);         \
    if (!auth.ok()) return auth;                                                        \
    auto row = engine_->EngineCall(req->name());                                        \
    if (!row.ok()) return ToGrpc(row.status());                                         \
    GT_LOG(1, DescribeIdentity(who), " " Verb " campaign '", req->name(), "'");         \
    return Fill(*row, false, out);                                                      \
  }

GT_CONTROL_RPC(StartCampaign, StartCampaign, "started")
GT_CONTROL_RPC(PauseCampaign, Pause, "paused")
GT_CONTROL_RPC(ResumeCampaign, Resume, "resumed")
GT_CONTROL_RPC(CancelCampaign, Cancel, "cancelled")

#undef GT_CONTROL_RPC

grpc::Status OrchestratorService::SkipHolder(grpc::ServerContext* ctx,
                                             const v1::SkipHolderRequest* req,
                                             v1::Campaign* out) {
  // Dropping a holder's data from a campaign is an operator's decision.
  Identity who;
  grpc::Status auth = Authorize(*ctx, {kRoleOperator}, &who);
  if (!auth.ok()) return auth;
  auto row = engine_->SkipHolder(req->campaign(), req->holder(), req->reason(),
                                 DescribeIdentity(who));
  if (!row.ok()) return ToGrpc(row.status());
  return Fill(*row, false, out);
}

grpc::Status OrchestratorService::DeleteCampaign(grpc::ServerContext* ctx,
                                                 const v1::CampaignRef* req,
                                                 v1::DeleteCampaignResponse*) {
  // Erasing a campaign's record is an operator's decision.
  Identity who;
  grpc::Status auth = Authorize(*ctx, {kRoleOperator}, &who);
  if (!auth.ok()) return auth;
  return ToGrpc(engine_->DeleteCampaign(req->name(), DescribeIdentity(who)));
}

grpc::Status OrchestratorService::WatchCampaign(grpc::ServerContext* ctx,
                                                const v1::WatchCampaignRequest* req,
                                                grpc::ServerWriter<v1::Event>* out) {
  Identity who;
  grpc::Status auth = Authorize(*ctx, {kRoleOperator, kRoleScheduler}, &who);
  if (!auth.ok()) return auth;
  StateStore* store = engine_->store();
  auto exists = store->GetCampaignState(req->name());
  if (!exists.ok()) return ToGrpc(exists.status());
  CampaignChanges* changes = engine_->changes();
  // Each stream holds a server thread: a caller gets kMaxWatchesPerCaller.
  auto watch = changes->StartWatch(DescribeIdentity(who));
  if (!watch.ok()) return ToGrpc(watch.status());
  int64_t seq = req->after_seq();
  uint64_t progress_seen = 0;
  // Per trip: its holder and window length (the total of its PROVISIONED),
  // for the latest kTripsRemembered trips: events come in trip order, so an
  // older trip's events are behind the stream (a stream that follows a
  // campaign for thousands of trips stays the same size).
  constexpr size_t kTripsRemembered = 8;
  std::map<uint64_t, std::pair<std::string, uint64_t>> trip_holder;
  // A watcher that left is noticed by the next failing Write. Asking gRPC
  // whether the call was cancelled polls its completion queue (it cost more
  // than the rest of a wake-up), so that is asked only when a wait ended
  // without news, and at least every second.
  bool ask_cancelled = true;
  auto asked = std::chrono::steady_clock::now();
  while (!engine_->stopping()) {
    if (ask_cancelled || std::chrono::steady_clock::now() - asked > std::chrono::seconds(1)) {
      if (ctx->IsCancelled()) break;
      asked = std::chrono::steady_clock::now();
    }
    // Read the campaign's position and state BEFORE its events: the event
    // that makes a campaign final is committed with the state, so a final
    // state seen here means its event is in the batch read next.
    const CampaignChanges::Version latest = changes->Current(req->name());
    auto now = store->GetCampaignState(req->name());
    if (!now.ok()) return ToGrpc(now.status());
    auto events = store->EventsAfter(req->name(), seq, 256);
    if (!events.ok()) return ToGrpc(events.status());
    bool final_sent = false;
    bool sent = false;
    for (const EventRow& e : *events) {
      seq = e.seq;
      v1::Event ev;
      ev.set_seq(e.seq);
      ev.set_campaign(e.campaign);
      ev.set_kind(KindToProto(e.kind));
      if (ev.kind() == v1::EVENT_KIND_UNSPECIFIED) continue;  // internal bookkeeping
      ev.set_trip(e.trip);
      if (e.trip != 0) {
        auto it = trip_holder.find(e.trip);
        if (it == trip_holder.end()) {
          auto t = store->GetTrip(e.trip);
          it = trip_holder
                   .emplace(e.trip, t.ok() ? std::make_pair(t->holder, t->window_length)
                                           : std::make_pair(std::string(), uint64_t{0}))
                   .first;
          if (trip_holder.size() > kTripsRemembered && trip_holder.begin() != it) {
            trip_holder.erase(trip_holder.begin());
          }
        }
        ev.set_holder(it->second.first);
        if (e.kind == "provisioned") ev.set_total_bytes(it->second.second);
      }
      if (e.kind == "campaign_state") {
        ev.set_campaign_state(StateToProto(e.step));
        final_sent = IsTerminal(ev.campaign_state());
      } else {
        ev.set_step(StepToProto(e.step));
      }
      ev.set_message(e.message);
      ev.set_bytes(e.bytes);
      ev.set_has_loss(e.loss.has_value());
      ev.set_loss(e.loss.value_or(0));
      ev.set_has_eval_loss(e.eval_loss.has_value());
      ev.set_eval_loss(e.eval_loss.value_or(0));
      ev.set_time_unix_ms(e.time_ms);
      if (!out->Write(ev)) return grpc::Status::OK;  // the watcher left
      sent = true;
    }
    if (final_sent) return grpc::Status::OK;
    if (events->size() == 256) continue;  // more to replay
    // Final before this watch began, its final event at or before after_seq.
    if (IsTerminal(StateToProto(*now))) return grpc::Status::OK;
    LiveProgress p = engine_->Progress(req->name());
    if (p.version > progress_seen) {
      progress_seen = p.version;
      v1::Event ev;
      ev.set_campaign(req->name());
      ev.set_kind(v1::PROGRESS);
      ev.set_trip(p.trip);
      ev.set_holder(p.holder);
      ev.set_step(v1::PROVISION);
      ev.set_bytes(p.bytes);
      ev.set_total_bytes(p.total);
      ev.set_time_unix_ms(absl::ToUnixMillis(absl::Now()));
      if (!out->Write(ev)) return grpc::Status::OK;
      sent = true;
    }
    // Live events go out in batches, at most one every kWatchBatchInterval:
    // a trip commits about ten events, and waking, reading and writing for
    // each one took CPU from the trip itself on a small machine.
    if (sent) absl::SleepFor(kWatchBatchInterval);
    // Wake on a newer event or progress of this campaign only.
    CampaignChanges::Version seen = latest;
    seen.progress = std::max<uint64_t>(seen.progress, progress_seen);
    ask_cancelled = !changes->WaitForChange(req->name(), seen, absl::Milliseconds(250));
  }
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::ListHolders(grpc::ServerContext* ctx,
                                              const v1::ListHoldersRequest* req,
                                              v1::ListHoldersResponse* out) {
  Identity who;
  grpc::Status auth = Authorize(*ctx, {kRoleOperator, kRoleScheduler, kRoleHolder}, &who);
  if (!auth.ok()) return auth;
  auto rows = engine_->store()->ListCampaigns();
  if (!rows.ok()) return ToGrpc(rows.status());
  bool found = req->campaign().empty();
  for (const auto& c : *rows) {
    if (!req->campaign().empty() && c.name != req->campaign()) continue;
    found = true;
    v1::Campaign full;
    grpc::Status s = Fill(c, false, &full);
    if (!s.ok()) return s;
    for (const auto& h : full.holders()) {
      // A holder sees only itself.
      if (who.role == kRoleHolder && h.name() != who.name) continue;
      *out->add_holders() = h;
    }
  }
  // A holder learns nothing about campaigns it is not in, not even whether
  // they exist.
  if (!found && who.role != kRoleHolder) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "no campaign named '" + req->campaign() + "'");
  }
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::ListGpus(grpc::ServerContext* ctx,
                                           const v1::ListCampaignGpusRequest*,
                                           v1::ListCampaignGpusResponse* out) {
  grpc::Status auth = AuthorizeControl(ctx);
  if (!auth.ok()) return auth;
  auto views = engine_->GpuViews();
  if (!views.ok()) return ToGrpc(views.status());
  for (const auto& v : *views) {
    auto* gpu = out->add_gpus();
    gpu->set_name(v.config.name);
    gpu->set_serial(v.config.serial);
    gpu->set_campaign(v.campaign);
    switch (v.health.reach) {
      case GpuHealth::Reach::kUnknown:
        gpu->set_reach(v1::GPU_REACH_UNKNOWN);
        break;
      case GpuHealth::Reach::kReachable:
        gpu->set_reach(v1::GPU_REACHABLE);
        break;
      case GpuHealth::Reach::kUnreachable:
        gpu->set_reach(v1::GPU_UNREACHABLE);
        break;
    }
    gpu->set_error(v.health.error);
    if (v.health.checked != absl::InfinitePast()) {
      gpu->set_checked_unix_ms(absl::ToUnixMillis(v.health.checked));
    }
    gpu->set_session(v.health.session);
    gpu->set_device_serial(v.health.serial);
    gpu->set_memory_bytes(v.health.memory_bytes);
    gpu->set_memory_free_bytes(
        v.health.memory_bytes > v.held_bytes ? v.health.memory_bytes - v.held_bytes : 0);
    for (const auto& q : v.queue) gpu->add_queue(q);
  }
  return grpc::Status::OK;
}

grpc::Status OrchestratorService::CheckHolder(grpc::ServerContext* ctx,
                                              const v1::CheckHolderRequest* req,
                                              v1::HolderCheck* out) {
  grpc::Status auth = AuthorizeControl(ctx);
  if (!auth.ok()) return auth;
  auto check = engine_->CheckHolder(*req);
  if (!check.ok()) return ToGrpc(check.status());
  *out = *std::move(check);
  return grpc::Status::OK;
}

}  // namespace gputravel
