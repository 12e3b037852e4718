#include "trainer/data_loader.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

// llm.c bytes of tokens first, first+1, ... (uint16 little-endian).
std::string TokenBytes(uint16_t first, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    uint16_t t = static_cast<uint16_t>(first + i);
    out.push_back(static_cast<char>(t & 0xff));
    out.push_back(static_cast<char>(t >> 8));
  }
  return out;
}

TrainingWindow MakeWindow(uint64_t trip, std::string tokens) {
  TrainingWindow w;
  w.campaign = "c1";
  w.trip = trip;
  w.holder = "holder-" + std::to_string(trip);
  w.window_offset = 1000;
  w.tokens = std::move(tokens);
  return w;
}

// Runs `body` on a thread and joins it at scope exit.
class Thread {
 public:
  template <typename F>
  explicit Thread(F body) : t_(std::move(body)) {}
  ~Thread() { t_.join(); }

 private:
  std::thread t_;
};

constexpr absl::Duration kLong = absl::Seconds(30);  // never reached when passing

// A loader that keeps each window until it is reported hands it out again
// from its first batch on Rewind; one that drops it once handed out refuses.
TEST(DataLoaderTest, RewindHandsTheWindowOutAgainOnlyWhenKept) {
  DataLoader plain(4);
  EXPECT_EQ(plain.Rewind().code(), absl::StatusCode::kFailedPrecondition);
  DataLoader loader(4, DataLoader::KeepWindow::kUntilReported);
  EXPECT_EQ(loader.Rewind().code(), absl::StatusCode::kFailedPrecondition) << "no window";
  EXPECT_FALSE(loader.Current().has_value());
  Thread producer([&] {
    auto r = loader.Offer(MakeWindow(3, TokenBytes(100, 9)), kLong);  // 2 batches
    EXPECT_TRUE(r.ok()) << r.status();
  });
  std::vector<uint16_t> first_pass;
  for (int k = 0; k < 2; ++k) {
    auto b = loader.Next(kLong);
    ASSERT_TRUE(b.ok()) << b.status();
    first_pass.insert(first_pass.end(), b->tokens.begin(), b->tokens.end());
  }
  auto cur = loader.Current();
  ASSERT_TRUE(cur.has_value());
  EXPECT_EQ(cur->trip, 3u);
  EXPECT_EQ(cur->batches, 2u);
  EXPECT_EQ(cur->handed, 2u);
  EXPECT_EQ(cur->tokens, 9u);
  ASSERT_TRUE(loader.Rewind().ok());
  std::vector<uint16_t> second_pass;
  for (int k = 0; k < 2; ++k) {
    auto b = loader.Next(kLong);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->offset_in_window, static_cast<uint64_t>(k) * 8);
    second_pass.insert(second_pass.end(), b->tokens.begin(), b->tokens.end());
  }
  EXPECT_EQ(first_pass, second_pass) << "the same bytes, kept until reported";
  ASSERT_TRUE(loader.Report(3, 0, 1.0).ok());
  EXPECT_EQ(loader.Rewind().code(), absl::StatusCode::kFailedPrecondition)
      << "a batch was reported";
  ASSERT_TRUE(loader.Report(3, 8, 1.0).ok());
}

TEST(DataLoaderTest, NextTimesOutWhileGpuTravels) {
  DataLoader loader(4);
  absl::StatusOr<Batch> b = loader.Next(absl::Milliseconds(20));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(DataLoaderTest, BatchesCoverWindowInOrderWithOneOverlapToken) {
  DataLoader loader(4);
  std::vector<Batch> got;
  {
    // The consumer starts first and blocks in Next until the window arrives.
    Thread consumer([&] {
      for (double loss : {3.0, 2.0}) {
        absl::StatusOr<Batch> b = loader.Next(kLong);
        ASSERT_TRUE(b.ok()) << b.status();
        ASSERT_TRUE(loader.Report(b->trip, b->offset_in_window, loss).ok());
        got.push_back(*std::move(b));
      }
    });
    // 10 tokens and a trailing odd byte (ignored).
    absl::StatusOr<WindowResult> r =
        loader.Offer(MakeWindow(5, TokenBytes(100, 10) + "z"), kLong);
    ASSERT_TRUE(r.ok()) << r.status();
    // The 2-token rest joins the last batch (no step on fewer than 4 tokens).
    EXPECT_EQ(r->batches, 2u);
    EXPECT_EQ(r->tokens, 10u);
    EXPECT_DOUBLE_EQ(r->first_loss, 3.0);
    EXPECT_DOUBLE_EQ(r->last_loss, 2.0);
    // Pair-weighted: 4 pairs at 3.0, 5 at 2.0.
    EXPECT_DOUBLE_EQ(r->mean_loss, (4 * 3.0 + 5 * 2.0) / 9);
  }
  ASSERT_EQ(got.size(), 2u);
  const std::vector<std::vector<uint16_t>> want = {
      {100, 101, 102, 103, 104}, {104, 105, 106, 107, 108, 109}};
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(got[k].trip, 5u);
    EXPECT_EQ(got[k].holder, "holder-5");
    EXPECT_EQ(got[k].offset_in_window, k * 8);
    EXPECT_EQ(got[k].tokens, want[k]);
    EXPECT_EQ(got[k].last_of_window, k == 1);
  }
}

