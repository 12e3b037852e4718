#include "keyxfer/tdx/configfs_tsm.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/fake_tsm_fs.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/testdata.h"
#include "util/test_dir.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  closedir(d);
  return out;
}

std::array<uint8_t, 64> Pattern(uint8_t seed) {
  std::array<uint8_t, 64> rd;
  for (size_t i = 0; i < rd.size(); ++i) rd[i] = static_cast<uint8_t>(seed + i);
  return rd;
}

class ConfigfsTsmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTestDir("tsm.");
    fake_ = std::make_shared<testing::FakeConfigfsTsm>(root_,
                                                       testing::RealQuote());
  }

  ConfigfsTsmQuoteProvider Provider(
      absl::Duration timeout = absl::Seconds(5)) {
    ConfigfsTsmOptions o;
    o.root = root_;
    o.fs = fake_;
    o.initial_backoff = absl::Milliseconds(1);
    o.max_backoff = absl::Milliseconds(4);
    o.timeout = timeout;
    return ConfigfsTsmQuoteProvider(o);
  }

  std::string root_;
  std::shared_ptr<testing::FakeConfigfsTsm> fake_;
};

TEST_F(ConfigfsTsmTest, ReturnsOutblobForTheWrittenReportData) {
  auto provider = Provider();
  auto blob = provider.GetQuote(Pattern(7));
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(blob->size(), 8000u);  // zero padding passed through
  auto q = ParseQuote(*blob);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->body.report_data, Pattern(7));
  EXPECT_EQ(fake_->inblob_attempts(), 1);
}

TEST_F(ConfigfsTsmTest, UsesAFreshUniqueDirectoryAndRemovesIt) {
  auto provider = Provider();
  ASSERT_TRUE(provider.GetQuote(Pattern(1)).ok());
  ASSERT_TRUE(provider.GetQuote(Pattern(2)).ok());
  auto dirs = fake_->dirs_made();
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_NE(dirs[0], dirs[1]);
  EXPECT_THAT(dirs[0], StartsWith(root_ + "/gputravel-"));
  EXPECT_THAT(ListDir(root_), IsEmpty());
}

TEST_F(ConfigfsTsmTest, RetriesEbusyWithBackoff) {
  fake_->set_busy_writes(3);
  fake_->set_busy_reads(2);
  auto provider = Provider();
  auto blob = provider.GetQuote(Pattern(9));
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(fake_->inblob_attempts(), 4);
  auto q = ParseQuote(*blob);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->body.report_data, Pattern(9));
}

TEST_F(ConfigfsTsmTest, GivesUpOnPersistentEbusyAtTheTimeout) {
  fake_->set_busy_writes(1 << 30);
  auto provider = Provider(absl::Milliseconds(50));
  absl::Time start = absl::Now();
  auto blob = provider.GetQuote(Pattern(0));
  absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(blob.ok());
  EXPECT_EQ(blob.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(blob.status().message()),
              HasSubstr("inblob still busy (EBUSY)"));
  EXPECT_LT(took, absl::Seconds(2));
  EXPECT_GT(fake_->inblob_attempts(), 3);
  EXPECT_THAT(ListDir(root_), IsEmpty());
}

TEST_F(ConfigfsTsmTest, RefusesAnotherProvider) {
  fake_->set_provider("sev_guest");
  auto provider = Provider();
  auto blob = provider.GetQuote(Pattern(0));
  ASSERT_FALSE(blob.ok());
  EXPECT_EQ(blob.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(blob.status().message()),
              HasSubstr("provider is \"sev_guest\", expected \"tdx_guest\""));
  EXPECT_EQ(fake_->inblob_attempts(), 0);  // never asked for a quote
  EXPECT_THAT(ListDir(root_), IsEmpty());
}

