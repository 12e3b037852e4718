#include "util/daemon.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

// A fresh directory per path, short enough for a Unix socket path.
std::string TempPath(const std::string& name) {
  return MakeSocketTestDir("gputravel-daemon-test-") + "/" + name;
}

// A Unix socket bound at `path`, listening when `listen` is set.
int BindSocket(const std::string& path, bool listen) {
  struct sockaddr_un addr = {};
  if (path.size() >= sizeof(addr.sun_path)) return -1;
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (fd < 0 || ::bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0 ||
      (listen && ::listen(fd, 4) != 0)) {
    return -1;
  }
  return fd;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// A socket a live daemon listens on is never replaced: the refusal names it,
// and the socket is still there afterwards.
TEST(PrepareUnixSocketPathTest, RefusesASocketThatADaemonServes) {
  const std::string path = TempPath("live.sock");
  int live = BindSocket(path, /*listen=*/true);
  ASSERT_GE(live, 0) << std::strerror(errno);
  absl::Status s = PrepareUnixSocketPath(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("another daemon is serving " + path), std::string::npos) << s;
  EXPECT_TRUE(Exists(path));
  ::close(live);
}

// A socket nobody listens on any more (its daemon died) is stale: removed.
TEST(PrepareUnixSocketPathTest, RemovesAStaleSocket) {
  const std::string path = TempPath("stale.sock");
  int dead = BindSocket(path, /*listen=*/false);
  ASSERT_GE(dead, 0) << std::strerror(errno);
  ::close(dead);  // the file stays behind, as after a crash
  ASSERT_TRUE(Exists(path));
  absl::Status s = PrepareUnixSocketPath(path);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_FALSE(Exists(path));
  // Nothing there at all is fine too.
  EXPECT_TRUE(PrepareUnixSocketPath(path).ok());
}

TEST(PrepareUnixSocketPathTest, RefusesWhatIsNotASocket) {
  const std::string path = TempPath("plain-file");
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  absl::Status s = PrepareUnixSocketPath(path);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(Exists(path));
}

// The ready file: "ready", each address served, then where metrics are.
TEST(AnnounceReadyTest, ListsTheAddressesServedAndTheMetricsEndpoint) {
  const std::string path = TempPath("ready");
  AnnounceReady(path, {"127.0.0.1:4242", "unix:/run/x.sock"}, "127.0.0.1:9100");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "ready\nlisten 127.0.0.1:4242\nlisten unix:/run/x.sock\nmetrics 127.0.0.1:9100\n");
  EXPECT_EQ(*AnnouncedAddress(text.str(), "listen"), "127.0.0.1:4242");
  EXPECT_EQ(*AnnouncedAddress(text.str(), "metrics"), "127.0.0.1:9100");
  AnnounceReady(path, {"127.0.0.1:4242"});
  std::ifstream again(path);
  std::stringstream without;
  without << again.rdbuf();
  EXPECT_EQ(without.str(), "ready\nlisten 127.0.0.1:4242\n");
  EXPECT_EQ(AnnouncedAddress(without.str(), "metrics").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gputravel
