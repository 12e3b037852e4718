#ifndef GPUTRAVEL_VFIO_MUX_MUX_METRICS_H_
#define GPUTRAVEL_VFIO_MUX_MUX_METRICS_H_

// The MUX's metrics (docs/operations-host.md, Metrics): routes and resets
// by outcome, fencing refusals, route durations; never a GPU, a domain or a
// token, which the audit log keeps.

#include "absl/status/status.h"
#include "metrics/metrics_registry.h"

namespace gputravel {

class MuxMetrics {
 public:
  // Registers the families in `registry` (which must outlive this).
  explicit MuxMetrics(MetricsRegistry* registry);

  // A route answered with `status` after `seconds`, a reset with `status`.
  // Outcomes: ok; refused, the request's own fault as the table judged it
  // (a name, an unknown GPU, a domain not configured, a fencing token, a GPU
  // busy with another decision); failed, the host's side (the backend's
  // move or reset, the journal).
  void Routed(const absl::Status& status, double seconds) const;
  void Reset(const absl::Status& status) const;

 private:
  const MetricCounter routes_;
  const MetricCounter resets_;
  const MetricCounter fencing_refusals_;
  const MetricHistogram route_seconds_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_MUX_METRICS_H_
