// A bounce ring's creation reserves its memory: on a full tmpfs it fails with
// RESOURCE_EXHAUSTED instead of handing out a sparse mapping whose first
// write kills the holder with SIGBUS.
#include "device/bounce_buffer.h"

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

bool WriteProcFile(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

// Exit codes of the child below.
constexpr int kRefused = 0;        // RESOURCE_EXHAUSTED, as it should be
constexpr int kCreated = 1;        // the ring was handed out
constexpr int kOtherError = 2;     // refused with another code
constexpr int kNoNamespace = 77;   // this machine gives no user namespace

TEST(BounceBufferTest, RingThatDoesNotFitIsRefusedNotMappedSparse) {
  const std::string dir = MakeTestDir("gputravel-tinyfs-");
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A private 1 MiB tmpfs, mounted in a user and mount namespace of our
    // own (no privilege needed, nothing outside sees it).
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(kNoNamespace);
    if (!WriteProcFile("/proc/self/setgroups", "deny") ||
        !WriteProcFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1") ||
        !WriteProcFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) {
      ::_exit(kNoNamespace);
    }
    if (::mount("none", dir.c_str(), "tmpfs", 0, "size=1m") != 0) ::_exit(kNoNamespace);
    // 4 slots of 2 MiB: 8 MiB and the tags, on 1 MiB.
    auto ring = BounceBuffer::Create(dir + "/ring", 4, 2u << 20);
    if (ring.ok()) ::_exit(kCreated);
    if (ring.status().code() != absl::StatusCode::kResourceExhausted) ::_exit(kOtherError);
    // And it left no file behind.
    if (::access((dir + "/ring").c_str(), F_OK) == 0) ::_exit(kOtherError);
    ::_exit(kRefused);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::rmdir(dir.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == kNoNamespace) {
    GTEST_SKIP() << "no unprivileged user and mount namespace here to mount a small tmpfs";
  }
  EXPECT_EQ(WEXITSTATUS(status), kRefused)
      << (WEXITSTATUS(status) == kCreated ? "a ring larger than its filesystem was handed out"
                                          : "refused with another code, or left its file");
}

TEST(BounceBufferTest, CreatedRingHasItsSlotsAndTagAreaMapped) {
  const std::string dir = MakeTestDir("gputravel-ring-");
  {
    auto ring = BounceBuffer::Create(dir + "/ring", 3, 4096);
    ASSERT_TRUE(ring.ok()) << ring.status();
    EXPECT_EQ((*ring)->slots(), 3u);
    EXPECT_EQ((*ring)->slot_size(), 4096u);
    for (uint32_t s = 0; s < 3; ++s) {
      (*ring)->slot(s)[4095] = 1;  // every slot is writable memory
      (*ring)->tag(s)[15] = 1;
    }
    EXPECT_EQ((*ring)->tag_offset(0), 3u * 4096);
    EXPECT_FALSE(BounceBuffer::Create(dir + "/ring", 3, 4096).ok()) << "never reused";
  }
  EXPECT_NE(::access((dir + "/ring").c_str(), F_OK), 0) << "removed with its owner";
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace gputravel
