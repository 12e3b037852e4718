#include "orchestrator/campaign_engine.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <optional>

#include "auth/identity.h"
#include "auth/tls_config.h"
#include "device/gpu_session.h"
#include "keyxfer/x509.h"
#include "orchestrator/campaign_terms.h"
#include "orchestrator/eval_set.h"
#include "orchestrator/holder_check.h"
#include "orchestrator/outcome_policy.h"
#include "orchestrator/schedule.h"
#include "orchestrator/store_trip_hooks.h"
#include "orchestrator/external_trainer.h"
#include "orchestrator/trip_recovery.h"
#include "trainer/builtin_trainer.h"
#include "trainer/training_policy.h"
#include "util/failpoint.h"
#include "util/files.h"
#include "util/grpc_status.h"
#include "util/log.h"
#include "util/task_thread.h"

namespace gputravel {

struct CampaignEngine::Gpu {
  GpuConfig config;
  std::thread thread;
  // Guarded by the engine's mu_.
  std::string campaign;            // running on this GPU now
  TripControl* control = nullptr;  // of the trip in flight
  DataLoader* loader = nullptr;    // of the campaign's trainer
  RemoteTrainer* remote = nullptr;  // of a campaign of trainer kind "external"
  // Opens the next trip's attested channel beside the current trip.
  TaskThread channel_opener;
  // Only the worker's: what left a trip unfinished, for recovery's events
  // (trip_recovery.h kCause*), and the campaign a storage failure stopped
  // (with when), for its event once the storage works again.
  std::string recovery_cause = kCauseRestart;
  // Only the worker's: its GpuSession's channel to the device.
  std::shared_ptr<grpc::Channel> device_channel;
  std::string storage_stopped;
  std::string storage_error;
  absl::Time storage_stopped_at;
};

CampaignEngine::CampaignEngine(const OrchestratorConfig* config, StateStore* store,
                               Attester* attester, Verifier* verifier)
    : config_(config), store_(store), attester_(attester), verifier_(verifier) {
  // After each commit, the watchers of that event's campaign wake (only them).
  observer_ = store_->AddEventObserver(
      [this](const EventRow& e) { changes_.EventCommitted(e.campaign, e.seq); });
  // Every write tells whether the storage works.
  store_->SetStorageObserver([this](const absl::Status& write) {
    if (write.ok()) {
      storage_.Succeeded();
    } else {
      storage_.Failed(write);
    }
  });
  for (const auto& g : config_->gpus) {
    auto gpu = std::make_unique<Gpu>();
    gpu->config = g;
    gpus_.push_back(std::move(gpu));
  }
}

CampaignEngine::~CampaignEngine() {
  Shutdown();
  store_->RemoveEventObserver(observer_);
  store_->SetStorageObserver(nullptr);
}

absl::Status CampaignEngine::Start() {
  if (!config_->eval_tokens.empty()) {
    auto tokens = LoadEvalTokens(config_->eval_tokens);
    if (!tokens.ok()) return tokens.status();
    eval_tokens_ = *std::move(tokens);
  }
  auto channel = MakeSecureChannel(config_->mux_endpoint, config_->tls,
                                   Identity{kRoleMux, config_->mux_name});
  if (!channel.ok()) return channel.status();
  mux_channel_ = *channel;
  mux_ = v1::Mux::NewStub(mux_channel_);
  auto seq = store_->LastEventSeq();
  if (!seq.ok()) return seq.status();
  {
    absl::MutexLock l(&mu_);
    last_seq_ = *seq;
  }
  for (auto& g : gpus_) {
    Gpu* gpu = g.get();
    gpu->thread = std::thread([this, gpu] { Worker(gpu); });
  }
  return absl::OkStatus();
}

void CampaignEngine::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    changes_.Stop();
    for (auto& g : gpus_) {
      if (g->control != nullptr) g->control->Cancel();
      if (g->loader != nullptr) g->loader->AbandonCurrent();
      if (g->remote != nullptr) g->remote->Abandon();
    }
  }
  for (auto& g : gpus_) {
    if (g->thread.joinable()) g->thread.join();
  }
}

void CampaignEngine::Notify(const absl::StatusOr<EventSeqs>& seqs) {
  if (!seqs.ok()) {
    GT_LOG(0, "committing state: ", seqs.status().message());
    return;
  }
  if (seqs->empty()) return;
  absl::MutexLock l(&mu_);
  last_seq_ = std::max(last_seq_, seqs->back());
}

void CampaignEngine::SetProgress(const std::string& campaign, uint64_t trip,
                                 const std::string& holder, uint64_t bytes,
                                 uint64_t total) {
  absl::MutexLock l(&mu_);
  LiveProgress& p = progress_[campaign];
  p.trip = trip;
  p.holder = holder;
  p.bytes = bytes;
  p.total = total;
  p.version = ++progress_version_;
  changes_.ProgressMoved(campaign, p.version);
}

void CampaignEngine::ClearProgress(const std::string& campaign) {
  absl::MutexLock l(&mu_);
  progress_.erase(campaign);
}

void CampaignEngine::Wake() {
  absl::MutexLock l(&mu_);
  ++wake_;
}

bool CampaignEngine::stopping() {
  absl::MutexLock l(&mu_);
  return stopping_;
}

LiveProgress CampaignEngine::Progress(const std::string& campaign) {
  absl::MutexLock l(&mu_);
  auto it = progress_.find(campaign);
  return it == progress_.end() ? LiveProgress{} : it->second;
}

std::map<std::string, std::string> CampaignEngine::GpuAssignments() {
  absl::MutexLock l(&mu_);
  std::map<std::string, std::string> out;
  for (const auto& g : gpus_) out[g->config.name] = g->campaign;
  return out;
}

