#ifndef GPUTRAVEL_METRICS_METRICS_SCRAPE_H_
#define GPUTRAVEL_METRICS_METRICS_SCRAPE_H_

// Reading a metrics endpoint as a Prometheus scraper does, for tests: an
// HTTP GET over a plain socket and the text format's series.

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace gputravel {

// GETs http://ADDRESS/metrics ("127.0.0.1:PORT") with HTTP/1.0 and returns
// the body of a 200 answer; any other answer, or a connection that fails or
// stays silent for 10 s, is an error naming the address.
absl::StatusOr<std::string> ScrapeMetrics(const std::string& address);

// The series of a text exposition, by name and labels as printed
// ("gputravel_mux_routes_total{outcome=\"ok\"}", "up"), to their values.
// Comment lines are skipped; a line that is not "SERIES VALUE" is an error.
absl::StatusOr<std::map<std::string, double>> ParseMetricsText(const std::string& text);

}  // namespace gputravel

#endif  // GPUTRAVEL_METRICS_METRICS_SCRAPE_H_
