#ifndef GPUTRAVEL_METRICS_METRICS_EXPOSER_H_
#define GPUTRAVEL_METRICS_METRICS_EXPOSER_H_

// Serves a MetricsRegistry to a Prometheus scraper: plain HTTP, GET
// /metrics, on a loopback TCP address only. The exposition carries counts,
// durations and states, never a key, a dataset's content or anything the
// daemon's API does not already show; still, it is unauthenticated, so it
// is never bound where another machine could reach it: a scraper (or a
// forwarder) runs beside the daemon, in the same TD or on the same host.
// prometheus-cpp serves it through Debian's civetweb, which has neither
// IPv6 nor Unix sockets: "127.0.0.1:PORT" is the one form.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "metrics/metrics_registry.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace gputravel {

inline constexpr char kMetricsPath[] = "/metrics";

// OK for "127.0.0.1:PORT" (PORT 0..65535; 0: the kernel picks one);
// anything else InvalidArgument naming `where` (a configuration field,
// "orch.json: metrics_listen") and saying why.
absl::Status CheckMetricsListen(const std::string& listen, const std::string& where);

class MetricsExposer {
 public:
  // Serves `registry` (which must outlive the exposer) at `listen`
  // (CheckMetricsListen). UNAVAILABLE naming `where` and the address when
  // it cannot be bound (in use, say).
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(const std::string& listen,
                                                               const MetricsRegistry& registry,
                                                               const std::string& where);
  ~MetricsExposer();
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  // "127.0.0.1:PORT" as bound (the port the kernel chose for port 0).
  const std::string& address() const { return address_; }

 private:
  MetricsExposer(std::unique_ptr<prometheus::Exposer> exposer, std::string address);
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_METRICS_METRICS_EXPOSER_H_