TEST_F(ConfigfsTsmTest, MissingRootSaysWhatToSetUp) {
  ConfigfsTsmOptions o;
  o.root = root_ + "/no/such/configfs";
  o.fs = fake_;
  ConfigfsTsmQuoteProvider provider(o);
  auto blob = provider.GetQuote(Pattern(0));
  ASSERT_FALSE(blob.ok());
  EXPECT_EQ(blob.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(blob.status().message()),
              HasSubstr(o.root + " does not exist: mount configfs"));
}

TEST_F(ConfigfsTsmTest, RacingWriterIsDetected) {
  fake_->set_racing_writes(1);
  auto provider = Provider();
  auto blob = provider.GetQuote(Pattern(0));
  ASSERT_FALSE(blob.ok());
  EXPECT_EQ(blob.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(blob.status().message()),
              HasSubstr("went from 0 to 2 across one inblob write"));
  EXPECT_THAT(ListDir(root_), IsEmpty());
}

TEST_F(ConfigfsTsmTest, SilentlyDroppedWriteIsDetected) {
  fake_->set_drop_writes(true);
  auto provider = Provider();
  auto blob = provider.GetQuote(Pattern(0));
  ASSERT_FALSE(blob.ok());
  EXPECT_EQ(blob.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(blob.status().message()),
              HasSubstr("went from 0 to 0 across one inblob write"));
}

TEST_F(ConfigfsTsmTest, QuoteServiceFailureHintsAtQgs) {
  fake_->set_outblob_errno(EIO);
  auto provider = Provider();
  auto blob = provider.GetQuote(Pattern(0));
  ASSERT_FALSE(blob.ok());
  EXPECT_THAT(std::string(blob.status().message()),
              HasSubstr("quote generation service (QGS)"));
  EXPECT_THAT(ListDir(root_), IsEmpty());
}

TEST_F(ConfigfsTsmTest, ConcurrentRequestsGetTheirOwnReportData) {
  auto provider = Provider();
  constexpr int kThreads = 4;
  std::vector<absl::StatusOr<std::string>> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      results[i] = provider.GetQuote(Pattern(static_cast<uint8_t>(i * 50)));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    auto q = ParseQuote(*results[i]);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->body.report_data, Pattern(static_cast<uint8_t>(i * 50)));
  }
  EXPECT_THAT(ListDir(root_), IsEmpty());
}

TEST(PosixTsmFsTest, ReadsWritesAndReportsErrno) {
  std::string dir = MakeTestDir("tsm.");
  PosixTsmFs fs;
  const std::string sub = dir + "/report";
  EXPECT_EQ(fs.MakeDir(sub), 0);
  EXPECT_EQ(fs.MakeDir(sub), EEXIST);
  std::string contents;
  EXPECT_EQ(fs.ReadFile(sub + "/missing", &contents), ENOENT);
  // WriteFile does not create files: configfs attributes always exist.
  EXPECT_EQ(fs.WriteFile(sub + "/missing", "x"), ENOENT);
  {
    FILE* f = std::fopen((sub + "/inblob").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  std::string blob(64, '\0');
  blob[10] = '\x7f';
  EXPECT_EQ(fs.WriteFile(sub + "/inblob", blob), 0);
  EXPECT_EQ(fs.ReadFile(sub + "/inblob", &contents), 0);
  EXPECT_EQ(contents, blob);
  EXPECT_EQ(fs.RemoveDir(sub), ENOTEMPTY);
  ASSERT_EQ(std::remove((sub + "/inblob").c_str()), 0);
  EXPECT_EQ(fs.RemoveDir(sub), 0);
  EXPECT_EQ(fs.RemoveDir(sub), ENOENT);
}

TEST(ConfigfsTsmDefaultsTest, DefaultsAreTheKernelInterface) {
  ConfigfsTsmQuoteProvider provider;
  EXPECT_EQ(provider.options().root, "/sys/kernel/config/tsm/report");
  EXPECT_EQ(provider.options().expected_provider, "tdx_guest");
  ASSERT_NE(provider.options().fs, nullptr);
  EXPECT_NE(dynamic_cast<PosixTsmFs*>(provider.options().fs.get()), nullptr);
}

}  // namespace
}  // namespace gputravel::tdx