absl::StatusOr<std::vector<CampaignEngine::GpuView>> CampaignEngine::GpuViews() {
  auto campaigns = store_->ListCampaigns();  // oldest first: the order PickCampaign takes
  if (!campaigns.ok()) return campaigns.status();
  std::map<std::string, std::string> running = GpuAssignments();
  std::vector<GpuView> out;
  for (const auto& g : config_->gpus) {
    GpuView v;
    v.config = g;
    v.campaign = running[g.name];
    v.health = health_.Get(g.name);
    for (const auto& c : *campaigns) {
      if (c.gpu != g.name) continue;
      if (c.state == kCampaignRunning && c.name != v.campaign) v.queue.push_back(c.name);
      if (c.buffer_id == 0 || c.buffer_gpu_serial != v.health.serial) continue;
      auto spec = SpecOf(c);
      if (spec.ok()) v.held_bytes += spec->buffer_bytes;
    }
    out.push_back(std::move(v));
  }
  return out;
}

void CampaignEngine::RetryNow(const Gpu& gpu) {
  grpc::experimental::ChannelResetConnectionBackoff(mux_channel_.get());
  if (gpu.device_channel) {
    grpc::experimental::ChannelResetConnectionBackoff(gpu.device_channel.get());
  }
}

void CampaignEngine::NoteContact(const Gpu& gpu, const GpuSession& session,
                                 const absl::Status& outcome) {
  GpuHealth seen;
  seen.serial = session.serial();
  seen.session = session.established();
  seen.memory_bytes = session.device_memory_bytes();
  health_.Record(gpu.config.name, outcome, seen);
}

SpecOptions CampaignEngine::MakeSpecOptions() const {
  SpecOptions o;
  for (const auto& g : config_->gpus) o.known_gpus.push_back(g.name);
  o.reserved_domains = {config_->domain};
  return o;
}

absl::StatusOr<TrainerCampaignInfo> CampaignEngine::TrainerInfo(const std::string& campaign) {
  auto row = store_->GetCampaign(campaign);
  if (!row.ok()) return row.status();
  auto spec = SpecOf(*row);
  if (!spec.ok()) return spec.status();
  return TrainerCampaignInfo{spec->trainer.kind, spec->trainer.identity, row->state, row->error,
                             row->request_id + "@" + std::to_string(row->created_ms)};
}

absl::StatusOr<CampaignSpec> CampaignEngine::SpecOf(const CampaignRow& row) {
  return ParseCampaignSpecText(row.spec_json, "campaign '" + row.name + "' spec: ",
                               MakeSpecOptions());
}

absl::StatusOr<std::unique_ptr<v1::HolderAgent::Stub>> CampaignEngine::HolderStub(
    const HolderSpec& h) {
  // The holder must present a certificate naming exactly this holder: a
  // holder cannot answer for another (or the host for any).
  auto channel = MakeSecureChannel(h.endpoint, config_->tls, Identity{kRoleHolder, h.name});
  if (!channel.ok()) return channel.status();
  return v1::HolderAgent::NewStub(*channel);
}

absl::StatusOr<CreateResult> CampaignEngine::Create(const std::string& request_id,
                                                    const std::string& spec_json) {
  if (request_id.empty() || request_id.size() > 128) {
    return absl::InvalidArgumentError("request_id: must be 1..128 characters");
  }
  for (char c : request_id) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError("request_id: must be printable ASCII without spaces");
    }
  }
  auto spec = ParseCampaignSpecText(spec_json, "spec_json: ", MakeSpecOptions());
  if (!spec.ok()) return spec.status();
  if (spec->trainer.kind == "external" && config_->trainer_listen.empty()) {
    return absl::FailedPreconditionError(
        "trainer.kind: \"external\" needs the Trainer service, and this orchestrator's "
        "configuration has no trainer_listen");
  }
  // A retry of a request that already succeeded must not need the holders.
  auto existing = store_->GetCampaign(spec->name);
  if (existing.ok() && existing->request_id == request_id &&
      existing->spec_json == CanonicalSpecJson(*spec)) {
    CreateResult r;
    r.campaign = *existing;
    r.created = false;
    return r;
  }
  // What the orchestrator can know before the campaign runs.
  if (spec->chunk_bytes > spec->buffer_bytes) {
    return absl::InvalidArgumentError(
        "spec_json: chunk_bytes: " + std::to_string(spec->chunk_bytes) +
        " is larger than buffer_bytes (" + std::to_string(spec->buffer_bytes) +
        "): a chunk is written inside the buffer");
  }
  absl::Status fits = health_.CheckBufferFits(spec->gpu, spec->buffer_bytes);
  if (!fits.ok()) {
    return absl::InvalidArgumentError("spec_json: " + std::string(fits.message()));
  }
  std::vector<HolderRow> holders;
  std::vector<HolderTermsInput> terms_input;
  for (size_t i = 0; i < spec->holders.size(); ++i) {
    const HolderSpec& h = spec->holders[i];
    auto stub = HolderStub(h);
    if (!stub.ok()) return stub.status();
    auto info = FetchHolderInfo(
        stub->get(),
        HolderExpectation{h.name, h.endpoint, h.domain, h.dataset.name, h.dataset.format},
        std::min(spec->holder_timeout_seconds, 30.0), "holders[" + std::to_string(i) + "]");
    if (!info.ok()) return info.status();
    HolderRow row;
    row.name = h.name;
    row.position = static_cast<int32_t>(i);
    row.dataset_bytes = info->dataset_bytes();
    holders.push_back(row);
    terms_input.push_back(
        HolderTermsInput{h.name, info->dataset_bytes(), info->training_policy()});
  }
  // P1: the spec must lie inside every holder's training policy; the
  // campaign reports only as the strictest of them allows.
  auto terms = DecideCampaignTerms(*spec, terms_input);
  if (!terms.ok()) return terms.status();
  for (size_t i = 0; i < holders.size(); ++i) {
    holders[i].dataset_bytes = terms->usable_bytes[i];
    if (terms->dropped_tail_bytes[i] != 0) {
      GT_LOG(1, "campaign ", spec->name, ": holder '", holders[i].name, "': the last ",
             terms->dropped_tail_bytes[i], " bytes of its dataset are not provisioned (a window "
             "shorter than the minimum of ", terms->terms.min_window_bytes(), " bytes)");
    }
  }
  CampaignRow c;
  c.name = spec->name;
  c.request_id = request_id;
  c.spec_json = CanonicalSpecJson(*spec);
  c.gpu = spec->gpu;
  c.rounds = spec->rounds;
  c.terms = terms->terms.SerializeAsString();
  GT_LOG(1, "campaign ", spec->name, ": terms ", DescribeTerms(terms->terms));
  auto r = store_->CreateCampaign(c, holders);
  if (r.ok()) Notify(r->event_seqs);
  return r;
}

