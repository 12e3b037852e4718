#include "orchestrator/gpu_health.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

GpuHealth Met(const std::string& serial, uint64_t memory, bool session) {
  GpuHealth h;
  h.serial = serial;
  h.memory_bytes = memory;
  h.session = session;
  return h;
}

TEST(GpuHealthBoardTest, AGpuNeverContactedIsUnknownAndAnyBufferPasses) {
  GpuHealthBoard board;
  GpuHealth h = board.Get("gpu0");
  EXPECT_EQ(h.reach, GpuHealth::Reach::kUnknown);
  EXPECT_EQ(h.memory_bytes, 0u);
  EXPECT_EQ(h.checked, absl::InfinitePast());
  EXPECT_TRUE(board.CheckBufferFits("gpu0", uint64_t{1} << 40).ok());
}

TEST(GpuHealthBoardTest, AContactRecordsTheDeviceAndTheSession) {
  GpuHealthBoard board;
  board.Record("gpu0", absl::OkStatus(), Met("SN-1", 1024, true));
  GpuHealth h = board.Get("gpu0");
  EXPECT_EQ(h.reach, GpuHealth::Reach::kReachable);
  EXPECT_EQ(h.serial, "SN-1");
  EXPECT_EQ(h.memory_bytes, 1024u);
  EXPECT_TRUE(h.session);
  EXPECT_TRUE(h.error.empty());
  EXPECT_NE(h.checked, absl::InfinitePast());
  EXPECT_EQ(board.Get("gpu1").reach, GpuHealth::Reach::kUnknown);
}

TEST(GpuHealthBoardTest, AFailedContactKeepsWhatWasMetAndClearsWhenContactWorksAgain) {
  GpuHealthBoard board;
  board.Record("gpu0", absl::OkStatus(), Met("SN-1", 1024, true));
  board.Record("gpu0", absl::UnavailableError("MUX Route gpu0: connection refused"),
               Met("", 0, false));
  GpuHealth h = board.Get("gpu0");
  EXPECT_EQ(h.reach, GpuHealth::Reach::kUnreachable);
  EXPECT_EQ(h.error, "MUX Route gpu0: connection refused");
  EXPECT_EQ(h.serial, "SN-1");
  EXPECT_EQ(h.memory_bytes, 1024u);
  EXPECT_FALSE(h.session);
  board.Record("gpu0", absl::OkStatus(), Met("SN-1", 1024, true));
  h = board.Get("gpu0");
  EXPECT_EQ(h.reach, GpuHealth::Reach::kReachable);
  EXPECT_TRUE(h.error.empty());
}

TEST(GpuHealthBoardTest, ABufferLargerThanTheDeclaredMemoryIsRefusedNamingFieldGpuAndSize) {
  GpuHealthBoard board;
  board.Record("gpu0", absl::OkStatus(), Met("SN-1", 1024, true));
  EXPECT_TRUE(board.CheckBufferFits("gpu0", 1024).ok());
  absl::Status s = board.CheckBufferFits("gpu0", 1056);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "buffer_bytes: 1056 bytes do not fit on GPU 'gpu0': its device (SN-1) has 1024 "
            "bytes of memory; choose a smaller buffer_bytes");
  EXPECT_TRUE(board.CheckBufferFits("gpu1", 1056).ok());
}

}  // namespace
}  // namespace gputravel
