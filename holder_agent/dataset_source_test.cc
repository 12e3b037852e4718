// A dataset window as the writer's source: views of mapped chunks equal the
// bytes pread copies, cancellation and bounds hold, the writer lands a window
// straight from the mapped file, and streaming a large file through views
// keeps the resident set bounded (each chunk is unmapped once released).
#include "holder_agent/dataset_source.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "device/emulated_gpu_fixture.h"
#include "device/h2d_writer.h"
#include "gtest/gtest.h"
#include "holder_agent/dataset.h"
#include "util/files.h"
#include "util/proc_stats.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

class DatasetSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("gputravel-dss-");
  }
  void TearDown() override { (void)system(("rm -rf " + dir_).c_str()); }

  // An llm.c shard of `count` tokens; returns the tokens.
  std::vector<uint16_t> Shard(const std::string& name, uint64_t count) {
    std::vector<uint16_t> toks(count);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint16_t>(i * 40503u + 7);
    EXPECT_TRUE(WriteLlmcShard(dir_ + "/" + name, toks.data(), toks.size()).ok());
    return toks;
  }
  std::string dir_;
};

TEST_F(DatasetSourceTest, ViewsEqualCopiesInAnUnalignedWindow) {
  Shard("a.bin", 20000);
  auto d = *Dataset::Open(dir_ + "/a.bin", "auto");
  const uint64_t base = 1234, len = 30000;  // neither page- nor chunk-aligned
  std::atomic<uint64_t> seen{0};
  DatasetSource src(*d, base, len, [&](uint64_t n) {
    seen += n;
    return true;
  });
  ASSERT_TRUE(src.CanView());
  for (uint64_t off = 0; off < len; off += 4096) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(4096, len - off));
    auto v = src.View(off, n);
    ASSERT_TRUE(v.ok()) << v.status();
    std::vector<uint8_t> want(n), got(n);
    ASSERT_TRUE(d->Read(base + off, want.data(), n).ok());
    ASSERT_TRUE(src.Read(off, got.data(), n).ok());
    EXPECT_EQ(0, std::memcmp(v->data(), want.data(), n)) << off;
    EXPECT_EQ(got, want);
  }
  EXPECT_EQ(seen, 2 * len);  // every chunk once as a view, once as a copy
  uint8_t b;
  EXPECT_EQ(src.View(len - 10, 11).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(src.Read(len, &b, 1).code(), absl::StatusCode::kOutOfRange);
}

// Small chunks come from shared 8 MiB region mappings: every view still
// equals what pread reads, also for a chunk across a region's edge (mapped
// on its own) and with two workers taking chunks in order at once.
TEST_F(DatasetSourceTest, SmallChunksFromSharedRegionsEqualCopies) {
  const uint64_t kFile = 20u << 20;
  {
    std::string data(kFile, '\0');
    for (uint64_t i = 0; i < kFile; ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
    ASSERT_TRUE(WriteFile(dir_ + "/r.raw", data, 0600).ok());
  }
  auto d = *Dataset::Open(dir_ + "/r.raw", "raw");
  const uint64_t base = 1234, len = kFile - 5000;  // regions not page-aligned in the file
  DatasetSource src(*d, base, len);
  ASSERT_TRUE(src.CanView());
  auto check = [&](uint64_t off, size_t n) {
    auto v = src.View(off, n);
    ASSERT_TRUE(v.ok()) << v.status();
    std::vector<uint8_t> want(n);
    ASSERT_TRUE(d->Read(base + off, want.data(), n).ok());
    EXPECT_EQ(0, std::memcmp(v->data(), want.data(), n)) << off << " +" << n;
  };
  check((8u << 20) - 4096, 8192);           // across the first region's edge
  check((16u << 20) - 100, 64u << 10);      // across the second's
  check(len - 3000, 3000);                  // the window's last bytes
  std::atomic<uint64_t> next{0};
  auto worker = [&] {
    for (;;) {
      const uint64_t off = next.fetch_add(64u << 10);
      if (off >= len) break;
      check(off, static_cast<size_t>(std::min<uint64_t>(64u << 10, len - off)));
    }
  };
  std::thread a(worker), b(worker);
  a.join();
  b.join();
}

// Streaming a large file in small chunks keeps the resident set to a few
// regions: a region is unmapped once the source has moved past it and its
// last view is released.
TEST_F(DatasetSourceTest, SmallChunksKeepTheResidentSetToAFewRegions) {
  const uint64_t kSize = 256ull << 20;
  const std::string path = dir_ + "/big.raw";
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, kSize), 0);  // sparse: no disk needed
  ::close(fd);
  auto d = *Dataset::Open(path, "raw");
  DatasetSource src(*d, 0, kSize);
  const long base_rss = ProcStatusKib(0, "VmRSS");
  long max_rss = base_rss;
  const size_t kChunk = 64u << 10;
  for (int pass = 0; pass < 2; ++pass) {  // read again from the start, as a retried write would
    for (uint64_t off = 0; off < kSize; off += kChunk) {
      auto v = src.View(off, kChunk);
      ASSERT_TRUE(v.ok()) << v.status();
      uint64_t sum = 0;
      for (size_t i = 0; i < kChunk; i += 4096) sum += v->data()[i];
      (void)sum;
      if (off % (1u << 20) == 0) max_rss = std::max(max_rss, ProcStatusKib(0, "VmRSS"));
    }
  }
  EXPECT_EQ(src.mappings(), 2 * kSize / (8u << 20)) << "one mapping per 8 MiB region and pass";
  const long growth = max_rss - base_rss;
  RecordProperty("rss_growth_kib", std::to_string(growth));
  EXPECT_LT(growth, 24 * 1024) << "resident set grew by " << growth << " KiB";
}

