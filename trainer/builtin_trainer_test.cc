#include "trainer/builtin_trainer.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/data_loader.h"
#include "trainer/synthetic_corpus.h"

namespace gputravel {
namespace {

constexpr absl::Duration kLong = absl::Seconds(60);  // never reached when passing

std::string LlmcBytes(const std::vector<uint16_t>& tokens) {
  std::string out;
  out.reserve(tokens.size() * 2);
  for (uint16_t t : tokens) {
    out.push_back(static_cast<char>(t & 0xff));
    out.push_back(static_cast<char>(t >> 8));
  }
  return out;
}

TrainingWindow HolderWindow(uint64_t trip, uint64_t seed, size_t tokens) {
  TrainingWindow w;
  w.campaign = "demo";
  w.trip = trip;
  w.holder = "holder-" + std::to_string(seed);
  w.window_offset = 0;
  w.tokens = LlmcBytes(GenerateCorpus(seed, tokens));
  return w;
}

TEST(BuiltinTrainerTest, RejectsBadConfig) {
  NextTokenModelConfig c;
  c.dim = 0;
  auto t = BuiltinTrainer::Create(c);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("trainer.dim"), std::string::npos);
}

TEST(BuiltinTrainerTest, LossFallsOverWindowsAndCheckpointRestores) {
  DataLoader loader(4096);  // outlives the trainer's Stop()
  auto trainer = BuiltinTrainer::Create({});
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE((*trainer)->Start(&loader).ok());
  EXPECT_EQ((*trainer)->Start(&loader).code(), absl::StatusCode::kFailedPrecondition);

  const std::vector<uint16_t> held_out = GenerateCorpus(1234, 50000);
  const float held_before = (*trainer)->Evaluate(held_out.data(), held_out.size());
  // Six trips over three holders, 64K tokens (128 KiB) each.
  std::vector<WindowResult> results;
  std::string checkpoint;
  uint64_t pairs = 0;
  for (uint64_t trip = 0; trip < 6; ++trip) {
    absl::StatusOr<WindowResult> r =
        loader.Offer(HolderWindow(trip, 10 + trip % 3, 65536), kLong);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->batches, 16u);
    EXPECT_EQ(r->tokens, 65536u);
    pairs += r->tokens - 1;
    results.push_back(*r);
    std::printf("trip %d: mean %.3f first %.3f last %.3f\n", static_cast<int>(trip),
                r->mean_loss, r->first_loss, r->last_loss);
    if (trip == 3) checkpoint = (*trainer)->Checkpoint();
  }
  EXPECT_NEAR(results[0].first_loss, std::log(512.0), 1e-3);
  // Falls window after window until it nears the corpus entropy (~1.6 nats
  // for a model this size), where sampling noise can outweigh progress.
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_LT(results[i].mean_loss, results[i - 1].mean_loss) << "trip " << i;
  }
  for (size_t i = 4; i < results.size(); ++i) {
    EXPECT_LT(results[i].mean_loss, results[2].mean_loss) << "trip " << i;
  }
  EXPECT_LT(results.back().mean_loss, 0.5 * results[0].first_loss);
  const float held_after = (*trainer)->Evaluate(held_out.data(), held_out.size());
  EXPECT_LT(held_after, 0.5f * held_before);
  EXPECT_EQ((*trainer)->tokens_trained(), pairs);
  const std::string final_checkpoint = (*trainer)->Checkpoint();
  (*trainer)->Stop();
  (*trainer)->Stop();  // idempotent
  EXPECT_TRUE((*trainer)->last_error().ok()) << (*trainer)->last_error();

  // Crash recovery: a fresh trainer restored from the trip-3 checkpoint and
  // fed trips 4 and 5 again ends where the first one did.
  DataLoader loader2(4096);  // outlives the restored trainer's Stop()
  auto restored = BuiltinTrainer::Create({});
  ASSERT_TRUE(restored.ok());
  ASSERT_TRUE((*restored)->Restore(checkpoint).ok());
  EXPECT_EQ((*restored)->tokens_trained(), 4 * 65535u);
  ASSERT_TRUE((*restored)->Start(&loader2).ok());
  for (uint64_t trip = 4; trip < 6; ++trip) {
    absl::StatusOr<WindowResult> r =
        loader2.Offer(HolderWindow(trip, 10 + trip % 3, 65536), kLong);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->mean_loss, results[trip].mean_loss);
  }
  EXPECT_EQ((*restored)->Checkpoint(), final_checkpoint);
  EXPECT_EQ((*restored)->Evaluate(held_out.data(), held_out.size()), held_after);
}

TEST(BuiltinTrainerTest, RestoreRejectsGarbageAndKeepsTheModel) {
  auto trainer = BuiltinTrainer::Create({});
  ASSERT_TRUE(trainer.ok());
  const std::string before = (*trainer)->Checkpoint();
  absl::Status s = (*trainer)->Restore("not a checkpoint");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*trainer)->Checkpoint(), before);
}

TEST(BuiltinTrainerTest, StopAbandonsAWindowAndTheTrainerSurvivesAbandon) {
  DataLoader loader(1024);  // outlives the trainer's Stop()
  auto trainer = BuiltinTrainer::Create({});
  ASSERT_TRUE(trainer.ok());
  ASSERT_TRUE((*trainer)->Start(&loader).ok());
  // An abandoned window does not disturb the loop: the next one trains.
  loader.AbandonCurrent();
  absl::StatusOr<WindowResult> r = loader.Offer(HolderWindow(0, 1, 4097), kLong);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->batches, 4u);
  (*trainer)->Stop();
  EXPECT_EQ(loader.Offer(HolderWindow(1, 1, 100), kLong).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*trainer)->last_error().ok());
}

}  // namespace
}  // namespace gputravel
