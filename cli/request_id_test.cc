#include "cli/request_id.h"

#include <set>

#include "gtest/gtest.h"

namespace gputravel::cli {
namespace {

TEST(RequestIdTest, IsAVersion4Uuid) {
  for (int i = 0; i < 32; ++i) {
    const std::string id = RandomRequestId();
    ASSERT_EQ(id.size(), 36u) << id;
    for (size_t k : {8, 13, 18, 23}) EXPECT_EQ(id[k], '-') << id;
    EXPECT_EQ(id[14], '4') << id;
    EXPECT_NE(std::string("89ab").find(id[19]), std::string::npos) << id;
    for (size_t k = 0; k < id.size(); ++k) {
      if (k == 8 || k == 13 || k == 18 || k == 23) continue;
      EXPECT_NE(std::string("0123456789abcdef").find(id[k]), std::string::npos) << id;
    }
  }
}

TEST(RequestIdTest, DiffersEachTime) {
  std::set<std::string> seen;
  for (int i = 0; i < 64; ++i) seen.insert(RandomRequestId());
  EXPECT_EQ(seen.size(), 64u);
}

}  // namespace
}  // namespace gputravel::cli
