// Streaming: a 4 GiB dataset provisioned in 256 MiB trips through the real
// processes keeps the holder agent's resident memory under 64 MiB.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "cli/emulated_stack.h"
#include "gtest/gtest.h"
#include "util/proc_stats.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

TEST(StreamingTest, FourGiBIn256MiBTripsKeepsHolderUnder64MiB) {
  std::string dir = MakeTestDir("gputravel-big-");
  const uint64_t kSize = 4ull << 30;
  // A sparse raw file: 4 GiB of payload without 4 GiB of disk.
  std::string path = dir + "/big.raw";
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, kSize), 0);
  ASSERT_EQ(::pwrite(fd, "gputravel", 9, kSize / 2), 9);  // not all zeros
  ::close(fd);

  StackOptions o;
  o.holders = 1;
  o.dataset_files = {path};
  o.buffer_bytes = 256u << 20;
  o.chunk_bytes = 2u << 20;
  o.gpu_memory_bytes = 512u << 20;
  o.holder_timeout_seconds = 300;
  o.trainer = false;  // this test is about the holder's memory, not training
  o.log_level = 0;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->state(), v1::COMPLETED) << report->error();
  EXPECT_EQ(report->trips_size(), 16);
  uint64_t total = 0;
  for (const auto& t : report->trips()) {
    total += t.bytes();
    EXPECT_TRUE(t.digest_match());
    EXPECT_TRUE(t.scrub_verified());
  }
  EXPECT_EQ(total, kSize);
  const int64_t peak = ProcStatusKib((*stack)->process("holder-a")->pid(), "VmHWM");
  ASSERT_GT(peak, 0);
  RecordProperty("holder_peak_rss_kib", std::to_string(peak));
  std::printf("holder-a peak RSS: %lld KiB\n", static_cast<long long>(peak));
  // Under ASan resident memory is ASan's (util/proc_stats.h): only printed.
  if (!kUnderAddressSanitizer) {
    EXPECT_LT(peak, 64 * 1024) << "holder peak RSS " << peak << " KiB";
  }
  (*stack)->Stop();
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace gputravel
