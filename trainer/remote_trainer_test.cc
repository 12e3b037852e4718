#include "trainer/remote_trainer.h"

#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

constexpr absl::Duration kLong = absl::Seconds(60);  // never reached when passing

TrainingWindow Window(uint64_t trip, uint64_t tokens) {
  TrainingWindow w;
  w.campaign = "c";
  w.trip = trip;
  w.holder = "h";
  w.tokens.assign(tokens * 2, '\x01');
  return w;
}

RemoteTrainer::Options Opts(absl::Duration window_timeout = kLong) {
  RemoteTrainer::Options o;
  o.campaign = "c";
  o.identity = "t1";
  o.batch_tokens = 4;
  o.vocab = 256;
  o.window_timeout = window_timeout;
  o.release_timeout = absl::Milliseconds(200);
  return o;
}

// The next batch of `session`, skipping lease messages.
Batch NextBatch(RemoteTrainer* t, uint64_t session) {
  for (int i = 0; i < 1000; ++i) {
    auto m = t->Next(session, absl::Milliseconds(50));
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return Batch();
    if (m->has_value() && (*m)->batch.has_value()) return std::move(*(*m)->batch);
  }
  ADD_FAILURE() << "no batch";
  return Batch();
}

TEST(RemoteTrainerTest, ATrainerThatNeverAttachesFailsTheWindowNamingIt) {
  RemoteTrainer t(Opts(absl::Milliseconds(100)), {});
  int commits = 0;
  auto r = t.TrainWindow(
      Window(5, 20),
      [&](const WindowResult&, const ResumePoint&) {
        ++commits;
        return absl::OkStatus();
      },
      nullptr);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("trainer 't1' of campaign 'c' is not attached"),
            std::string::npos)
      << r.status();
  EXPECT_EQ(commits, 0);
  EXPECT_FALSE(t.lease_held());
}

TEST(RemoteTrainerTest, DetachingMidWindowHandsTheWindowOutAgainFromItsFirstBatch) {
  RemoteTrainer t(Opts(), {});
  int commits = 0;
  std::thread engine([&] {
    auto r = t.TrainWindow(
        Window(5, 13),  // 3 batches of 4 (+1) tokens
        [&](const WindowResult& res, const ResumePoint& after) {
          ++commits;
          EXPECT_EQ(res.tokens, 13u);
          EXPECT_EQ(after.committed_trip, 5u);
          EXPECT_EQ(after.tokens_committed, 13u);
          return absl::OkStatus();
        },
        nullptr);
    EXPECT_TRUE(r.ok()) << r.status();
  });
  auto a = t.Attach();
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(t.Attach().status().code(), absl::StatusCode::kFailedPrecondition);
  Batch b0 = NextBatch(&t, a->session);
  EXPECT_EQ(b0.offset_in_window, 0u);
  {
    // Not before every batch was handed out.
    WindowReportIn early;
    early.trip = 5;
    early.batch_loss = {1, 1, 1};
    early.tokens = 13;
    early.checkpoint_sha256 = std::string(32, 'a');
    EXPECT_EQ(t.Report(early).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  (void)NextBatch(&t, a->session);
  t.Detach(a->session);
  EXPECT_EQ(t.Next(a->session, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kCancelled);
  {
    // A report while no stream is attached (a replay, or a trainer that lost
    // its stream) is refused: the window must be delivered and trained again.
    WindowReportIn replay;
    replay.trip = 5;
    replay.batch_loss = {1, 1, 1};
    replay.tokens = 13;
    replay.checkpoint_sha256 = std::string(32, 'a');
    auto r = t.Report(replay);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(r.status().message().find("no trainer is attached"), std::string::npos);
  }
  auto again = t.Attach();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->resume.committed_trip, 0u);
  for (uint64_t k = 0; k < 3; ++k) {
    Batch b = NextBatch(&t, again->session);
    EXPECT_EQ(b.offset_in_window, k * 8) << k;
  }
  WindowReportIn report;
  report.trip = 5;
  report.batch_loss = {1, 1, 1};
  report.tokens = 13;
  report.checkpoint_sha256 = std::string(32, 'a');
  std::thread releaser([&] {
    // The lease's release arrives after the report is committed.
    for (int i = 0; i < 200; ++i) {
      auto m = t.Next(again->session, absl::Milliseconds(50));
      if (m.ok() && m->has_value() && (*m)->lease.has_value() && (*m)->lease->release) {
        EXPECT_EQ(t.ReleaseLease((*m)->lease->lease_id + 1).code(),
                  absl::StatusCode::kFailedPrecondition);
        EXPECT_TRUE(t.ReleaseLease((*m)->lease->lease_id).ok());
        return;
      }
    }
    ADD_FAILURE() << "no release";
  });
  auto committed = t.Report(report);
  ASSERT_TRUE(committed.ok()) << committed.status();
  EXPECT_EQ(committed->committed_trip, 5u);
  releaser.join();
  engine.join();
  EXPECT_EQ(commits, 1);
  EXPECT_FALSE(t.lease_held());
}

}  // namespace
}  // namespace gputravel
