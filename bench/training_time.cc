#include "bench/training_time.h"

#include <chrono>
#include <string>
#include <utility>

#include "bench/stats.h"
#include "cli/emulated_stack.h"
#include "orchestrator/campaign_spec.h"
#include "trainer/builtin_trainer.h"
#include "trainer/data_loader.h"
#include "trainer/synthetic_corpus.h"

namespace gputravel {
namespace bench {

nlohmann::json ToJson(const TrainingTime& t) {
  return {{"bytes", t.bytes},
          {"tokens", t.tokens},
          {"batches", t.batches},
          {"seconds", t.seconds},
          {"mean_loss", t.mean_loss},
          {"tokens_per_second", t.tokens_per_second}};
}

absl::StatusOr<TrainingTime> MeasureTraining(uint64_t window_bytes) {
  const TrainerSpec spec;  // the campaign's defaults
  NextTokenModelConfig mc;
  mc.vocab = spec.vocab;
  mc.dim = spec.dim;
  mc.learning_rate = static_cast<float>(spec.learning_rate);
  mc.seed = spec.seed;
  DataLoader loader(spec.batch_tokens);  // outlives the trainer's Stop()
  auto trainer = BuiltinTrainer::Create(mc);
  if (!trainer.ok()) return trainer.status();
  absl::Status s = (*trainer)->Start(&loader);
  if (!s.ok()) return s;

  const std::vector<uint16_t> tokens = GenerateCorpus(StackCorpusSeed(0), window_bytes / 2);
  TrainingWindow w;
  w.campaign = "bench";
  w.holder = "h1";
  w.tokens.assign(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  auto t0 = std::chrono::steady_clock::now();
  auto r = loader.Offer(std::move(w), absl::Hours(1));
  const double seconds = SecondsSince(t0);
  (*trainer)->Stop();
  if (!r.ok()) return r.status();
  absl::Status trained = (*trainer)->last_error();
  if (!trained.ok()) return trained;
  TrainingTime t;
  t.bytes = window_bytes;
  t.tokens = r->tokens;
  t.batches = r->batches;
  t.seconds = seconds;
  t.mean_loss = r->mean_loss;
  t.tokens_per_second = seconds > 0 ? static_cast<double>(r->tokens) / seconds : 0;
  return t;
}

double TrainingLinearity(const std::vector<TrainingTime>& sizes) {
  if (sizes.size() < 2) return 0;
  const TrainingTime& a = sizes[sizes.size() - 2];
  const TrainingTime& b = sizes.back();
  if (a.seconds <= 0 || a.bytes == 0) return 0;
  return (b.seconds / a.seconds) /
         (static_cast<double>(b.bytes) / static_cast<double>(a.bytes));
}

}  // namespace bench
}  // namespace gputravel
