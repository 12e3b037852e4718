#ifndef GPUTRAVEL_BENCH_HEADLINE_TABLE_H_
#define GPUTRAVEL_BENCH_HEADLINE_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/network_baseline.h"
#include "bench/training_time.h"
#include "bench/travel_cost.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace bench {

// The GPU Travelling paper's (CCS'25) headline table: per training run of
// kSeedTrainingSeconds, the seconds spent transmitting one 256 MiB window
// over a network capped at each rate, against travelling.
inline constexpr double kSeedTrainingSeconds = 1230;
struct SeedPoint {
  uint64_t rate_bits_per_second;  // 0: uncapped
  double seconds;
};
const std::vector<SeedPoint>& SeedNetworkPoints();
inline constexpr double kSeedTravelMinSeconds = 0.98;
inline constexpr double kSeedTravelMaxSeconds = 1.03;

// The inputs of the table and what they were measured on.
struct HeadlineInputs {
  std::vector<CapResult> caps;
  std::vector<TravelCost> travel;
  // The built-in trainer on the travelling windows (MeasureTraining), by
  // size: at table_bytes it gives the second table's training time.
  std::vector<TrainingTime> training;
  uint64_t table_bytes = 256u << 20;
  double training_seconds = kSeedTrainingSeconds;
  int cores = 0;
  double openssl_single_mbps = 0;  // one-thread AES-256-GCM, 2 MiB messages
  nlohmann::json machine;
};

// Transmission share of a run: seconds / (training + seconds), as the seed.
double TransmissionShare(double seconds, double training_seconds);

// Everything as one JSON object: "table", the rows at table_bytes for
// training_seconds (the seed's), with the seed's figures beside them, and
// "table_measured_training", the same rows for the training time measured
// here (null without a training measurement at table_bytes).
nlohmann::json HeadlineJson(const HeadlineInputs& in);
// The two tables and the per-size figures as text.
std::string HeadlineText(const HeadlineInputs& in);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_HEADLINE_TABLE_H_
