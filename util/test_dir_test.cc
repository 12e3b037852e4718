#include "util/test_dir.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

bool IsPrivateDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700;
}

TEST(TestDirTest, MakesFreshPrivateDirectoriesUnderTestTmpdir) {
  const std::string a = MakeTestDir("t-"), b = MakeTestDir("t-");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind(TestTmpDir() + "/t-", 0), 0u) << a;
  EXPECT_TRUE(IsPrivateDir(a)) << a;
}

// Under Bazel TEST_TMPDIR is set; outside it, /tmp.
TEST(TestDirTest, FallsBackToTmpWithoutTestTmpdir) {
  const std::string saved = TestTmpDir();
  ::unsetenv("TEST_TMPDIR");
  EXPECT_EQ(TestTmpDir(), "/tmp");
  ::setenv("TEST_TMPDIR", saved.c_str(), 1);
  EXPECT_EQ(TestTmpDir(), saved);
}

// A socket directory leaves room for the names inside, whatever TEST_TMPDIR's
// length; one that is short enough is used.
TEST(TestDirTest, SocketDirectoriesLeaveRoomForSocketNames) {
  const std::string saved = TestTmpDir();
  const size_t max = sizeof(sockaddr_un{}.sun_path) - 1;
  const std::string dir = MakeSocketTestDir("s-");
  EXPECT_LE(dir.size() + kSocketNameRoom, max) << dir;
  EXPECT_TRUE(IsPrivateDir(dir)) << dir;
  const std::string short_base = MakeSocketTestDir("b-");  // short enough to be a base
  ::setenv("TEST_TMPDIR", short_base.c_str(), 1);
  EXPECT_EQ(MakeSocketTestDir("s-").rfind(short_base + "/s-", 0), 0u);
  ::setenv("TEST_TMPDIR", (short_base + "/" + std::string(80, 'x')).c_str(), 1);
  EXPECT_EQ(MakeSocketTestDir("s-").rfind("/tmp/s-", 0), 0u);
  ::setenv("TEST_TMPDIR", saved.c_str(), 1);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::remove_all(short_base, ec);
}

TEST(TestDirTest, TempDirIsRemovedWithItsContents) {
  std::string path;
  {
    TempDir d;
    path = d.path();
    ASSERT_TRUE(IsPrivateDir(path));
    ASSERT_EQ(::mkdir((path + "/sub").c_str(), 0700), 0);
  }
  struct stat st;
  EXPECT_NE(::stat(path.c_str(), &st), 0) << path;
}

}  // namespace
}  // namespace gputravel