// A preflight waits for an agent at most this long per call (GetInfo, then
// OpenChannel), as CreateCampaign at most.
constexpr double kHolderCheckTimeoutSeconds = 30;

absl::StatusOr<v1::HolderCheck> CampaignEngine::CheckHolder(const v1::CheckHolderRequest& req) {
  if (!ValidName(req.name())) {
    return absl::InvalidArgumentError("name: must match [a-z0-9][a-z0-9._-]{0,62} (got '" +
                                      req.name() + "')");
  }
  const std::string endpoint_problem = EndpointProblem(req.endpoint());
  if (!endpoint_problem.empty()) {
    return absl::InvalidArgumentError("endpoint: " + endpoint_problem);
  }
  if (req.domain().empty()) return absl::InvalidArgumentError("domain: must not be empty");
  absl::Status allowed = holder_checks_.Take(req.endpoint(), req.name(), absl::Now());
  if (!allowed.ok()) return allowed;
  HolderSpec h;
  h.name = req.name();
  h.endpoint = req.endpoint();
  auto stub = HolderStub(h);
  if (!stub.ok()) return stub.status();
  return gputravel::CheckHolder(
      stub->get(), HolderExpectation{req.name(), req.endpoint(), req.domain(), req.dataset_name(), ""},
      *verifier_, *attester_, kHolderCheckTimeoutSeconds);
}

absl::Status CampaignEngine::DeleteCampaign(const std::string& name, const std::string& who) {
  auto seqs = store_->DeleteCampaign(name, who);
  Notify(seqs);
  if (!seqs.ok()) return seqs.status();
  GT_LOG(0, "campaign '", name, "' deleted by ", who);
  return absl::OkStatus();
}

absl::StatusOr<CampaignRow> CampaignEngine::StartCampaign(const std::string& name) {
  auto c = store_->GetCampaign(name);
  if (!c.ok()) return c.status();
  if (c->state == kCampaignRunning) return c;
  if (c->state != kCampaignCreated) {
    return absl::FailedPreconditionError("campaign '" + name + "' is " + c->state +
                                         "; only a created campaign can be started"
                                         " (resume a paused one)");
  }
  Notify(store_->SetCampaignState(name, kCampaignRunning, "", "started"));
  Wake();
  return store_->GetCampaign(name);
}

absl::StatusOr<CampaignRow> CampaignEngine::Pause(const std::string& name) {
  absl::StatusOr<EventSeqs> seqs;
  {
    // Under mu_, so that no worker picks the campaign up between the look
    // at the GPUs and the commit (PickCampaign reads under mu_ too).
    absl::MutexLock l(&mu_);
    auto c = store_->GetCampaign(name);
    if (!c.ok()) return c.status();
    if (c->state == kCampaignPaused || c->state == kCampaignPausing) return c;
    if (c->state != kCampaignRunning) {
      return absl::FailedPreconditionError("campaign '" + name + "' is " + c->state +
                                           "; only a running campaign can be paused");
    }
    bool on_gpu = false;
    for (const auto& g : gpus_) on_gpu = on_gpu || g->campaign == name;
    // On its GPU a trip may be in flight: PAUSED only once it is safe
    // (FinishPausing); waiting for the GPU, nothing is in flight.
    seqs = on_gpu ? store_->SetCampaignState(name, kCampaignPausing, "",
                                             "pausing by request: the trip in progress completes")
                  : store_->SetCampaignState(name, kCampaignPaused, "",
                                             "paused by request (it was waiting for its GPU)");
  }
  Notify(seqs);
  if (!seqs.ok()) return seqs.status();
  return store_->GetCampaign(name);
}

absl::StatusOr<CampaignRow> CampaignEngine::Resume(const std::string& name) {
  auto c = store_->GetCampaign(name);
  if (!c.ok()) return c.status();
  if (c->state == kCampaignRunning) return c;
  if (c->state != kCampaignPaused && c->state != kCampaignCreated &&
      c->state != kCampaignPausing) {
    return absl::FailedPreconditionError("campaign '" + name + "' is " + c->state +
                                         "; only a paused or created campaign can be resumed");
  }
  auto spec = SpecOf(*c);
  if (!spec.ok()) return spec.status();
  if (spec->on_holder_failure == HolderFailurePolicy::kPause) {
    auto holders = store_->ListHolders(name);
    if (!holders.ok()) return holders.status();
    for (const auto& h : *holders) {
      if (h.state == kHolderFailed) {
        Notify(store_->MarkHolderState(name, h.name, kHolderActive,
                                       "given another chance on resume"));
      }
    }
  }
  Notify(store_->SetCampaignState(name, kCampaignRunning, "", "resumed"));
  Wake();
  return store_->GetCampaign(name);
}

