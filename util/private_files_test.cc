#include "util/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
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

// Runs `act(dirfd)` in a child process as another user (uid and gid 65534),
// on `dir` opened by this process (the other user need not reach it by
// path); true if `act` returned true there. Needs root.
bool AsAnotherUserIn(const std::string& dir, const std::function<bool(int)>& act) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return false;
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    ::_exit(act(dfd) ? 0 : 1);
  }
  ::close(dfd);
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid) return false;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// Whoever may write the directory that holds state_dir may rename state_dir
// away (it needs no right on state_dir itself): the daemon's next start then
// makes a new, empty state_dir and takes it, and the holder's freshness
// record (the last trip it accepted) is gone, so it accepts an older
// hand-off once more. The check must cover the path to state_dir, not only
// its last component.
TEST(MakePrivateStateDirectoryTest, RefusesAStateDirOthersCanMoveAside) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  const std::string d = MakeTestDir("pf-");
  ASSERT_EQ(::chmod(d.c_str(), 0755), 0);
  const std::string shared = d + "/shared";  // e.g. a group-shared /srv/data
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  const std::string state = shared + "/state";
  absl::Status first = MakePrivateStateDirectory(state, "state_dir");
  EXPECT_FALSE(first.ok()) << "state_dir " << state << " was accepted though its parent "
                           << shared << " is mode 0777";
  if (!first.ok()) return;
  ASSERT_TRUE(WriteFile(state + "/freshness.json", "{\"trip\": 10}").ok());
  ASSERT_TRUE(AsAnotherUserIn(shared, [](int dfd) {
    return ::renameat(dfd, "state", dfd, "aside") == 0;
  })) << "another user could not move state_dir aside";
  absl::Status restart = MakePrivateStateDirectory(state, "state_dir");
  EXPECT_FALSE(restart.ok() && !ReadFile(state + "/freshness.json").ok())
      << "another user moved state_dir aside and the restart took a new, empty one: the "
         "freshness record is gone";
}

// An old copy of a daemon's state in `d`, its user's and 0700, as a backup
// would be: a state directory an attacker would like the daemon to run on
// (its freshness record rolled back).
std::string OldCopyOfState(const std::string& d) {
  const std::string old_copy = d + "/state-backup";
  EXPECT_EQ(::mkdir(old_copy.c_str(), 0700), 0);
  EXPECT_TRUE(WriteFile(old_copy + "/freshness.json", "{\"trip\": 5}").ok());
  return old_copy;
}

// A world-writable sticky directory (/tmp's kind) keeps others from moving
// an entry of this user's, not from planting one before the first start: a
// symbolic link to a directory that passes the check, such as an old copy
// of this daemon's own state. Such a link is refused.
TEST(MakePrivateStateDirectoryTest, RefusesALinkAnotherUserPlanted) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  const std::string d = MakeTestDir("pf-");
  ASSERT_EQ(::chmod(d.c_str(), 0755), 0);
  const std::string old_copy = OldCopyOfState(d);
  const std::string tmp = d + "/tmp";
  ASSERT_EQ(::mkdir(tmp.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(tmp.c_str(), 01777), 0);
  ASSERT_TRUE(AsAnotherUserIn(tmp, [&](int dfd) {
    return ::symlinkat(old_copy.c_str(), dfd, "state") == 0;
  })) << "another user could not plant a link";
  absl::Status s = MakePrivateStateDirectory(tmp + "/state", "state_dir");
  EXPECT_FALSE(s.ok()) << "state_dir " << tmp << "/state, a link another user (uid 65534) "
                       << "planted, was accepted: the daemon would run on " << old_copy;
}

// What the path check lets through: a sticky world-writable directory above
// (/tmp's kind: others cannot move this user's entries), a link this user
// made, and a relative path.
TEST(MakePrivateStateDirectoryTest, StickyParentsOwnLinksAndRelativePathsAreFine) {
  const std::string d = MakeTestDir("pf-");
  ASSERT_EQ(::chmod(d.c_str(), 0755), 0);
  const std::string tmp = d + "/tmp";
  ASSERT_EQ(::mkdir(tmp.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(tmp.c_str(), 01777), 0);
  EXPECT_TRUE(MakePrivateStateDirectory(tmp + "/state", "state_dir").ok());
  ASSERT_EQ(::symlink((tmp + "/state").c_str(), (d + "/mine").c_str()), 0);
  EXPECT_TRUE(MakePrivateStateDirectory(d + "/mine", "state_dir").ok());
  ASSERT_EQ(::chmod(tmp.c_str(), 0777), 0);
  absl::Status loose = MakePrivateStateDirectory(d + "/mine", "state_dir");
  EXPECT_NE(loose.message().find(tmp + ", on the way to state_dir " + d + "/mine, may be written by "
                                       "group or others"),
            std::string::npos)
      << loose;
  ASSERT_EQ(::chmod(tmp.c_str(), 01777), 0);
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(tmp.c_str()), 0);
  absl::Status relative = MakePrivateStateDirectory("state", "state_dir");
  ASSERT_EQ(::chdir(cwd), 0);
  EXPECT_TRUE(relative.ok()) << relative;
}

