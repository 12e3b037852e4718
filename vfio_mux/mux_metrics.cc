#include "vfio_mux/mux_metrics.h"

#include "vfio_mux/mux_policy.h"
#include "vfio_mux/route_table.h"

namespace gputravel {
namespace {

const char* OutcomeOf(const absl::Status& status) {
  if (status.ok()) return "ok";
  return IsForCaller(status) ? "refused" : "failed";
}

}  // namespace

MuxMetrics::MuxMetrics(MetricsRegistry* registry)
    : routes_(registry->AddCounter(
          "gputravel_mux_routes_total",
          "Route calls answered, by outcome: ok, refused (the request's name, GPU, domain, "
          "fencing token, or a GPU busy), failed (the backend's move or the journal).",
          "outcome", {"ok", "refused", "failed"})),
      resets_(registry->AddCounter("gputravel_mux_resets_total",
                                   "Reset calls answered, by outcome (as routes).", "outcome",
                                   {"ok", "refused", "failed"})),
      fencing_refusals_(registry->AddCounter(
          "gputravel_mux_fencing_refusals_total",
          "Routes and resets refused for their fencing token (stale, or too far ahead).",
          "action", {"route", "reset"})),
      route_seconds_(registry->AddHistogram(
          "gputravel_mux_route_seconds",
          "Route calls, from the authorized request to the answer, by outcome.",
          DurationBuckets(), "outcome", {"ok", "refused", "failed"})) {}

void MuxMetrics::Routed(const absl::Status& status, double seconds) const {
  routes_.Add(OutcomeOf(status));
  route_seconds_.Observe(OutcomeOf(status), seconds);
  if (IsFencingRefusal(status)) fencing_refusals_.Add("route");
}

void MuxMetrics::Reset(const absl::Status& status) const {
  resets_.Add(OutcomeOf(status));
  if (IsFencingRefusal(status)) fencing_refusals_.Add("reset");
}

}  // namespace gputravel