absl::StatusOr<CampaignRow> CampaignEngine::Cancel(const std::string& name) {
  auto c = store_->GetCampaign(name);
  if (!c.ok()) return c.status();
  if (c->state == kCampaignCancelling) return c;
  if (IsTerminalCampaignState(c->state)) {
    return absl::FailedPreconditionError("campaign '" + name + "' is already " + c->state);
  }
  {
    // Under mu_ so a worker cannot pick the campaign between the check and
    // the state change.
    absl::MutexLock l(&mu_);
    Gpu* running = nullptr;
    for (auto& g : gpus_) {
      if (g->campaign == name) running = g.get();
    }
    // A trip of the campaign that is not finished (an orchestrator restart
    // interrupted it, or it could not be made safe yet) may still have the
    // GPU with a holder: recovery, which retries until the trip is safe,
    // finishes the cancel (RecoverTrips).
    bool unsafe_trip = false;
    if (running == nullptr) {
      auto unfinished = store_->UnfinishedTrips();
      if (!unfinished.ok()) return unfinished.status();
      for (const TripRow& t : *unfinished) unsafe_trip |= t.campaign == name;
    }
    if (running == nullptr && !unsafe_trip) {
      auto seqs = store_->SetCampaignState(name, kCampaignCancelled, "", "cancelled");
      if (!seqs.ok()) return seqs.status();
      if (!seqs->empty()) last_seq_ = std::max(last_seq_, seqs->back());
    } else {
      auto seqs = store_->SetCampaignState(
          name, kCampaignCancelling, "",
          running != nullptr
              ? "cancelling: the trip in progress is being made safe (route home, re-key, "
                "scrub)"
              : "cancelling: an interrupted trip is being made safe (route home, re-key, "
                "scrub) by recovery");
      if (!seqs.ok()) return seqs.status();
      if (!seqs->empty()) last_seq_ = std::max(last_seq_, seqs->back());
      if (running != nullptr && running->control != nullptr) running->control->Cancel();
      if (running != nullptr && running->loader != nullptr) running->loader->AbandonCurrent();
      // An external trainer's window too: no batch after the cancel, nothing
      // of it committed, and the GPU made safe without waiting for it.
      if (running != nullptr && running->remote != nullptr) running->remote->Abandon();
    }
  }
  return store_->GetCampaign(name);
}

absl::StatusOr<CampaignRow> CampaignEngine::SkipHolder(const std::string& name,
                                                       const std::string& holder,
                                                       const std::string& reason,
                                                       const std::string& who) {
  if (reason.empty() || reason.size() > 500) {
    return absl::InvalidArgumentError("reason: say in 1-500 characters why holder '" + holder +
                                      "' is skipped (it is recorded with the holder)");
  }
  // The store checks in the same commit that the campaign is paused, the
  // holder active and no trip of the campaign unfinished; a trip is planned
  // only for an active holder of a running campaign.
  auto seqs = store_->SkipHolder(name, holder,
                                 "skipped by " + who + ": " + reason +
                                     " (its remaining windows are not trained)");
  if (!seqs.ok()) return seqs.status();
  Notify(seqs);
  GT_LOG(0, "campaign '", name, "': holder '", holder, "' skipped by ", who, ": ", reason);
  return store_->GetCampaign(name);
}

std::optional<std::string> CampaignEngine::PickCampaign(const std::string& gpu) {
  auto all = store_->ListCampaigns();
  if (!all.ok()) {
    GT_LOG(0, "listing campaigns: ", all.status().message());
    return std::nullopt;
  }
  for (const auto& c : *all) {  // ordered by creation: oldest first
    if (c.gpu == gpu && c.state == kCampaignRunning) return c.name;
  }
  return std::nullopt;
}

