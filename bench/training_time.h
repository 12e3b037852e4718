#ifndef GPUTRAVEL_BENCH_TRAINING_TIME_H_
#define GPUTRAVEL_BENCH_TRAINING_TIME_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace bench {

// What the orchestrator's built-in trainer takes to train one window.
struct TrainingTime {
  uint64_t bytes = 0;
  uint64_t tokens = 0;
  uint64_t batches = 0;
  double seconds = 0;      // DataLoader::Offer .. every batch's loss reported
  double mean_loss = 0;    // nats per predicted token (a check that it learned)
  double tokens_per_second = 0;
};
nlohmann::json ToJson(const TrainingTime& t);

// Trains a fresh BuiltinTrainer, through a DataLoader, exactly as the
// campaign engine does for each trip (the campaign's default trainer terms,
// orchestrator/campaign_spec.h TrainerSpec: next-token, vocab 512, dim 32,
// batches of 65536 tokens), on the window travelling provisions at this size
// (the emulated stack's holder 0 dataset of `window_bytes`), and times it.
absl::StatusOr<TrainingTime> MeasureTraining(uint64_t window_bytes);

// As the network baseline's (network_baseline.h CapResult::linearity): for
// the two largest sizes, t2/t1 over s2/s1 (1: the time is proportional to
// the window); 0 with fewer than two sizes.
double TrainingLinearity(const std::vector<TrainingTime>& sizes);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_TRAINING_TIME_H_
