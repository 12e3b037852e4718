#include "holder_agent/dataset.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("gputravel-ds-");
  }
  void TearDown() override { (void)system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(DatasetTest, ReadsLlmcTokens) {
  std::vector<uint16_t> toks(1000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint16_t>(i * 7);
  ASSERT_TRUE(WriteLlmcShard(dir_ + "/a.bin", toks.data(), toks.size()).ok());
  auto d = Dataset::Open(dir_ + "/a.bin", "auto");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->format(), "llmc-tokens");
  EXPECT_EQ((*d)->payload_bytes(), 2000u);
  uint16_t got[10];
  ASSERT_TRUE((*d)->Read(20, reinterpret_cast<uint8_t*>(got), 20).ok());
  EXPECT_EQ(got[0], 70);
  EXPECT_EQ(got[9], 133);
}

TEST_F(DatasetTest, RawFile) {
  ASSERT_TRUE(WriteFile(dir_ + "/r", "hello raw data").ok());
  auto d = Dataset::Open(dir_ + "/r", "raw");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->payload_bytes(), 14u);
}

TEST_F(DatasetTest, MissingFileNamesThePath) {
  auto d = Dataset::Open(dir_ + "/nope.bin", "auto");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("nope.bin"), std::string::npos);
}

TEST_F(DatasetTest, BadMagicRefused) {
  std::string bad(1024 + 8, '\0');
  ASSERT_TRUE(WriteFile(dir_ + "/b.bin", bad).ok());
  auto d = Dataset::Open(dir_ + "/b.bin", "llmc-tokens");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("magic"), std::string::npos);
}

TEST_F(DatasetTest, TruncatedShardRefused) {
  std::vector<uint16_t> toks(100, 1);
  ASSERT_TRUE(WriteLlmcShard(dir_ + "/t.bin", toks.data(), toks.size()).ok());
  ASSERT_EQ(truncate((dir_ + "/t.bin").c_str(), 1024 + 150), 0);
  auto d = Dataset::Open(dir_ + "/t.bin", "auto");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("100 tokens"), std::string::npos);
}

TEST_F(DatasetTest, WrongVersionRefused) {
  std::vector<uint16_t> toks(10, 1);
  ASSERT_TRUE(WriteLlmcShard(dir_ + "/v.bin", toks.data(), toks.size()).ok());
  std::fstream f(dir_ + "/v.bin", std::ios::in | std::ios::out | std::ios::binary);
  int32_t v = 2;
  f.seekp(4);
  f.write(reinterpret_cast<char*>(&v), 4);
  f.close();
  EXPECT_NE(Dataset::Open(dir_ + "/v.bin", "auto").status().message().find("version"),
            std::string::npos);
}

TEST_F(DatasetTest, UnknownFormatAndEmptyRawRefused) {
  ASSERT_TRUE(WriteFile(dir_ + "/e", "").ok());
  EXPECT_FALSE(Dataset::Open(dir_ + "/e", "raw").ok());
  EXPECT_FALSE(Dataset::Open(dir_ + "/e", "csv").ok());
}

// A FIFO at the dataset path (a mistake, or a trap): opening it for reading
// would wait for a writer, forever, and the agent would never start. It is
// refused at once as not a regular file.
TEST_F(DatasetTest, FifoRefusedPromptly) {
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::promise<absl::Status> done;
  std::future<absl::Status> result = done.get_future();
  std::thread opener([&] { done.set_value(Dataset::Open(fifo, "auto").status()); });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "Dataset::Open is still blocked on a FIFO after 10 s";
    // A writer lets the blocked open return, so the thread can be joined.
    int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    opener.join();
    if (w >= 0) ::close(w);
    return;
  }
  opener.join();
  const absl::Status s = result.get();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s;
  EXPECT_NE(s.message().find(fifo), std::string::npos) << s;
}

TEST_F(DatasetTest, ReadPastEndRefused) {
  ASSERT_TRUE(WriteFile(dir_ + "/r", "0123456789").ok());
  auto d = *Dataset::Open(dir_ + "/r", "raw");
  uint8_t buf[8];
  EXPECT_EQ(d->Read(5, buf, 8).code(), absl::StatusCode::kOutOfRange);
}

// Map lends the same bytes Read copies, at any offset: unaligned to pages,
// shifted by the llm.c header, and up to the last (partial) byte.
TEST_F(DatasetTest, MapMatchesReadAtUnalignedOffsets) {
  const uint64_t kTokens = 3 * 4096 + 333;  // payload not a multiple of a page
  std::vector<uint16_t> toks(kTokens);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<uint16_t>(i * 2654435761u);
  ASSERT_TRUE(WriteLlmcShard(dir_ + "/m.bin", toks.data(), toks.size()).ok());
  auto d = *Dataset::Open(dir_ + "/m.bin", "auto");
  ASSERT_TRUE(d->mappable());
  const uint64_t payload = d->payload_bytes();
  ASSERT_EQ(payload, kTokens * 2);
  for (uint64_t off : {uint64_t{0}, uint64_t{1}, uint64_t{3071}, uint64_t{3072},
                       uint64_t{4095}, uint64_t{4096}, uint64_t{5000}, payload - 700}) {
    for (size_t n : {size_t{1}, size_t{700}, size_t{4096}, size_t{9000}}) {
      if (off + n > payload) continue;
      auto m = d->Map(off, n);
      ASSERT_TRUE(m.ok()) << m.status();
      ASSERT_EQ(m->size(), n);
      std::vector<uint8_t> want(n);
      ASSERT_TRUE(d->Read(off, want.data(), n).ok());
      EXPECT_EQ(0, std::memcmp(m->data(), want.data(), n)) << off << "+" << n;
    }
  }
  // The header is skipped: payload byte 0 is token 0.
  auto first = *d->Map(0, 2);
  uint16_t t0;
  std::memcpy(&t0, first.data(), 2);
  EXPECT_EQ(t0, toks[0]);
  // The last partial chunk ends exactly at the end of the file.
  auto last = *d->Map(payload - 2, 2);
  uint16_t tl;
  std::memcpy(&tl, last.data(), 2);
  EXPECT_EQ(tl, toks.back());
}

TEST_F(DatasetTest, MapOutsideThePayloadOrOfAShrunkFileRefused) {
  std::string raw(10000, 'r');
  ASSERT_TRUE(WriteFile(dir_ + "/s", raw).ok());
  auto d = *Dataset::Open(dir_ + "/s", "raw");
  EXPECT_EQ(d->Map(9000, 1001).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(d->Map(0, 0).status().code(), absl::StatusCode::kOutOfRange);
  ASSERT_EQ(truncate((dir_ + "/s").c_str(), 5000), 0);
  auto m = d->Map(4096, 2000);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(m.status().message().find("shrank"), std::string::npos);
  EXPECT_TRUE(d->Map(0, 5000).ok());
}

TEST_F(DatasetTest, MappingMovesAndUnmaps) {
  ASSERT_TRUE(WriteFile(dir_ + "/u", std::string(8192, 'u')).ok());
  auto d = *Dataset::Open(dir_ + "/u", "raw");
  DatasetMapping a = *d->Map(100, 50);
  DatasetMapping b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.size(), 50u);
  EXPECT_EQ(b.data()[0], 'u');
  a = *d->Map(200, 10);  // assigning over an empty mapping
  b = std::move(a);      // and over a live one (unmapped first)
  EXPECT_EQ(b.size(), 10u);
}

}  // namespace
}  // namespace gputravel