void CampaignEngine::Worker(Gpu* gpu) {
  SetLogPrefix("orchestrator");
  auto ca_pem = !gpu->config.device_ca_pem.empty()
                    ? absl::StatusOr<std::string>(gpu->config.device_ca_pem)
                    : ReadFile(gpu->config.device_ca);
  absl::StatusOr<std::string> ca_der =
      ca_pem.ok() ? CertificatePemToDer(*ca_pem) : absl::StatusOr<std::string>(ca_pem.status());
  if (!ca_der.ok()) {
    GT_LOG(0, "GPU ", gpu->config.name, ": device CA ", gpu->config.device_ca, ": ",
           ca_der.status().message(), "; this GPU will not be used");
    return;
  }
  gpu->device_channel = MakeChannel(gpu->config.device_endpoint);
  GpuSession session(gpu->device_channel, *ca_der, gpu->config.serial);
  TripRunner runner(config_->domain, gpu->config.name, mux_.get(), &session, attester_,
                    verifier_, absl::Seconds(gpu->config.heartbeat_period_seconds));
  uint64_t seen_wake = 0;
  bool contacted = false;  // with the device, by this process
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stopping_) return;
    }
    // Nothing can be committed: nothing happens, the GPU included, until
    // the state database can be written again.
    if (storage_.failing()) {
      AwaitStorage();
      continue;
    }
    if (!AfterStorageFailure(gpu)) continue;
    // Recovery retries every 2 s while the MUX or the GPU is down: one
    // restarted meanwhile is tried at once.
    RetryNow(*gpu);
    if (!RecoverTrips(
            gpu->config.name, store_, &runner,
            [this](const CampaignRow& row) { return SpecOf(row); },
            [this](const absl::StatusOr<EventSeqs>& seqs) { Notify(seqs); },
            gpu->recovery_cause)) {
      if (storage_.failing()) continue;
      absl::MutexLock l(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(2));
      continue;
    }
    // Any unfinished trip from here on was left by a run of this process,
    // which says why.
    gpu->recovery_cause = "its campaign's run stopping before the trip ended";
    // A pause the last process could not finish (it stopped mid-trip).
    FinishPausing(gpu->config.name);
    std::optional<std::string> name;
    {
      absl::MutexLock l(&mu_);
      name = PickCampaign(gpu->config.name);
      if (name) gpu->campaign = *name;
      seen_wake = wake_;
    }
    if (!name) {
      if (!contacted) {
        // Idle at start: the GPU home and re-keyed, as after a campaign, so
        // that its health and memory are known before one is created.
        // A token the store could not write is not the GPU's failure: a
        // later pass tries again.
        auto token = store_->NextFencingToken();
        if (token.ok()) {
          contacted = true;
          RetryNow(*gpu);
          absl::Status home = runner.MakeSafe(*token, 0, 0, "");
          if (!home.ok()) {
            GT_LOG(0, "GPU ", gpu->config.name, ": bringing it home: ", home.message());
          }
          NoteContact(*gpu, session, home);
        }
      }
      // Idle and home: the device must keep hearing from us (if it has a
      // heartbeat period), or it would need a reset before the next campaign.
      absl::Status alive = runner.KeepAlive();
      if (!alive.ok()) {
        GT_LOG(0, "GPU ", gpu->config.name, ": heartbeat: ", alive.message());
        NoteContact(*gpu, session, alive);
      }
      absl::MutexLock l(&mu_);
      auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || wake_ != seen_wake;
      };
      mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Seconds(1));
      continue;
    }
    contacted = true;
    RunCampaign(gpu, *name, &session, &runner);
    {
      absl::MutexLock l(&mu_);
      gpu->campaign.clear();
    }
    FinishPausing(gpu->config.name);
  }
}

void CampaignEngine::AwaitStorage() {
  const absl::Time due = std::min(storage_.next_probe(), absl::Now() + absl::Seconds(1));
  {
    absl::MutexLock l(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(&stopping_), due);
    if (stopping_) return;
  }
  if (!storage_.ClaimProbe()) return;
  // The probe: a daemon-wide event, which records the failure once it
  // commits.
  const absl::Status failure = storage_.error();
  EventRow e;
  e.kind = "storage";
  e.message = "the state database can be written again (it could not: " +
              std::string(failure.message()) + ")";
  auto seq = store_->AppendEvent(e);
  storage_.ProbeResult(seq.status());
  if (seq.ok()) {
    GT_LOG(0, e.message, "; the GPU workers go on");
  } else {
    GT_LOG(0, storage_.Describe());
  }
}

bool CampaignEngine::AfterStorageFailure(Gpu* gpu) {
  if (!gpu->storage_stopped.empty()) {
    EventRow e;
    e.campaign = gpu->storage_stopped;
    e.kind = "recovery";
    e.message = "the state database could not be written for " +
                absl::FormatDuration(absl::Trunc(absl::Now() - gpu->storage_stopped_at,
                                                 absl::Seconds(1))) +
                " (" + gpu->storage_error + "); no trip ran and GPU " + gpu->config.name +
                " was left alone meanwhile; the campaign goes on";
    auto seq = store_->AppendEvent(e);
    if (!seq.ok()) return !IsStorageFailure(seq.status());
    Notify(EventSeqs{*seq});
    gpu->storage_stopped.clear();
  }
  // States decided while nothing could be committed.
  for (const StorageBackoff::HeldState& h : storage_.Held()) {
    if (h.gpu != gpu->config.name) continue;
    auto seqs = store_->SetCampaignState(h.campaign, h.state, h.error, h.message);
    if (!seqs.ok() && IsStorageFailure(seqs.status())) return false;
    // Committed, or refused because the campaign moved on (a cancel).
    storage_.Release(h.campaign);
    Notify(seqs);
  }
  return true;
}

void CampaignEngine::FinishPausing(const std::string& gpu) {
  // Called by the GPU's worker when it runs no campaign: its trip in flight,
  // if any, was finished, or made safe by recovery.
  auto all = store_->ListCampaigns();
  if (!all.ok()) return;
  for (const auto& c : *all) {
    if (c.gpu != gpu || c.state != kCampaignPausing) continue;
    absl::StatusOr<EventSeqs> seqs = store_->SetCampaignState(
        c.name, kCampaignPaused, "", "paused: no trip in flight, its GPU home and re-keyed",
        kCampaignPausing);
    // A resume or cancel that landed meanwhile wins (the state moved on).
    if (seqs.ok()) Notify(seqs);
  }
}

