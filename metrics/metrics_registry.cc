#include "metrics/metrics_registry.h"

#include <utility>

#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "util/log.h"

namespace gputravel {
namespace {

// The values a family's series are made for: "" alone when unlabeled.
std::vector<std::string> SeriesValues(const std::string& label,
                                      const std::vector<std::string>& values) {
  if (label.empty()) return {""};
  std::vector<std::string> out = values;
  out.push_back(kOtherLabelValue);
  return out;
}

prometheus::Labels LabelsOf(const std::string& label, const std::string& value) {
  if (label.empty()) return {};
  return {{label, value}};
}

// The series of `value` in `series`, or the kOtherLabelValue one.
template <typename T>
T* Find(const std::map<std::string, T*, std::less<>>& series, absl::string_view value) {
  auto it = series.find(value);
  if (it == series.end()) it = series.find(absl::string_view(kOtherLabelValue));
  return it == series.end() ? nullptr : it->second;
}

}  // namespace

std::vector<double> DurationBuckets() {
  return {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

prometheus::Counter* MetricCounter::Series(absl::string_view label_value) const {
  return Find(series_, label_value);
}

void MetricCounter::Add(absl::string_view label_value, double amount) const {
  if (amount <= 0) return;  // a counter only grows
  if (prometheus::Counter* c = Series(label_value)) c->Increment(amount);
}

double MetricCounter::Value(absl::string_view label_value) const {
  prometheus::Counter* c = Series(label_value);
  return c == nullptr ? 0 : c->Value();
}

void MetricHistogram::Observe(absl::string_view label_value, double value) const {
  if (prometheus::Histogram* h = Find(series_, label_value)) h->Observe(value);
}

// The gauges read at each scrape.
class MetricsRegistry::GaugeFunctions final : public prometheus::Collectable {
 public:
  struct Family {
    std::string name, help, label;
    std::vector<std::string> values;
    GaugeReader read;
  };

  void Add(Family f) {
    absl::MutexLock l(&mu_);
    families_.push_back(std::move(f));
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<Family> families;
    {
      absl::MutexLock l(&mu_);
      families = families_;
    }
    std::vector<prometheus::MetricFamily> out;
    for (const Family& f : families) {
      absl::StatusOr<std::map<std::string, double>> read = f.read();
      if (!read.ok()) {
        GT_LOG(1, "metrics: ", f.name, " not shown in this scrape: ", read.status().message());
        continue;
      }
      std::map<std::string, double> values;
      for (const std::string& v : SeriesValues(f.label, f.values)) values[v] = 0;
      for (const auto& [value, number] : *read) {
        auto it = values.find(value);
        (it == values.end() ? values[kOtherLabelValue] : it->second) += number;
      }
      prometheus::MetricFamily family;
      family.name = f.name;
      family.help = f.help;
      family.type = prometheus::MetricType::Gauge;
      for (const auto& [value, number] : values) {
        prometheus::ClientMetric m;
        if (!f.label.empty()) m.label.push_back({f.label, value});
        m.gauge.value = number;
        family.metric.push_back(std::move(m));
      }
      out.push_back(std::move(family));
    }
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Family> families_ ABSL_GUARDED_BY(mu_);
};

MetricsRegistry::MetricsRegistry()
    : registry_(std::make_shared<prometheus::Registry>()),
      gauges_(std::make_shared<GaugeFunctions>()) {}

MetricsRegistry::~MetricsRegistry() = default;

MetricCounter MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                          const std::string& label,
                                          const std::vector<std::string>& values) {
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  MetricCounter out;
  for (const std::string& v : SeriesValues(label, values)) {
    out.series_[v] = &family.Add(LabelsOf(label, v));
  }
  return out;
}

MetricHistogram MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                              const std::vector<double>& buckets,
                                              const std::string& label,
                                              const std::vector<std::string>& values) {
  auto& family = prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
  MetricHistogram out;
  for (const std::string& v : SeriesValues(label, values)) {
    out.series_[v] = &family.Add(LabelsOf(label, v), prometheus::Histogram::BucketBoundaries(buckets));
  }
  return out;
}

void MetricsRegistry::AddGaugeFunction(const std::string& name, const std::string& help,
                                       const std::string& label,
                                       const std::vector<std::string>& values,
                                       GaugeReader read) {
  gauges_->Add({name, help, label, values, std::move(read)});
}

std::string MetricsRegistry::Text() const {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectables()) {
    std::vector<prometheus::MetricFamily> some = c->Collect();
    families.insert(families.end(), some.begin(), some.end());
  }
  return prometheus::TextSerializer().Serialize(families);
}

std::vector<std::shared_ptr<prometheus::Collectable>> MetricsRegistry::collectables() const {
  return {registry_, gauges_};
}

}  // namespace gputravel
