#include "util/private_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

TEST(RequirePrivateDirectoryTest, RefusesGroupOrOtherWritable) {
  const std::string d = MakeTestDir("pf-");
  for (mode_t m : {0700, 0750, 0755}) {
    ASSERT_EQ(::chmod(d.c_str(), m), 0);
    EXPECT_TRUE(RequirePrivateDirectory(d, "state_dir").ok()) << std::oct << m;
  }
  for (mode_t m : {0770, 0777, 0702, 01777}) {
    ASSERT_EQ(::chmod(d.c_str(), m), 0);
    absl::Status s = RequirePrivateDirectory(d, "state_dir");
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << std::oct << m;
    EXPECT_NE(s.message().find("state_dir " + d + " may be written by group or others"),
              std::string::npos) << s;
  }
  ASSERT_EQ(::chmod(d.c_str(), 0700), 0);
  EXPECT_FALSE(RequirePrivateDirectory(d + "/missing", "state_dir").ok());
}

// A directory another user owns is theirs to rewrite whatever its mode: a
// 0700 state directory of another account would hand them the daemon's state.
TEST(RequirePrivateDirectoryTest, RefusesAnotherUsersDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the directory away";
  const std::string d = MakeTestDir("pf-");
  ASSERT_EQ(::chmod(d.c_str(), 0700), 0);
  ASSERT_EQ(::chown(d.c_str(), 65534, 65534), 0);
  absl::Status s = RequirePrivateDirectory(d, "state_dir");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("is owned by uid 65534"), std::string::npos) << s;
  ASSERT_EQ(::chown(d.c_str(), 0, 0), 0);
  EXPECT_TRUE(RequirePrivateDirectory(d, "state_dir").ok());
}

// A file restored with a loose mode is made 0600; a missing one is created
// only when asked.
// A missing state directory is made, private; an existing private one is
// kept; a loose one is refused as RequirePrivateDirectory refuses it; one
// that cannot be made names itself.
TEST(MakePrivateStateDirectoryTest, MakesAMissingOneAndChecksAnyOne) {
  const std::string d = MakeTestDir("pf-");
  const std::string state = d + "/state";
  ASSERT_TRUE(MakePrivateStateDirectory(state + "/", "state_dir").ok());
  EXPECT_EQ(ModeOf(state), 0700u);
  ASSERT_TRUE(WriteFile(state + "/kept", "x").ok());
  EXPECT_TRUE(MakePrivateStateDirectory(state, "state_dir").ok());
  EXPECT_TRUE(ReadFile(state + "/kept").ok()) << "an existing directory is left as it is";
  ASSERT_EQ(::chmod(state.c_str(), 0777), 0);
  absl::Status loose = MakePrivateStateDirectory(state, "state_dir");
  EXPECT_EQ(loose.code(), absl::StatusCode::kFailedPrecondition) << loose;
  absl::Status missing = MakePrivateStateDirectory(d + "/no/such", "state_dir");
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition) << missing;
  EXPECT_NE(missing.message().find("cannot create state_dir " + d + "/no/such"),
            std::string::npos) << missing;
  ASSERT_TRUE(WriteFile(d + "/file", "x").ok());
  EXPECT_FALSE(MakePrivateStateDirectory(d + "/file", "state_dir").ok()) << "not a directory";
}

TEST(MakeFilePrivateTest, LooseModesBecome0600) {
  const std::string d = MakeTestDir("pf-");
  const std::string db = d + "/orchestrator.db";
  ASSERT_TRUE(WriteFile(db, "x", 0644).ok());
  ASSERT_EQ(::chmod(db.c_str(), 0644), 0);
  ASSERT_TRUE(MakeFilePrivate(db, /*create=*/false).ok());
  EXPECT_EQ(ModeOf(db), 0600u);
  auto text = ReadFile(db);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "x");  // contents untouched

  ASSERT_TRUE(MakeFilePrivate(d + "/absent-wal", /*create=*/false).ok());
  EXPECT_EQ(ModeOf(d + "/absent-wal"), 0u);
  ASSERT_TRUE(MakeFilePrivate(d + "/new.db", /*create=*/true).ok());
  EXPECT_EQ(ModeOf(d + "/new.db"), 0600u);

  // A symbolic link is not followed.
  ASSERT_EQ(::symlink(db.c_str(), (d + "/link").c_str()), 0);
  EXPECT_FALSE(MakeFilePrivate(d + "/link", /*create=*/false).ok());
}

TEST(PrivateFileDurablyTest, CreateNeverReplacesAndIsPrivate) {
  const std::string d = MakeTestDir("pf-");
  const std::string key = d + "/checkpoint.key";
  ::umask(022);
  ASSERT_TRUE(CreatePrivateFileDurably(key, "secret").ok());
  EXPECT_EQ(ModeOf(key), 0600u);
  EXPECT_EQ(*ReadFile(key), "secret");
  absl::Status again = CreatePrivateFileDurably(key, "other");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_EQ(*ReadFile(key), "secret");
  // Nor is anything written through a link, dangling or not.
  ASSERT_EQ(::symlink((d + "/elsewhere").c_str(), (d + "/dangling").c_str()), 0);
  EXPECT_EQ(CreatePrivateFileDurably(d + "/dangling", "x").code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_NE(::access((d + "/elsewhere").c_str(), F_OK), 0);
}

TEST(PrivateFileDurablyTest, ReplaceSwapsTheWholeFileAndIsPrivate) {
  const std::string d = MakeTestDir("pf-");
  const std::string f = d + "/freshness.json";
  ASSERT_TRUE(ReplacePrivateFileDurably(f, "one").ok());
  EXPECT_EQ(*ReadFile(f), "one");
  ASSERT_EQ(::chmod(f.c_str(), 0644), 0);
  // A leftover temporary file of a crash, with a loose mode, is reused at 0600.
  ASSERT_TRUE(WriteFile(f + ".tmp", "half", 0644).ok());
  ASSERT_TRUE(ReplacePrivateFileDurably(f, "two").ok());
  EXPECT_EQ(*ReadFile(f), "two");
  EXPECT_EQ(ModeOf(f), 0600u);
  EXPECT_NE(::access((f + ".tmp").c_str(), F_OK), 0);
  // A link planted at the temporary path is not written through.
  ASSERT_EQ(::symlink((d + "/target").c_str(), (f + ".tmp").c_str()), 0);
  absl::Status s = ReplacePrivateFileDurably(f, "three");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(f + ".tmp"), std::string::npos) << s;
  EXPECT_NE(::access((d + "/target").c_str(), F_OK), 0);
  EXPECT_EQ(*ReadFile(f), "two");
}

}  // namespace
}  // namespace gputravel