void CampaignEngine::RunCampaign(Gpu* gpu, const std::string& name, GpuSession* session,
                                 TripRunner* runner) {
  auto fail = [&](const std::string& state, const std::string& msg) {
    GT_LOG(0, "campaign ", name, ": ", msg);
    gpu->recovery_cause = "its campaign stopping (" + msg + ")";
    auto seqs = store_->SetCampaignState(name, state, msg, msg);
    // Decided but not recorded: shown, and committed once it can be.
    if (!seqs.ok() && IsStorageFailure(seqs.status())) {
      storage_.Hold({name, state, msg, msg, gpu->config.name});
    }
    Notify(seqs);
  };
  // The state database failed under a read or write: the campaign stops
  // here and stays RUNNING (no pause is committed: it goes on by itself);
  // the worker leaves the GPU alone until the storage works, then makes an
  // unfinished trip safe (its events say why) and runs the campaign again.
  auto storage_stop = [&](const absl::Status& s) {
    if (!IsStorageFailure(s)) return false;
    storage_.Failed(s);
    gpu->recovery_cause = CauseStorage(std::string(s.message()));
    gpu->storage_stopped = name;
    gpu->storage_error = std::string(s.message());
    gpu->storage_stopped_at = absl::Now();
    GT_LOG(0, "campaign ", name, ": stopped until the state database can be written: ",
           s.message());
    return true;
  };
  auto row = store_->GetCampaign(name);
  if (!row.ok()) {
    storage_stop(row.status());
    return;
  }
  auto spec = SpecOf(*row);
  if (!spec.ok()) return fail(kCampaignFailed, std::string(spec.status().message()));
  // The terms fixed at create; a campaign from before terms existed takes
  // the default policy's (each holder still checks them at its hand-off).
  v1::TrainingTerms terms = Strictest(TrainerTerms(spec->trainer), {});
  if (!row->terms.empty() && !terms.ParseFromString(row->terms)) {
    return fail(kCampaignFailed, "the campaign's training terms in the state database cannot "
                                 "be parsed");
  }

  std::map<std::string, std::unique_ptr<v1::HolderAgent::Stub>> stubs;
  std::map<std::string, const HolderSpec*> holder_specs;
  for (const auto& h : spec->holders) {
    auto stub = HolderStub(h);
    if (!stub.ok()) return fail(kCampaignFailed, std::string(stub.status().message()));
    stubs[h.name] = std::move(*stub);
    holder_specs[h.name] = &h;
  }

  // The GPU home, a fresh session, the campaign's old buffer (if any)
  // scrubbed and released, a new one allocated.
  auto token = store_->NextFencingToken();
  if (!token.ok()) {
    if (storage_stop(token.status())) return;
    return fail(kCampaignPaused, std::string(token.status().message()));
  }
  RetryNow(*gpu);
  absl::Status s = runner->MakeSafe(*token, row->buffer_id, spec->buffer_bytes,
                                    row->buffer_id != 0 ? row->buffer_gpu_serial : "");
  NoteContact(*gpu, *session, s);
  if (!s.ok()) {
    return fail(kCampaignPaused, "the GPU could not be brought home and re-keyed: " +
                                     std::string(s.message()));
  }
  if (row->buffer_id != 0) (void)session->FreeBuffer(row->buffer_id);
  s = runner->CheckHeartbeatPeriod();
  if (!s.ok()) return fail(kCampaignPaused, std::string(s.message()));
  GT_LOG(1, "campaign ", name, ": CC session ", session->session_id(), " with GPU ",
         session->serial());
  // Recovery scrubs the buffer the campaign row names: a trip must never
  // run in a buffer that is not recorded there.
  auto new_buffer = [&]() -> absl::StatusOr<uint64_t> {
    auto buffer = session->AllocBuffer(spec->buffer_bytes);
    if (!buffer.ok()) {
      return absl::Status(buffer.status().code(), "allocating the dataset buffer: " +
                                                      std::string(buffer.status().message()));
    }
    absl::Status injected = InjectedError("record_buffer");
    auto recorded = injected.ok() ? store_->SetCampaignBuffer(name, *buffer, session->serial())
                                  : absl::StatusOr<EventSeqs>(injected);
    if (!recorded.ok()) {
      (void)session->FreeBuffer(*buffer);  // nothing was written to it yet
      // It names the database and what failed, and stays a storage failure.
      if (IsStorageFailure(recorded.status())) return recorded.status();
      return absl::Status(recorded.status().code(),
                          "recording the dataset buffer: " +
                              std::string(recorded.status().message()));
    }
    Notify(recorded);
    return *buffer;
  };
  auto first_buffer = new_buffer();
  if (!first_buffer.ok()) {
    if (storage_stop(first_buffer.status())) return;
    return fail(kCampaignPaused, std::string(first_buffer.status().message()));
  }
  uint64_t buffer_id = *first_buffer;

  // The trainer, continuing from the last checkpoint.
  // The loader outlives the trainer (declared first, destroyed last).
  // Built from the terms the holders check at every hand-off, so what trains
  // is exactly what they allowed.
  DataLoader loader(terms.batch_tokens());
  std::unique_ptr<BuiltinTrainer> trainer;
  if (terms.trainer_kind() == "next-token") {
    NextTokenModelConfig mc;
    mc.vocab = terms.vocab();
    mc.dim = terms.dim();
    mc.learning_rate = static_cast<float>(terms.learning_rate());
    mc.seed = terms.seed();
    auto created = BuiltinTrainer::Create(mc);
    if (!created.ok()) {
      return fail(kCampaignFailed, "trainer: " + std::string(created.status().message()));
    }
    trainer = std::move(*created);
    // A checkpoint that does not authenticate (swapped, altered, or another
    // key file) pauses the campaign: restoring the right key file and
    // resuming continues it.
    auto checkpoint = store_->GetCheckpoint(name);
    if (!checkpoint.ok()) {
      if (storage_stop(checkpoint.status())) return;
      return fail(kCampaignPaused,
                  "trainer checkpoint: " + std::string(checkpoint.status().message()));
    }
    if (!checkpoint->empty()) {
      absl::Status rs = trainer->Restore(*checkpoint);
      if (!rs.ok()) {
        return fail(kCampaignFailed, "trainer checkpoint: " + std::string(rs.message()));
      }
    }
    absl::Status ts = trainer->Start(&loader);
    if (!ts.ok()) return fail(kCampaignFailed, "trainer: " + std::string(ts.message()));
  }
  // An external trainer: the campaign's resume point is its checkpoint
  // (sealed, bound to the trip that committed it).
  std::shared_ptr<RemoteTrainer> remote;
  if (terms.trainer_kind() == "external") {
    auto made = MakeRemoteTrainer(store_, *spec, terms);
    if (!made.ok()) {
      if (storage_stop(made.status())) return;
      return fail(kCampaignPaused, "trainer resume point: " +
                                       std::string(made.status().message()));
    }
    remote = *std::move(made);
    trainers_.Register(name, remote);
  }
  {
    absl::MutexLock l(&mu_);
    gpu->loader = &loader;
    gpu->remote = remote.get();
  }

  // The attested channel for the next trip, opened on the GPU's channel
  // opener once this trip's GPU is re-keyed, while it is scrubbed. The opener's
  // tasks use `stubs` and `runner`: the one in flight is waited for before
  // they go (the opener runs its tasks in order, so earlier ones are done).
  std::future<absl::StatusOr<PreparedChannel>> next_channel;
  struct WaitForOpener {
    std::future<absl::StatusOr<PreparedChannel>>* f;
    ~WaitForOpener() {
      if (f->valid()) f->wait();
    }
  } wait_for_opener{&next_channel};
  while (true) {
    {
      absl::MutexLock l(&mu_);
      if (stopping_) break;
    }
    // A storage failure another thread met (a commit of the API's) stops
    // this campaign too.
    if (storage_.failing()) {
      storage_stop(storage_.error());
      break;
    }
    auto c = store_->GetCampaign(name);
    if (!c.ok()) storage_stop(c.status());
    if (!c.ok() || c->state != kCampaignRunning) break;
    auto holders = store_->ListHolders(name);
    if (!holders.ok()) {
      if (!storage_stop(holders.status())) {
        fail(kCampaignPaused, std::string(holders.status().message()));
      }
      break;
    }
    std::vector<HolderProgress> progress;
    std::optional<size_t> last;
    for (size_t i = 0; i < holders->size(); ++i) {
      const HolderRow& h = (*holders)[i];
      progress.push_back(HolderProgress{h.dataset_bytes, h.cursor_offset, h.round,
                                        h.state == kHolderActive || h.state == kHolderDone});
      if (h.name == c->last_holder) last = i;
    }
    auto next = PickNextHolder(spec->schedule, progress, spec->rounds, last);
    if (!next) {
      (void)session->FreeBuffer(buffer_id);
      Notify(store_->SetCampaignBuffer(name, 0));
      const Completion done = CompletionFor(*holders);
      if (done.state == kCampaignFailed) {
        fail(done.state, done.message);
      } else {
        Notify(store_->SetCampaignState(name, done.state, done.error, done.message));
      }
      break;
    }
    const HolderRow& h = (*holders)[*next];
    const HolderSpec& hs = *holder_specs[h.name];
    Window w = NextWindow(progress[*next], spec->buffer_bytes);
    auto trip_id = store_->NextTripId();
    if (!trip_id.ok()) {
      if (!storage_stop(trip_id.status())) {
        fail(kCampaignPaused, std::string(trip_id.status().message()));
      }
      break;
    }
    TripRow t;
    t.id = *trip_id;
    t.campaign = name;
    t.holder = h.name;
    t.window_offset = w.offset;
    t.window_length = w.length;
    t.round = h.round;
    const auto trip_t0 = std::chrono::steady_clock::now();
    auto begun = store_->BeginTrip(t);
    Notify(begun);
    if (!begun.ok()) {
      if (storage_stop(begun.status())) break;
      // A pause or cancel that landed since the state was read is not an
      // error; anything else needs an operator.
      auto now = store_->GetCampaignState(name);
      if (now.ok() && *now != kCampaignRunning) break;
      fail(kCampaignPaused, std::string(begun.status().message()));
      break;
    }
    CrashPoint(std::string("after_commit:") + ToString(TripStep::kPlanned));
    TripPlan plan;
    plan.campaign = name;
    plan.trip = t.id;
    plan.holder = h.name;
    plan.holder_domain = hs.domain;
    plan.window_offset = w.offset;
    plan.window_length = w.length;
    plan.buffer_id = buffer_id;
    plan.buffer_bytes = spec->buffer_bytes;
    plan.chunk_bytes = spec->chunk_bytes;
    plan.copy_engines = CopyEnginesFor(*spec);
    plan.holder_timeout_seconds = spec->holder_timeout_seconds;
    plan.terms = terms;
    TripControl control;
    {
      absl::MutexLock l(&mu_);
      gpu->control = &control;
      if (stopping_) control.Cancel();
    }
    // A cancel that raced with BeginTrip.
    auto again = store_->GetCampaignState(name);
    if (again.ok() && *again == kCampaignCancelling) control.Cancel();
    StoreTripHooks hooks(
        store_, [this](const absl::StatusOr<EventSeqs>& seqs) { Notify(seqs); },
        [this, &plan](uint64_t bytes, uint64_t total) {
          SetProgress(plan.campaign, plan.trip, plan.holder, bytes, total);
        },
        &plan, &loader, trainer.get(), &eval_tokens_,
        std::max(600.0, spec->holder_timeout_seconds), remote.get());
    std::optional<PreparedChannel> prepared;
    if (next_channel.valid()) {
      auto r = next_channel.get();
      if (r.ok()) {
        prepared = std::move(*r);
      } else {
        GT_LOG(1, "trip ", t.id, ": no channel prepared ahead (", r.status().message(),
               "); opening one now");
      }
    }
    // A connection of its own for every trip (the opener's task that used the
    // old one is done): its TLS handshake checks the holder's certificate
    // against the CRL as it is now, so a holder revoked during a campaign
    // gets no further trip (its Provision is refused before the hand-off
    // goes out) and the holder-failure policy applies.
    {
      auto fresh = HolderStub(hs);
      if (!fresh.ok()) {
        fail(kCampaignPaused, "holder " + h.name + ": " + std::string(fresh.status().message()));
        break;
      }
      stubs[h.name] = std::move(*fresh);
    }
    // The holder the schedule picks after this one if this trip succeeds:
    // its channel is opened once this trip's GPU is home and re-keyed (a
    // wrong guess costs one unused channel at that holder).
    std::vector<HolderProgress> after = progress;
    after[*next] = AdvanceProgress(progress[*next], w.length);
    if (auto guess = PickNextHolder(spec->schedule, after, spec->rounds, *next)) {
      const std::string guess_name = (*holders)[*guess].name;
      v1::HolderAgent::Stub* guess_stub = stubs[guess_name].get();
      const double timeout = std::min(5.0, spec->holder_timeout_seconds);
      TaskThread* opener = &gpu->channel_opener;
      hooks.set_on_rekeyed([&next_channel, opener, runner, guess_name, guess_stub, timeout] {
        next_channel = opener->Run([=] {
          return runner->PrepareChannel(guess_name, guess_stub, timeout, nullptr);
        });
      });
    }
    const uint64_t storage_failures = storage_.failures();
    auto outcome = runner->Run(plan, stubs[h.name].get(), &hooks, &control,
                               std::move(prepared));
    {
      absl::MutexLock l(&mu_);
      gpu->control = nullptr;
    }
    ClearProgress(name);
    if (!outcome.ok()) {
      // The GPU is in an unknown state: the trip stays unfinished, and the
      // worker's recovery makes it safe before anything else runs.
      const std::string reason(outcome.status().message());
      fail(kCampaignPaused, UnsafeTripError(t.id, reason));
      gpu->recovery_cause = CauseUnsafe(reason);
      break;
    }
    // A trip that failed while the storage did (a step's commit) is not
    // the holder's or the host's doing: it stays unfinished, and recovery
    // aborts it (the window is planned again) once the storage works.
    if (!outcome->ok && storage_.failures() != storage_failures) {
      const absl::Status failure = storage_.error();
      if (!storage_stop(failure)) {
        // The storage works again already: recovery runs at once.
        gpu->recovery_cause = CauseStorage("a commit of the trip failed: " + outcome->error);
      }
      break;
    }
    const TripFinish f =
        FinishFor(*outcome, std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - trip_t0)
                                .count());
    auto finished = store_->FinishTrip(t.id, f);
    Notify(finished);
    if (!finished.ok() && storage_stop(finished.status())) break;
    GT_LOG(1, "trip ", t.id, " ", h.name, ": ", f.outcome, ", scrub ",
           f.scrub_verified ? "verified" : "NOT verified", ", re-keyed ",
           f.rekeyed ? "yes" : "no", f.error.empty() ? "" : ", error: " + f.error);
    if (outcome->buffer_gone) {
      // The device's memory was wiped under the trip (the device said so,
      // sealed): the next trip writes into a new buffer, recorded first.
      auto replaced = new_buffer();
      if (!replaced.ok()) {
        fail(kCampaignPaused, "the GPU's memory was wiped during trip " +
                                  std::to_string(t.id) + "; " +
                                  std::string(replaced.status().message()));
        break;
      }
      buffer_id = *replaced;
    }
    if (hooks.trainer_failed() && !outcome->ok && !outcome->cancelled) {
      // Not the holder's doing (it is not charged): the campaign's trainer
      // policy applies, and the event names the trainer.
      const bool fail_campaign = spec->trainer.on_failure == "fail";
      fail(fail_campaign ? kCampaignFailed : kCampaignPaused,
           "trip " + std::to_string(t.id) + " was not trained (holder " + h.name +
               " is not charged; trainer.on_failure: " + spec->trainer.on_failure +
               "): " + f.error);
      break;
    }
    const AfterTrip after_trip =
        DecideAfterTrip(*outcome, f, t.id, h.name, spec->on_holder_failure);
    if (after_trip.action == AfterTrip::Action::kPause) {
      fail(kCampaignPaused, after_trip.message);
      break;
    }
    if (after_trip.action == AfterTrip::Action::kSkipHolder) {
      EventRow e;
      e.campaign = name;
      e.trip = t.id;
      e.kind = "error";
      e.message = after_trip.message;
      auto seq = store_->AppendEvent(e);
      if (seq.ok()) Notify(EventSeqs{*seq});
    }
  }
  {
    absl::MutexLock l(&mu_);
    gpu->loader = nullptr;
    gpu->remote = nullptr;
  }
  loader.Close();
  if (trainer) trainer->Stop();
  auto c = store_->GetCampaign(name);
  if (remote) {
    // The attached trainer's stream ends: OK when the campaign is done,
    // else with why it stopped (it attaches again for the next run).
    trainers_.Unregister(name, remote.get());
    remote->Close(TrainerStreamEnd(name, stopping(), c));
  }
  // CANCELLED only once no trip of the campaign is left unsafe; otherwise
  // recovery, which makes that trip safe first, finishes the cancel.
  if (c.ok() && c->state == kCampaignCancelling) {
    auto unfinished = store_->UnfinishedTrips();
    bool unsafe = !unfinished.ok();
    if (unfinished.ok()) {
      for (const auto& t : *unfinished) unsafe = unsafe || t.campaign == name;
    }
    if (!unsafe) {
      Notify(store_->SetCampaignState(name, kCampaignCancelled, "", "cancelled; GPU safe"));
    }
  }
}

}  // namespace gputravel
