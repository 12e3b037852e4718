#include "util/files.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(DirectoryOfTest, TheDirectoryANameIsIn) {
  EXPECT_EQ(DirectoryOf("/var/lib/gputravel/state.db"), "/var/lib/gputravel");
  EXPECT_EQ(DirectoryOf("/state.db"), "/");
  EXPECT_EQ(DirectoryOf("state.db"), ".");
  EXPECT_EQ(DirectoryOf("run/state.db"), "run");
  EXPECT_EQ(DirectoryOf("/var/lib/gputravel/"), "/var/lib/gputravel");
}

}  // namespace
}  // namespace gputravel
