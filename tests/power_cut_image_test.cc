// The power-cut model itself: a child process (this binary again, under
// tests/power_cut_preload.so) writes, syncs and renames files and dies; what
// Restore puts back is exactly what its syncs made durable.
#include "tests/power_cut_image.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "util/test_dir.h"

namespace gputravel {
namespace power_cut {
namespace {

constexpr char kChildEnv[] = "POWER_CUT_IMAGE_TEST_CHILD";

std::string Read(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return "<absent>";
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

// Child side: small steps on files in DIR; every call checked (a failure
// exits 3, which the parent sees as an exit rather than SIGKILL).
void Write(const std::string& path, const std::string& text, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    _exit(3);
  }
  if (sync && ::fdatasync(fd) != 0) _exit(3);
  ::close(fd);
}

void SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0 || ::fsync(fd) != 0) _exit(3);
  ::close(fd);
}

[[noreturn]] void RunChild(const std::string& scenario, const std::string& dir) {
  const std::string a = dir + "/t.a", b = dir + "/t.b", c = dir + "/t.c", s = dir + "/t.s";
  if (scenario == "unsynced") {
    Write(a, "a-new", false);           // durable at start as "a-old": the write is lost
    Write(c, "c-synced", true);
    SyncDir(dir);                       // c's entry is durable now
    Write(b, "b-synced", true);         // synced, but its entry never was: gone
    Write(c, "c-later", false);         // lost
    Write(dir + "/untracked", "u", true);  // not tracked: not counted, kept
    Write(s + ".tmp", "s-new", true);   // a replacement synced, renamed, dir not synced
    if (::rename((s + ".tmp").c_str(), s.c_str()) != 0) _exit(3);
  } else if (scenario == "renamed") {
    Write(s + ".tmp", "s-new", true);
    if (::rename((s + ".tmp").c_str(), s.c_str()) != 0) _exit(3);
    SyncDir(dir);
  } else if (scenario == "cut") {
    Write(a, "a-1", true);  // sync 1
    Write(a, "a-2", true);  // sync 2: the power is cut before it is done
    _exit(4);               // not reached
  }
  ::kill(::getpid(), SIGKILL);
  _exit(5);
}

// When this binary is the child, it runs its scenario before gtest starts.
const bool kIsChild = [] {
  const char* v = getenv(kChildEnv);
  if (v != nullptr) {
    const std::string s(v);
    const size_t colon = s.find(':');
    RunChild(s.substr(0, colon), s.substr(colon + 1));
  }
  return false;
}();

class PowerCutImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestTmpDir() + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(::system(("rm -rf " + dir_ + " && mkdir -p " + dir_ + "/data " + dir_ +
                        "/shadow").c_str()),
              0);
    config_.shadow = dir_ + "/shadow";
    config_.prefixes = {dir_ + "/data/t."};
  }

  // Runs `scenario` in a child under the preload; returns its wait status.
  int RunUnderPreload(const std::string& scenario) {
    return RunSelfUnderPowerCut(config_, kChildEnv, scenario + ":" + dir_ + "/data");
  }

  std::string dir_;
  Config config_;
};

TEST_F(PowerCutImageTest, ConfigRoundTrips) {
  Config c;
  c.shadow = "/s";
  c.prefixes = {"/a/x.", "/b/y"};
  c.cut_at = 7;
  Config back;
  std::string error;
  ASSERT_TRUE(ParseConfig(FormatConfig(c), &back, &error)) << error;
  EXPECT_EQ(back.shadow, "/s");
  EXPECT_EQ(back.prefixes, c.prefixes);
  EXPECT_EQ(back.cut_at, 7);
  EXPECT_FALSE(ParseConfig("cut=x;shadow=/s;track=/a", &back, &error));
  EXPECT_FALSE(ParseConfig("cut=1;shadow=/s;track=relative", &back, &error));
  EXPECT_FALSE(ParseConfig("cut=1;track=/a", &back, &error));
}

TEST_F(PowerCutImageTest, OnlySyncedDataAndSyncedEntriesSurvive) {
  const std::string data = dir_ + "/data";
  ASSERT_EQ(::system(("printf a-old > " + data + "/t.a && printf s-old > " + data + "/t.s")
                         .c_str()),
            0);
  const int status = RunUnderPreload("unsynced");
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
  ASSERT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(Read(data + "/t.a"), "a-new");  // before the cut, the kernel has it
  std::string error;
  ASSERT_TRUE(Restore(config_, &error)) << error;
  EXPECT_EQ(Read(data + "/t.a"), "a-old");
  EXPECT_EQ(Read(data + "/t.b"), "<absent>");
  EXPECT_EQ(Read(data + "/t.c"), "c-synced");
  EXPECT_EQ(Read(data + "/t.s"), "s-old") << "a rename without a directory sync is undone";
  EXPECT_EQ(Read(data + "/t.s.tmp"), "<absent>");
  EXPECT_EQ(Read(data + "/untracked"), "u");
  // c, the directory, b, s.tmp: the untracked file is not counted.
  const auto log = ReadSyncLog(config_.shadow);
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].n, 1);
  EXPECT_EQ(log[0].path, data + "/t.c");
  EXPECT_EQ(log[1].path, data);
  EXPECT_EQ(log[2].path, data + "/t.b");
  EXPECT_EQ(CutAt(config_.shadow).n, 0);
}

TEST_F(PowerCutImageTest, ASyncedRenameSurvives) {
  const std::string data = dir_ + "/data";
  ASSERT_EQ(::system(("printf s-old > " + data + "/t.s").c_str()), 0);
  const int status = RunUnderPreload("renamed");
  ASSERT_TRUE(WIFSIGNALED(status));
  std::string error;
  ASSERT_TRUE(Restore(config_, &error)) << error;
  EXPECT_EQ(Read(data + "/t.s"), "s-new");
  EXPECT_EQ(Read(data + "/t.s.tmp"), "<absent>");
}

TEST_F(PowerCutImageTest, TheCutSyncIsNeverDone) {
  const std::string data = dir_ + "/data";
  ASSERT_EQ(::system(("printf a-0 > " + data + "/t.a").c_str()), 0);
  config_.cut_at = 2;
  const int status = RunUnderPreload("cut");
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
  ASSERT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(CutAt(config_.shadow).n, 2);
  EXPECT_EQ(CutAt(config_.shadow).path, data + "/t.a");
  EXPECT_EQ(ReadSyncLog(config_.shadow).size(), 2u);
  std::string error;
  ASSERT_TRUE(Restore(config_, &error)) << error;
  EXPECT_EQ(Read(data + "/t.a"), "a-1");
}

}  // namespace
}  // namespace power_cut
}  // namespace gputravel
