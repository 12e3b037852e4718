#ifndef GPUTRAVEL_BENCH_STATS_H_
#define GPUTRAVEL_BENCH_STATS_H_

#include <chrono>
#include <cstdint>
#include <vector>

namespace gputravel {
namespace bench {

// Monotonic seconds since `t0`.
inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU time consumed so far by every thread of this process (user + system).
double ProcessCpuSeconds();

// Decimal megabytes per second (1 MB = 1e6 bytes, as `openssl speed` reports
// in 1000s of bytes); 0 when nothing was timed.
inline double MegabytesPerSecond(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e6 : 0.0;
}

// Order statistics of a sample (seconds, MB/s, ...). Percentiles use the
// nearest-rank method, so p99 of 100 samples is the 99th smallest.
struct Summary {
  uint64_t n = 0;
  double min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
};

Summary Summarize(std::vector<double> samples);

// Nearest-rank percentile (p in [0, 100]) of an ascending-sorted sample.
double PercentileOfSorted(const std::vector<double>& sorted, double p);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_STATS_H_
