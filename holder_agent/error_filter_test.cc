#include "holder_agent/error_filter.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(ErrorFilterTest, DatasetPathBecomesTheDatasetsName) {
  absl::Status s = ForOrchestrator(
      absl::OutOfRangeError("dataset /srv/data/a.bin shrank to 10 bytes"), "/srv/data/a.bin",
      "corpus");
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "dataset 'corpus' shrank to 10 bytes");
}

TEST(ErrorFilterTest, BounceRingPathsAreHidden) {
  absl::Status s = ForOrchestrator(
      absl::UnavailableError("cannot create bounce buffer /dev/shm/td-a/gt-bounce-1f2e: No such "
                             "file or directory"),
      "/srv/a.bin", "corpus");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "cannot create bounce buffer <holder path>: No such file or directory");
}

TEST(ErrorFilterTest, TheGpusComplaintAboutARingIsHiddenToo) {
  absl::Status s = ForOrchestrator(
      absl::PermissionDeniedError(
          "GPU AttachBounce: bounce buffer /run/shm/x/ring is not a file directly in this "
          "domain's shared memory /run/shm/td-a; the device reaches no other"),
      "", "");
  EXPECT_EQ(s.message(),
            "GPU AttachBounce: bounce buffer <holder path> is not a file directly in this "
            "domain's shared memory <holder path>; the device reaches no other");
  s = ForOrchestrator(absl::InternalError("the shared memory directory '/a/b' is bad."), "", "");
  EXPECT_EQ(s.message(), "the shared memory directory '<holder path>' is bad.");
  s = ForOrchestrator(absl::InternalError("socket unix:/run/gpu.sock refused"), "", "");
  EXPECT_EQ(s.message(), "socket unix:<holder path> refused");
}

TEST(ErrorFilterTest, SlashesInsideWordsAndNumbersStay) {
  absl::Status s =
      ForOrchestrator(absl::InternalError("chunk 3/8 failed: read/write error"), "", "");
  EXPECT_EQ(s.message(), "chunk 3/8 failed: read/write error");
  EXPECT_TRUE(ForOrchestrator(absl::OkStatus(), "/x", "y").ok());
}

}  // namespace
}  // namespace gputravel