// P1: a holder's policy bounds the batch (min_batch_tokens: tokens per
// optimiser step), and the operator picks buffer_bytes. A window of 3
// batches and 2 tokens must not end in an optimiser step on one pair (a
// step that moves the model towards that pair alone, for the held-out loss
// after the window to show): the rest joins the last batch.
TEST(DataLoaderTest, NoOptimiserStepOnFewerThanBatchTokens) {
  constexpr size_t kBatch = 4096;
  DataLoader loader(kBatch);
  std::vector<size_t> sizes;
  absl::StatusOr<WindowResult> r;
  {
  Thread consumer([&] {
    for (int k = 0; k < 8; ++k) {
      absl::StatusOr<Batch> b = loader.Next(kLong);
      ASSERT_TRUE(b.ok()) << b.status();
      sizes.push_back(b->tokens.size());
      ASSERT_TRUE(loader.Report(b->trip, b->offset_in_window, 1).ok());
      if (b->last_of_window) break;
    }
  });
  r = loader.Offer(MakeWindow(1, TokenBytes(0, 3 * kBatch + 2)), kLong);
  }
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(sizes.empty());
  for (size_t s : sizes) EXPECT_GE(s, kBatch);
  size_t pairs = 0;
  for (size_t s : sizes) pairs += s - 1;
  EXPECT_EQ(pairs, 3 * kBatch + 1);  // every pair trained once
}

TEST(DataLoaderTest, ExactMultipleHasNoStubBatch) {
  DataLoader loader(4);
  std::vector<size_t> sizes;
  Thread consumer([&] {
    for (int k = 0; k < 2; ++k) {
      absl::StatusOr<Batch> b = loader.Next(kLong);
      ASSERT_TRUE(b.ok());
      sizes.push_back(b->tokens.size());
      ASSERT_TRUE(loader.Report(b->trip, b->offset_in_window, 1).ok());
    }
  });
  absl::StatusOr<WindowResult> r = loader.Offer(MakeWindow(1, TokenBytes(0, 9)), kLong);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->batches, 2u);
  EXPECT_EQ(sizes, (std::vector<size_t>{5, 5}));
}

