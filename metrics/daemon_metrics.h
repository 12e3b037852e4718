#ifndef GPUTRAVEL_METRICS_DAEMON_METRICS_H_
#define GPUTRAVEL_METRICS_DAEMON_METRICS_H_

// A daemon's metrics as its configuration's "metrics_listen" asks for them
// (off without it): the registry its parts count in, attestation failures
// counted around its verifier, and the exposer on the loopback.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "keyxfer/attester.h"
#include "metrics/counted_verifier.h"
#include "metrics/metrics_exposer.h"
#include "metrics/metrics_registry.h"

namespace gputravel {

class DaemonMetrics {
 public:
  // Serves a new registry at `listen` (metrics_exposer.h; `where` names the
  // field in errors). `verifier` (may be null: a daemon that verifies no
  // TD) is wrapped so its refusals are counted.
  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> Start(const std::string& listen,
                                                              const std::string& where,
                                                              Verifier* verifier);

  MetricsRegistry* registry() { return &registry_; }
  // The verifier to use in place of the one given (null if none was).
  Verifier* verifier() { return verifier_.get(); }
  // Where it serves, as bound ("127.0.0.1:PORT").
  const std::string& address() const { return exposer_->address(); }

 private:
  DaemonMetrics() = default;
  // Declared so that the exposer goes first: no scrape outlives the rest.
  MetricsRegistry registry_;
  std::unique_ptr<CountedVerifier> verifier_;
  std::unique_ptr<MetricsExposer> exposer_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_METRICS_DAEMON_METRICS_H_
