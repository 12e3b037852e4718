#include "orchestrator/trip_recovery.h"

#include "orchestrator/trip_steps.h"
#include "util/failpoint.h"
#include "util/log.h"

namespace gputravel {

namespace {

// UnsafeTripError's words around the trip id.
constexpr char kUnsafeMiddle[] = " could not be made safe (recovery does it before anything "
                                 "else runs): ";

}  // namespace

std::string CauseUnsafe(const std::string& reason) {
  return "a failure to bring the GPU back to a safe state (" + reason + ")";
}

std::string CauseStorage(const std::string& error) {
  return "a failure to write the state database (" + error + ")";
}

std::string UnsafeTripError(uint64_t trip, const std::string& reason) {
  return "trip " + std::to_string(trip) + kUnsafeMiddle + reason;
}

std::optional<std::string> MadeSafeError(uint64_t trip, const std::string& error) {
  const std::string prefix = "trip " + std::to_string(trip) + kUnsafeMiddle;
  if (error.rfind(prefix, 0) != 0) return std::nullopt;
  return "trip " + std::to_string(trip) + " failed (" + error.substr(prefix.size()) +
         "); recovery has since made it safe (routed home, re-keyed, scrubbed) and aborted it; "
         "resume the campaign to go on";
}

TripFinish RecoveredTripFinish(const TripRow& t, const std::string& cause,
                               std::string* event_message) {
  TripFinish f;
  f.scrub_verified = true;
  f.rekeyed = true;
  if (RecoveryFor(t.step) == TripRecovery::kCountIfTrained && t.trained) {
    // Training was committed with its checkpoint: the window counts.
    f.outcome = kOutcomeOk;
    f.advance_cursor = true;
    *event_message = "interrupted after training; GPU routed home, re-keyed, buffer scrubbed"
                     " and verified; the trip counts as done";
  } else {
    f.outcome = kOutcomeAborted;
    f.error = "interrupted at step " + t.step + " by " + cause +
              "; made safe (routed home, re-keyed, scrubbed)";
    *event_message = f.error + "; the window will be planned again";
  }
  return f;
}

bool RecoverTrips(const std::string& gpu, StateStore* store, TripRunner* runner,
                  const SpecOfFn& spec_of, const CommitNotifier& notify,
                  const std::string& cause) {
  auto trips = store->UnfinishedTrips();
  if (!trips.ok()) {
    GT_LOG(0, "recovery: ", trips.status().message());
    return false;
  }
  for (const TripRow& t : *trips) {
    absl::Status injected = InjectedError("recovery_get_campaign");
    auto c = injected.ok() ? store->GetCampaign(t.campaign)
                           : absl::StatusOr<CampaignRow>(injected);
    if (!c.ok()) {
      // Not knowing whose GPU the trip was on, skipping it could let another
      // campaign start on a GPU a holder still has: retry instead.
      GT_LOG(0, "recovery: trip ", t.id, " of campaign '", t.campaign, "': ",
             c.status().message());
      return false;
    }
    if (c->gpu != gpu) continue;
    auto spec = spec_of(*c);
    if (!spec.ok()) {
      GT_LOG(0, "recovery: ", spec.status().message());
      return false;
    }
    GT_LOG(0, "recovery: trip ", t.id, " of campaign '", t.campaign, "' (", t.holder,
           ") was interrupted at step ", t.step, "; making it safe");
    auto token = store->NextFencingToken();
    if (!token.ok()) return false;
    // The device the holder's key and the buffer are on, as recorded when
    // the GPU left (or with the buffer): no other device's word counts.
    const std::string serial = !t.gpu_serial.empty() ? t.gpu_serial : c->buffer_gpu_serial;
    absl::Status s = runner->MakeSafe(*token, c->buffer_id, spec->buffer_bytes, serial);
    if (!s.ok()) {
      EventRow e;
      e.campaign = t.campaign;
      e.trip = t.id;
      e.kind = "error";
      e.step = t.step;
      e.message = "recovery could not make the GPU safe yet (will retry): " +
                  std::string(s.message());
      auto seq = store->AppendEvent(e);
      if (seq.ok()) notify(EventSeqs{*seq});
      GT_LOG(0, "recovery: ", s.message());
      return false;
    }
    EventRow e;
    e.campaign = t.campaign;
    e.trip = t.id;
    e.kind = "recovery";
    e.step = t.step;
    const TripFinish f = RecoveredTripFinish(t, cause, &e.message);
    auto seq = store->AppendEvent(e);
    if (seq.ok()) notify(EventSeqs{*seq});
    auto finished = store->FinishTrip(t.id, f);
    notify(finished);
    // Still unfinished: nothing else may run on this GPU before it is
    // finished (the next pass makes it safe again and finishes it).
    if (!finished.ok()) return false;
    // The campaign's error no longer says the trip is unsafe.
    if (c->state == kCampaignPaused) {
      if (std::optional<std::string> safe = MadeSafeError(t.id, c->error)) {
        notify(store->SetCampaignState(t.campaign, kCampaignPaused, *safe, *safe,
                                       kCampaignPaused));
      }
    }
  }
  // Campaigns whose cancel was interrupted are now safe.
  auto all = store->ListCampaigns();
  if (all.ok()) {
    for (const auto& c : *all) {
      if (c.gpu == gpu && c.state == kCampaignCancelling) {
        notify(store->SetCampaignState(c.name, kCampaignCancelled, "", "cancelled"));
      }
    }
  }
  return true;
}

}  // namespace gputravel