// A path through a directory others may write, before a "..", is refused:
// here shared/sub, in a directory everyone may write. Anyone could replace
// shared/sub with a link, and the same state_dir string would then name
// another directory (".." after a link climbs from the link's target), e.g.
// an old copy of the state.
TEST(MakePrivateStateDirectoryTest, RefusesAPathThroughADirectoryOthersMayWriteBeforeADotDot) {
  const std::string d = MakeTestDir("pf-");
  ASSERT_EQ(::chmod(d.c_str(), 0755), 0);
  const std::string shared = d + "/shared";  // e.g. a group-shared /srv/data
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  ASSERT_EQ(::mkdir((shared + "/sub").c_str(), 0755), 0);
  const std::string state = d + "/state";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  ASSERT_TRUE(WriteFile(state + "/freshness.json", "{\"trip\": 10}").ok());
  const std::string via = shared + "/sub/../../state";
  absl::Status s = MakePrivateStateDirectory(via, "state_dir");
  EXPECT_FALSE(s.ok()) << "state_dir " << via << " was accepted though it goes through "
                       << shared << "/sub, which anyone may replace (" << shared
                       << " is mode 0777)";
  if (!s.ok()) return;
  // What anyone may do next: an old copy of the state, reached by the same
  // string once shared/sub is a link to a directory one level below it.
  const std::string old_copy = d + "/old";
  ASSERT_EQ(::mkdir(old_copy.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((old_copy + "/x").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((old_copy + "/x/y").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((old_copy + "/state").c_str(), 0700), 0);
  ASSERT_TRUE(WriteFile(old_copy + "/state/freshness.json", "{\"trip\": 5}").ok());
  ASSERT_EQ(::rename((shared + "/sub").c_str(), (shared + "/aside").c_str()), 0);
  ASSERT_EQ(::symlink((old_copy + "/x/y").c_str(), (shared + "/sub").c_str()), 0);
  EXPECT_EQ(*ReadFile(via + "/freshness.json"), "{\"trip\": 5}")
      << "(the same state_dir string still names " << state << ")";
}

// A link of this user's on the path is followed, and what it points through
// is checked as the path is: here another user's link, in a directory of
// theirs, to an old copy of this daemon's own state, which they could
// repoint at any time. (The kernel's fs.protected_symlinks, where enabled,
// only covers sticky world-writable directories.)
TEST(MakePrivateStateDirectoryTest, RefusesAnotherUsersLinkBehindALinkOfThisUsers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  const std::string d = MakeTestDir("pf-");
  ASSERT_EQ(::chmod(d.c_str(), 0755), 0);
  const std::string old_copy = OldCopyOfState(d);
  const std::string theirs = d + "/theirs";  // e.g. their home directory
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
  ASSERT_TRUE(AsAnotherUserIn(theirs, [&](int dfd) {
    return ::symlinkat(old_copy.c_str(), dfd, "state") == 0;
  })) << "another user could not make a link in their own directory";
  const std::string mine = d + "/state";  // this user's link
  ASSERT_EQ(::symlink((theirs + "/state").c_str(), mine.c_str()), 0);
  absl::Status s = MakePrivateStateDirectory(mine, "state_dir");
  EXPECT_FALSE(s.ok()) << "state_dir " << mine << " goes through " << theirs
                       << "/state, a link uid 65534 made, and was accepted: the daemon runs on "
                       << old_copy << " for as long as that user wants";
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
  // A leftover temporary file of a crash, with a loose mode, is removed and
  // made anew at 0600.
  ASSERT_TRUE(WriteFile(f + ".tmp", "half", 0644).ok());
  ASSERT_TRUE(ReplacePrivateFileDurably(f, "two").ok());
  EXPECT_EQ(*ReadFile(f), "two");
  EXPECT_EQ(ModeOf(f), 0600u);
  EXPECT_NE(::access((f + ".tmp").c_str(), F_OK), 0);
  // A link planted at the temporary path is removed, not written through.
  ASSERT_EQ(::symlink((d + "/target").c_str(), (f + ".tmp").c_str()), 0);
  absl::Status s = ReplacePrivateFileDurably(f, "three");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_NE(::access((d + "/target").c_str(), F_OK), 0);
  EXPECT_EQ(*ReadFile(f), "three");
  struct stat st;
  ASSERT_EQ(::lstat(f.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

// Another user's leftover `path`.tmp (planted while the directory was
// loose; the chmod 700 a refusal advises keeps it) is never written into: a
// daemon running as root could otherwise write its state into an inode that
// user owns and reads through another link.
TEST(PrivateFileDurablyTest, ReplaceNeverWritesIntoAnotherUsersLeftoverTmp) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file away";
  const std::string d = MakeTestDir("pf-");
  ASSERT_EQ(::chmod(d.c_str(), 0700), 0);
  const std::string path = d + "/freshness.json";
  ASSERT_TRUE(WriteFile(path + ".tmp", "", 0600).ok());
  ASSERT_EQ(::chown((path + ".tmp").c_str(), 65534, 65534), 0);
  const std::string theirs = MakeTestDir("pf-") + "/theirs";  // their other link
  ASSERT_EQ(::link((path + ".tmp").c_str(), theirs.c_str()), 0);
  ASSERT_TRUE(ReplacePrivateFileDurably(path, "{\"trip\": 10}").ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid()) << path << " is now an inode uid " << st.st_uid << " owns";
  EXPECT_NE(*ReadFile(theirs), "{\"trip\": 10}")
      << "what was written to " << path << " is readable through another user's link "
      << theirs;
}

}  // namespace
}  // namespace gputravel