TEST_F(DatasetSourceTest, CancelledCallerStopsTheSource) {
  Shard("c.bin", 4096);
  auto d = *Dataset::Open(dir_ + "/c.bin", "auto");
  bool go_on = true;
  DatasetSource src(*d, 0, 8192, [&](uint64_t) { return go_on; });
  EXPECT_TRUE(src.View(0, 100).ok());
  go_on = false;
  EXPECT_EQ(src.View(0, 100).status().code(), absl::StatusCode::kCancelled);
  uint8_t buf[100];
  EXPECT_EQ(src.Read(0, buf, 100).code(), absl::StatusCode::kCancelled);
}

// Streaming 512 MiB through views, one 2 MiB chunk at a time, each touched
// whole (as the encryption does) and released: the resident set grows by
// about one chunk, not by the file. Without the unmap it would grow by the
// whole window.
TEST_F(DatasetSourceTest, StreamingViewsKeepsTheResidentSetBounded) {
  const uint64_t kSize = 512ull << 20;
  const std::string path = dir_ + "/big.raw";
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, kSize), 0);  // sparse: no disk needed
  for (uint64_t off = 0; off < kSize; off += 64ull << 20) {
    ASSERT_EQ(::pwrite(fd, "gputravel", 9, off + 12345), 9);
  }
  ::close(fd);
  auto d = *Dataset::Open(path, "raw");
  DatasetSource src(*d, 0, kSize);
  ASSERT_TRUE(src.CanView());
  // Reset the peak (VmHWM) to the current resident set where the kernel
  // allows it; the samples below bound the peak either way.
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
  const long base_rss = ProcStatusKib(0, "VmRSS");
  const long base_hwm = ProcStatusKib(0, "VmHWM");
  ASSERT_GT(base_rss, 0);
  long max_rss = base_rss;
  uint64_t marks = 0;
  const size_t kChunk = 2u << 20;
  for (uint64_t off = 0; off < kSize; off += kChunk) {
    auto v = src.View(off, kChunk);
    ASSERT_TRUE(v.ok()) << v.status();
    uint64_t sum = 0;
    for (size_t i = 0; i < kChunk; i += 4096) sum += v->data()[i];  // every page
    for (size_t i = 0; i + 9 <= kChunk; i += 4096) {
      if (std::memcmp(v->data() + i + (12345 % 4096), "gputravel", 9) == 0) ++marks;
    }
    (void)sum;
    max_rss = std::max(max_rss, ProcStatusKib(0, "VmRSS"));
  }
  EXPECT_EQ(marks, kSize / (64ull << 20));  // the data really was read
  const long growth = max_rss - base_rss;
  RecordProperty("rss_growth_kib", std::to_string(growth));
  EXPECT_LT(growth, 16 * 1024) << "resident set grew by " << growth << " KiB";
  const long hwm = ProcStatusKib(0, "VmHWM");
  if (hwm > 0 && base_hwm > 0 && base_hwm <= base_rss + 1024) {  // the reset worked
    EXPECT_LT(hwm - base_rss, 16 * 1024) << "peak grew by " << hwm - base_rss << " KiB";
  }
}

// The writer lands an unaligned window of an llm.c shard straight from the
// mapping (zero copy), exactly as pread would have read it.
class DatasetWriterTest : public testing_fixture::EmulatedGpuFixture {};

TEST_F(DatasetWriterTest, WriterLandsAMappedWindow) {
  const std::string dir = MakeTestDir("gputravel-dsw-");
  struct RemoveAll {  // also when an assertion ends the test early
    std::string d;
    ~RemoveAll() { (void)system(("rm -rf " + d).c_str()); }
  } cleanup{dir};
  std::vector<uint16_t> toks(50000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint16_t>(i ^ 0x5a5a);
  ASSERT_TRUE(WriteLlmcShard(dir + "/w.bin", toks.data(), toks.size()).ok());
  auto d = *Dataset::Open(dir + "/w.bin", "auto");
  const uint64_t base = 2 * 777, len = 60000 + 96;
  const uint64_t buffer = Alloc(64 << 10);
  std::atomic<uint64_t> progressed{0};
  DatasetSource src(*d, base, len, [&](uint64_t n) {
    progressed += n;
    return true;
  });
  H2dWriterOptions wo;
  wo.chunk_size = 8192;
  wo.threads = 2;
  wo.bounce_dir = dir_;  // the fixture's shared memory, where the device maps rings
  H2dWriter w(Serve(), wo);
  auto stats = w.Write(keys_.lce_h2d, session_, buffer, 0, len,
                       CounterWindow{1, H2dWriter::ChunksFor(len, wo.chunk_size)}, src);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_TRUE(stats->zero_copy);
  EXPECT_EQ(progressed, len);
  v1::DeviceCommand c;
  c.mutable_read()->set_buffer_id(buffer);
  c.mutable_read()->set_length(len);
  std::string back = Command(c)->data();
  std::string want(len, '\0');
  ASSERT_TRUE(d->Read(base, reinterpret_cast<uint8_t*>(&want[0]), len).ok());
  EXPECT_TRUE(back == want);
}

}  // namespace
}  // namespace gputravel
