#ifndef GPUTRAVEL_METRICS_METRICS_REGISTRY_H_
#define GPUTRAVEL_METRICS_METRICS_REGISTRY_H_

// A daemon's metrics, in one registry (prometheus-cpp's): counters,
// histograms and gauges read at each scrape. Every family has no label or
// one label whose values are fixed when it is registered, so nothing a
// caller sends (a trip, a name, an error text) can add a series: a value
// that was not registered is counted under kOtherLabelValue. MetricsExposer
// serves the registry; Text() is the same exposition, for tests.
//
// Families are registered at start-up, with constant names; the counters
// and histograms are then safe to update from any thread.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace prometheus {
class Collectable;
class Counter;
class Histogram;
class Registry;
}  // namespace prometheus

namespace gputravel {

// The series a label value that was not registered is counted under.
inline constexpr char kOtherLabelValue[] = "other";

// Histogram buckets (upper bounds, seconds) for steps that take from a
// millisecond to minutes: a trip's steps, a route, a provisioning.
std::vector<double> DurationBuckets();

// One counter family. A default-constructed one counts nothing.
class MetricCounter {
 public:
  MetricCounter() = default;
  // Adds `amount` (>= 0) to the series of `label_value`; an unlabeled
  // family's one series is "" (Add(amount)).
  void Add(absl::string_view label_value, double amount = 1) const;
  void Add(double amount = 1) const { Add("", amount); }
  // The series' value (0 for a default-constructed family).
  double Value(absl::string_view label_value = "") const;

 private:
  friend class MetricsRegistry;
  prometheus::Counter* Series(absl::string_view label_value) const;
  std::map<std::string, prometheus::Counter*, std::less<>> series_;
};

// One histogram family. A default-constructed one observes nothing.
class MetricHistogram {
 public:
  MetricHistogram() = default;
  void Observe(absl::string_view label_value, double value) const;
  void Observe(double value) const { Observe("", value); }

 private:
  friend class MetricsRegistry;
  std::map<std::string, prometheus::Histogram*, std::less<>> series_;
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // A counter family `name` (ending "_total"), unlabeled when `label` is
  // empty, else one series per value in `values` plus kOtherLabelValue,
  // all present (at 0) from the start.
  MetricCounter AddCounter(const std::string& name, const std::string& help,
                           const std::string& label = "",
                           const std::vector<std::string>& values = {});
  // A histogram family with the upper bounds `buckets`, labeled like
  // AddCounter.
  MetricHistogram AddHistogram(const std::string& name, const std::string& help,
                               const std::vector<double>& buckets,
                               const std::string& label = "",
                               const std::vector<std::string>& values = {});

  // A gauge family whose values `read` returns at each scrape, per value
  // of `label` (each of `values` is shown; one `read` does not return is 0,
  // one it returns that is not among `values` is added to
  // kOtherLabelValue). `read` runs on the scraping thread; when it fails,
  // the family has no series in that scrape and the error is logged.
  using GaugeReader = std::function<absl::StatusOr<std::map<std::string, double>>()>;
  void AddGaugeFunction(const std::string& name, const std::string& help,
                        const std::string& label, const std::vector<std::string>& values,
                        GaugeReader read);

  // The exposition a scrape returns (Prometheus text format 0.0.4).
  std::string Text() const;
  // What an exposer serves: every family above.
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables() const;

 private:
  class GaugeFunctions;
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::shared_ptr<GaugeFunctions> gauges_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_METRICS_METRICS_REGISTRY_H_
