#ifndef GPUTRAVEL_ORCHESTRATOR_ORCHESTRATOR_METRICS_H_
#define GPUTRAVEL_ORCHESTRATOR_ORCHESTRATOR_METRICS_H_

// The orchestrator's metrics (docs/operations.md, Metrics), counted from one
// source: the events its store commits, which are what the API's
// WatchCampaign shows, and the campaigns' states, read from
// the store at each scrape as GetCampaign shows them. So a scrape shows
// nothing the API does not: counts, durations and states, with labels from
// fixed sets (outcome, step, state), never a campaign, holder or trip.
// Attestation failures are counted around the verifier
// (metrics/counted_verifier.h).

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "metrics/metrics_registry.h"
#include "orchestrator/state_store.h"

namespace gputravel {

class OrchestratorMetrics {
 public:
  // Registers the families in `registry` and observes `store` until
  // destroyed. Both must outlive this, and `registry` must not be scraped
  // once this is gone (its campaigns gauge reads through this).
  OrchestratorMetrics(MetricsRegistry* registry, StateStore* store);
  ~OrchestratorMetrics();
  OrchestratorMetrics(const OrchestratorMetrics&) = delete;
  OrchestratorMetrics& operator=(const OrchestratorMetrics&) = delete;

  // Trips followed at once at most (a trip leaves when it finishes; one
  // runs per campaign at a time): past it the oldest is forgotten.
  static constexpr size_t kMaxOpenTrips = 1024;

 private:
  // A committed event (StateStore::EventObserver): quick, calls no store.
  void OnEvent(const EventRow& e);

  // A trip seen from its start or a step on: the step it is at, since when.
  struct OpenTrip {
    std::string step;
    std::chrono::steady_clock::time_point step_since;
    bool started_here = false;  // its trip_started was seen
    std::chrono::steady_clock::time_point started;
  };

  StateStore* const store_;
  const MetricCounter trips_;
  const MetricHistogram step_seconds_;
  const MetricHistogram trip_seconds_;
  const MetricCounter provisioned_bytes_;
  const MetricCounter rekeys_;
  const MetricCounter scrubs_;
  const MetricCounter recoveries_;
  absl::Mutex mu_;
  std::map<uint64_t, OpenTrip> open_ ABSL_GUARDED_BY(mu_);
  int observer_ = 0;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_ORCHESTRATOR_METRICS_H_
