#include "bench/piece_sizes.h"

#include "gtest/gtest.h"
#include "keyxfer/aes_gcm.h"

namespace gputravel {
namespace bench {
namespace {

// A smoke run: every figure is measured (the loops ran and their encrypt and
// decrypt calls succeeded, a failed tag would have stopped them), in the
// order given, with a reference per round. No timing is asserted.
TEST(PieceSizesTest, QuickRunMeasuresEveryPiece) {
  PieceOptions o = PieceOptions::Quick();
  o.bounce_dir = ::testing::TempDir();
  o.pieces = {AesGcm::kEncryptPiece, 4096, 64};
  auto tables = MeasurePieceSizes(o);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 1u);
  const PieceTable& t = (*tables)[0];
  EXPECT_EQ(t.message_bytes, o.message_sizes[0]);
  EXPECT_EQ(t.reference_mbps.size(), static_cast<size_t>(o.rounds));
  EXPECT_GT(t.reference_median, 0);
  ASSERT_EQ(t.figures.size(), o.pieces.size());
  for (size_t i = 0; i < o.pieces.size(); ++i) {
    const PieceFigure& f = t.figures[i];
    EXPECT_EQ(f.piece, o.pieces[i]);
    EXPECT_EQ(f.encrypt_mbps.size(), static_cast<size_t>(o.rounds));
    EXPECT_EQ(f.decrypt_mbps.size(), static_cast<size_t>(o.rounds));
    EXPECT_GT(f.encrypt_median, 0);
    EXPECT_GT(f.decrypt_median, 0);
    EXPECT_GT(f.encrypt_ratio, 0);
    EXPECT_GT(f.decrypt_ratio, 0);
  }
}

TEST(PieceSizesTest, RefusesWhatCannotBeMeasured) {
  PieceOptions o = PieceOptions::Quick();
  o.bounce_dir = ::testing::TempDir();
  PieceOptions bad = o;
  bad.pieces = {4000};  // not a multiple of 64
  EXPECT_EQ(MeasurePieceSizes(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = o;
  bad.pieces.clear();
  EXPECT_EQ(MeasurePieceSizes(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = o;
  bad.message_sizes = {o.large_bytes};  // more than a quarter of the buffer
  EXPECT_EQ(MeasurePieceSizes(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = o;
  bad.message_sizes = {100};  // not a multiple of 32
  EXPECT_EQ(MeasurePieceSizes(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = o;
  bad.rounds = 0;
  EXPECT_EQ(MeasurePieceSizes(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bench
}  // namespace gputravel