TEST(DataLoaderTest, WindowsWithoutPairsReturnAtOnce) {
  DataLoader loader(4);
  for (std::string bytes : {std::string(), std::string("a"), TokenBytes(1, 1) + "b"}) {
    absl::StatusOr<WindowResult> r = loader.Offer(MakeWindow(1, bytes), kLong);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->batches, 0u);
    EXPECT_EQ(r->tokens, 0u);
  }
  EXPECT_EQ(loader.Next(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(DataLoaderTest, ZeroBatchTokensRefused) {
  DataLoader loader(0);
  EXPECT_EQ(loader.Offer(MakeWindow(1, TokenBytes(0, 9)), kLong).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DataLoaderTest, ReportsMustMatchTheBatchesHandedOut) {
  DataLoader loader(2);
  Thread consumer([&] {
    EXPECT_EQ(loader.Report(1, 0, 1).code(), absl::StatusCode::kFailedPrecondition);
    absl::StatusOr<Batch> b0 = loader.Next(kLong);
    absl::StatusOr<Batch> b1 = loader.Next(kLong);  // two outstanding
    ASSERT_TRUE(b0.ok() && b1.ok());
    // Wrong trip, wrong offset, out of order: refused and not counted.
    EXPECT_EQ(loader.Report(2, 0, 9).code(), absl::StatusCode::kFailedPrecondition);
    absl::Status s = loader.Report(1, 2, 9);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(s.message().find("expected the loss of the batch at offset 0"),
              std::string::npos) << s;
    EXPECT_EQ(loader.Report(1, 4, 9).code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(loader.Report(1, 0, 4).ok());
    // Already reported; batch 2 (offset 8) not handed out yet.
    EXPECT_EQ(loader.Report(1, 0, 4).code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(loader.Report(1, 8, 9).code(), absl::StatusCode::kFailedPrecondition);
    ASSERT_TRUE(loader.Report(1, b1->offset_in_window, 6).ok());
    absl::StatusOr<Batch> b2 = loader.Next(kLong);
    ASSERT_TRUE(b2.ok());
    ASSERT_TRUE(loader.Report(1, b2->offset_in_window, 8).ok());
  });
  absl::StatusOr<WindowResult> r = loader.Offer(MakeWindow(1, TokenBytes(0, 6)), kLong);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->batches, 3u);
  EXPECT_DOUBLE_EQ(r->mean_loss, (2 * 4.0 + 2 * 6.0 + 1 * 8.0) / 5);
}

TEST(DataLoaderTest, OfferTimesOutAndAbandonsTheWindow) {
  DataLoader loader(4);
  absl::StatusOr<WindowResult> r = loader.Offer(MakeWindow(3, TokenBytes(0, 20)),
                                                absl::Milliseconds(20));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("0 of 5 batches of trip 3"), std::string::npos)
      << r.status();
  // Nothing of it is left to consume, and a late report is Cancelled.
  EXPECT_EQ(loader.Next(absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(loader.Report(3, 0, 1).code(), absl::StatusCode::kCancelled);
}

TEST(DataLoaderTest, CloseWakesABlockedConsumer) {
  DataLoader loader(4);
  absl::Status next_status;
  {
    Thread consumer([&] { next_status = loader.Next(kLong).status(); });
    loader.Close();
  }
  EXPECT_EQ(next_status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(loader.Next(kLong).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(loader.Offer(MakeWindow(1, TokenBytes(0, 9)), kLong).status().code(),
            absl::StatusCode::kFailedPrecondition);
  loader.Close();  // idempotent
}

TEST(DataLoaderTest, CloseCancelsTheOfferInProgress) {
  DataLoader loader(4);
  absl::Status report_status;
  absl::StatusOr<WindowResult> r;
  {
    Thread consumer([&] {
      absl::StatusOr<Batch> b = loader.Next(kLong);  // the Offer is in progress
      ASSERT_TRUE(b.ok());
      loader.Close();
      report_status = loader.Report(b->trip, b->offset_in_window, 1);
    });
    r = loader.Offer(MakeWindow(8, TokenBytes(0, 20)), kLong);
  }
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_NE(r.status().message().find("closed"), std::string::npos) << r.status();
  EXPECT_EQ(report_status.code(), absl::StatusCode::kCancelled);
}

TEST(DataLoaderTest, AbandonCurrentThenNextWindow) {
  DataLoader loader(4);
  absl::Status late_report, second_offer_status;
  uint64_t next_trip = 0;
  absl::StatusOr<WindowResult> r1, r2;
  {
  Thread consumer([&] {
    absl::StatusOr<Batch> b = loader.Next(kLong);
    ASSERT_TRUE(b.ok());
    // Another window is refused while this one is being trained.
    second_offer_status =
        loader.Offer(MakeWindow(99, TokenBytes(0, 9)), absl::ZeroDuration()).status();
    loader.AbandonCurrent();  // campaign cancelled
    late_report = loader.Report(b->trip, b->offset_in_window, 1);
    // Back to waiting: the next batch comes from the next window.
    absl::StatusOr<Batch> c = loader.Next(kLong);
    ASSERT_TRUE(c.ok());
    next_trip = c->trip;
    EXPECT_EQ(c->offset_in_window, 0u);
    ASSERT_TRUE(loader.Report(c->trip, c->offset_in_window, 2).ok());
  });
  r1 = loader.Offer(MakeWindow(1, TokenBytes(0, 20)), kLong);
  r2 = loader.Offer(MakeWindow(2, TokenBytes(0, 3)), kLong);
  }
  EXPECT_EQ(r1.status().code(), absl::StatusCode::kCancelled);
  EXPECT_NE(r1.status().message().find("abandoned after 0 of 5"), std::string::npos)
      << r1.status();
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->batches, 1u);
  EXPECT_EQ(next_trip, 2u);
  EXPECT_EQ(second_offer_status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(late_report.code(), absl::StatusCode::kCancelled);
  loader.AbandonCurrent();  // no window: no-op
}

TEST(DataLoaderTest, WindowAndBatchZeroizeWhenMoved) {
  TrainingWindow a = MakeWindow(1, "secret tokens that are long enough to be on the heap");
  TrainingWindow b = std::move(a);
  EXPECT_TRUE(a.tokens.empty());
  EXPECT_EQ(b.tokens.substr(0, 6), "secret");
  TrainingWindow c = MakeWindow(2, "short");  // inline (SSO) buffer
  TrainingWindow d = std::move(c);
  EXPECT_TRUE(c.tokens.empty());
  EXPECT_EQ(d.tokens, "short");
  d = std::move(b);
  EXPECT_EQ(d.trip, 1u);

  Batch x;
  x.tokens = {1, 2, 3};
  Batch y = std::move(x);
  EXPECT_TRUE(x.tokens.empty());
  EXPECT_EQ(y.tokens.size(), 3u);
}

TEST(DataLoaderTest, ZeroizeAndClearWipesTheWholeBuffer) {
  std::string s(100, 'k');
  s.resize(10);  // 90 stale bytes past size()
  const char* p = s.data();
  const size_t cap = s.capacity();
  ZeroizeAndClear(&s);
  EXPECT_TRUE(s.empty());
  ASSERT_EQ(s.data(), p);  // same buffer, still owned by s
  for (size_t i = 0; i < cap; ++i) ASSERT_EQ(p[i], 0) << i;

  std::vector<uint16_t> v(50, 0xabcd);
  v.resize(5);
  const uint16_t* q = v.data();
  ZeroizeAndClear(&v);
  EXPECT_TRUE(v.empty());
  for (size_t i = 0; i < 50; ++i) ASSERT_EQ(q[i], 0) << i;
}

}  // namespace
}  // namespace gputravel
