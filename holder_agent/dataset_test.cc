#include "holder_agent/dataset.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "gtest/gtest.h"
#include "util/files.h"

namespace gputravel {
namespace {

class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gputravel-ds-XXXXXX";
    dir_ = mkdtemp(tmpl);
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

TEST_F(DatasetTest, ReadPastEndRefused) {
  ASSERT_TRUE(WriteFile(dir_ + "/r", "0123456789").ok());
  auto d = *Dataset::Open(dir_ + "/r", "raw");
  uint8_t buf[8];
  EXPECT_EQ(d->Read(5, buf, 8).code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace gputravel
