#include "cli/user_path.h"

#include <stdlib.h>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(UserPathTest, RelativeToWhereBazelRunStartedElseTheWorkingDirectory) {
  EXPECT_EQ(UserPath("/abs/dir"), "/abs/dir");
  ::setenv("BUILD_WORKING_DIRECTORY", "/home/alice/src", 1);
  EXPECT_EQ(UserPath("gt"), "/home/alice/src/gt");
  ::unsetenv("BUILD_WORKING_DIRECTORY");
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  EXPECT_EQ(UserPath("gt"), std::string(cwd) + "/gt");
}

}  // namespace
}  // namespace gputravel
