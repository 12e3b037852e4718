#include "bench/stats.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gputravel {
namespace bench {

double ProcessCpuSeconds() {
  struct timespec ts;
  if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double PercentileOfSorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

Summary Summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.n = samples.size();
  s.min = samples.front();
  s.max = samples.back();
  s.p50 = PercentileOfSorted(samples, 50);
  s.p90 = PercentileOfSorted(samples, 90);
  s.p99 = PercentileOfSorted(samples, 99);
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) /
           static_cast<double>(samples.size());
  return s;
}

}  // namespace bench
}  // namespace gputravel
