#include "metrics/metrics_exposer.h"

#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "prometheus/exposer.h"

namespace gputravel {
namespace {

constexpr char kLoopback[] = "127.0.0.1:";

}  // namespace

absl::Status CheckMetricsListen(const std::string& listen, const std::string& where) {
  const std::string port = listen.rfind(kLoopback, 0) == 0
                               ? listen.substr(sizeof(kLoopback) - 1)
                               : std::string();
  uint32_t n = 0;
  const bool digits = !port.empty() && port.size() <= 5 &&
                      port.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || !absl::SimpleAtoi(port, &n) || n > 65535) {
    return absl::InvalidArgumentError(
        where + ": '" + listen + "' is not \"127.0.0.1:PORT\": the metrics endpoint is "
        "unauthenticated plain HTTP and binds the IPv4 loopback only (a scraper runs beside "
        "the daemon); IPv6 and Unix sockets are not supported by the exposer");
  }
  return absl::OkStatus();
}

MetricsExposer::MetricsExposer(std::unique_ptr<prometheus::Exposer> exposer,
                               std::string address)
    : exposer_(std::move(exposer)), address_(std::move(address)) {}

MetricsExposer::~MetricsExposer() = default;

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    const std::string& listen, const MetricsRegistry& registry, const std::string& where) {
  absl::Status valid = CheckMetricsListen(listen, where);
  if (!valid.ok()) return valid;
  // civetweb reports a failed bind by throwing: it stays inside this file.
  std::unique_ptr<prometheus::Exposer> exposer;
  std::vector<int> ports;
  try {
    exposer = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/1);
    for (const auto& c : registry.collectables()) exposer->RegisterCollectable(c, kMetricsPath);
    ports = exposer->GetListeningPorts();
  } catch (const std::exception& e) {
    return absl::UnavailableError(where + ": cannot serve metrics on " + listen + ": " +
                                  e.what() + " (is the port in use?)");
  }
  if (ports.size() != 1 || ports[0] <= 0) {
    return absl::UnavailableError(where + ": metrics on " + listen +
                                  ": the exposer did not report the port it bound");
  }
  return std::unique_ptr<MetricsExposer>(
      new MetricsExposer(std::move(exposer), kLoopback + std::to_string(ports[0])));
}

}  // namespace gputravel
