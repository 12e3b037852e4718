#include "metrics/daemon_metrics.h"

#include <utility>

namespace gputravel {

absl::StatusOr<std::unique_ptr<DaemonMetrics>> DaemonMetrics::Start(const std::string& listen,
                                                                    const std::string& where,
                                                                    Verifier* verifier) {
  std::unique_ptr<DaemonMetrics> m(new DaemonMetrics());
  if (verifier != nullptr) {
    m->verifier_ = std::make_unique<CountedVerifier>(verifier, &m->registry_);
  }
  auto exposer = MetricsExposer::Start(listen, m->registry_, where);
  if (!exposer.ok()) return exposer.status();
  m->exposer_ = *std::move(exposer);
  return m;
}

}  // namespace gputravel
