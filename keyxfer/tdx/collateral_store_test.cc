#include "keyxfer/tdx/collateral_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/collateral.h"
#include "keyxfer/tdx/testdata.h"
#include "nlohmann/json.hpp"
#include "util/test_dir.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;

constexpr std::array<uint8_t, 6> kUpToDateFmspc = {0xB0, 0xC0, 0x6F, 0, 0, 0};
constexpr std::array<uint8_t, 6> kOutdatedFmspc = {0x90, 0xC0, 0x6F, 0, 0, 0};

std::string TempDir(const std::string& name) {
  std::string dir = TestTmpDir() + "/" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

void Write(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0);
}

TEST(CollateralStoreTest, OneFile) {
  std::string dir = TempDir("one");
  Write(dir + "/b.json", testing::DcapQuoteCollateral());
  auto store = CollateralStore::Open(dir + "/b.json");
  ASSERT_TRUE(store.ok()) << store.status();
  auto b = (*store)->ForFmspc(kUpToDateFmspc);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT((*b)->tcb_info, HasSubstr("B0C06F000000"));
  auto other = (*store)->ForFmspc(kOutdatedFmspc);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr("no bundle for FMSPC 90C06F000000 (holds: "
                        "B0C06F000000)"));
}

TEST(CollateralStoreTest, DirectoryIsRereadWhenItChanges) {
  std::string dir = TempDir("dir");
  Write(dir + "/a.json", testing::DcapQuoteCollateral());
  auto store = CollateralStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->ForFmspc(kUpToDateFmspc).ok());
  EXPECT_FALSE((*store)->ForFmspc(kOutdatedFmspc).ok());

  // A second platform's bundle appears: found without reopening.
  Write(dir + "/b.json", testing::DcapOutdatedQuoteCollateral());
  EXPECT_TRUE((*store)->ForFmspc(kOutdatedFmspc).ok());

  // A file replaced by a rename (new inode) with other content is reread.
  Write(dir + "/a.json", testing::DcapOutdatedQuoteCollateral());
  auto gone = (*store)->ForFmspc(kUpToDateFmspc);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);

  // A broken file is named, and does not hide the good ones.
  Write(dir + "/c.json", "{not json");
  auto missing = (*store)->ForFmspc(kUpToDateFmspc);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("c.json: TDX collateral: invalid JSON at byte 3: "));
  EXPECT_TRUE((*store)->ForFmspc(kOutdatedFmspc).ok());
}

// An older bundle for the same platform left beside a refreshed one is not
// used, whichever name sorts last.
TEST(CollateralStoreTest, NewestBundleOfAPlatformWins) {
  std::string dir = TempDir("dup");
  const std::string fresh = testing::DcapQuoteCollateral();
  auto b = ParseCollateralBundle(fresh, "test");
  ASSERT_TRUE(b.ok()) << b.status();
  nlohmann::json tcb = nlohmann::json::parse(b->tcb_info);
  tcb["issueDate"] = "2025-05-01T00:00:00Z";
  tcb["tcbEvaluationDataNumber"] =
      tcb["tcbEvaluationDataNumber"].get<int>() - 1;
  nlohmann::json stale = nlohmann::json::parse(fresh);
  stale["tcb_info"] = tcb.dump();
  Write(dir + "/a-fresh.json", fresh);
  Write(dir + "/z-stale.json", stale.dump());
  auto store = CollateralStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  auto got = (*store)->ForFmspc(kUpToDateFmspc);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)->tcb_info, b->tcb_info);
}

TEST(CollateralStoreTest, MissingPathAndBrokenFileFailToOpen) {
  EXPECT_EQ(CollateralStore::Open("/nonexistent/collateral").status().code(),
            absl::StatusCode::kNotFound);
  std::string dir = TempDir("broken");
  Write(dir + "/x.json", "[]");
  auto s = CollateralStore::Open(dir + "/x.json");
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("x.json: TDX collateral is not a JSON object"));
}

}  // namespace
}  // namespace gputravel::tdx
