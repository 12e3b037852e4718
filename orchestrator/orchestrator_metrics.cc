#include "orchestrator/orchestrator_metrics.h"

#include <vector>

#include "orchestrator/trip_steps.h"

namespace gputravel {
namespace {

// The steps a trip spends time at (the final ones end it).
std::vector<std::string> TimedSteps() {
  std::vector<std::string> out;
  for (TripStep s : AllTripSteps()) {
    if (!IsFinal(s)) out.push_back(ToString(s));
  }
  return out;
}

std::vector<std::string> CampaignStateNames() {
  std::vector<std::string> out;
  for (CampaignState s : AllCampaignStates()) out.push_back(ToString(s));
  return out;
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

OrchestratorMetrics::OrchestratorMetrics(MetricsRegistry* registry, StateStore* store)
    : store_(store),
      trips_(registry->AddCounter(
          "gputravel_orchestrator_trips_total",
          "Trips finished, by outcome (ok, failed, aborted), as the trips' outcome shows.",
          "outcome", {kOutcomeOk, kOutcomeFailed, kOutcomeAborted})),
      step_seconds_(registry->AddHistogram(
          "gputravel_orchestrator_trip_step_seconds",
          "Time a trip spent at each step: from the step's commit to the next step's or "
          "the trip's end.",
          DurationBuckets(), "step", TimedSteps())),
      trip_seconds_(registry->AddHistogram(
          "gputravel_orchestrator_trip_seconds",
          "Whole trips, planned to finished (trips this process saw start).",
          DurationBuckets())),
      provisioned_bytes_(registry->AddCounter(
          "gputravel_orchestrator_provisioned_bytes_total",
          "Bytes provisioned by trips that finished ok (what campaigns count in "
          "bytes_provisioned).")),
      rekeys_(registry->AddCounter(
          "gputravel_orchestrator_rekeys_total",
          "Fresh key agreements with the GPU after a trip: trips that moved on from step "
          "rekey.")),
      scrubs_(registry->AddCounter(
          "gputravel_orchestrator_scrubs_total",
          "Trip buffers zeroed and verified (SCRUBBED events).")),
      recoveries_(registry->AddCounter(
          "gputravel_orchestrator_recoveries_total",
          "Interrupted trips crash recovery made safe (routed home, re-keyed, scrubbed), by "
          "the step they were found at.",
          "step", TimedSteps())) {
  registry->AddGaugeFunction(
      "gputravel_orchestrator_campaigns", "Campaigns in each state.", "state",
      CampaignStateNames(), [this]() -> absl::StatusOr<std::map<std::string, double>> {
        absl::StatusOr<std::vector<CampaignRow>> all = store_->ListCampaigns();
        if (!all.ok()) return all.status();
        std::map<std::string, double> out;
        for (const CampaignRow& c : *all) out[c.state] += 1;
        return out;
      });
  observer_ = store_->AddEventObserver([this](const EventRow& e) { OnEvent(e); });
}

OrchestratorMetrics::~OrchestratorMetrics() { store_->RemoveEventObserver(observer_); }

void OrchestratorMetrics::OnEvent(const EventRow& e) {
  const auto now = std::chrono::steady_clock::now();
  if (e.kind == "scrubbed") {
    scrubs_.Add();
    return;
  }
  if (e.kind == "recovery") {
    recoveries_.Add(e.step);
    return;
  }
  const bool started = e.kind == "trip_started";
  const bool step = e.kind == "step";
  const bool finished = e.kind == "trip_finished";
  if (e.trip == 0 || !(started || step || finished)) return;
  absl::MutexLock l(&mu_);
  auto it = open_.find(e.trip);
  if (it != open_.end() && !started) {
    step_seconds_.Observe(it->second.step, Seconds(now - it->second.step_since));
    // A trip moves on from rekey only once the device took the new key.
    if (step && it->second.step == kStepRekey) rekeys_.Add();
  }
  if (finished) {
    const std::string outcome = TripOutcomeOf(e);
    trips_.Add(outcome);
    if (outcome == kOutcomeOk) provisioned_bytes_.Add(static_cast<double>(e.bytes));
    if (it != open_.end()) {
      if (it->second.started_here) trip_seconds_.Observe(Seconds(now - it->second.started));
      open_.erase(it);
    }
    return;
  }
  if (it == open_.end()) {
    if (open_.size() >= kMaxOpenTrips) open_.erase(open_.begin());
    it = open_.emplace(e.trip, OpenTrip{}).first;
  }
  it->second.step = e.step;
  it->second.step_since = now;
  if (started) {
    it->second.started_here = true;
    it->second.started = now;
  }
}

}  // namespace gputravel
