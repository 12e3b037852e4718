#include "util/daemon.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace gputravel {

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

absl::Status CheckUnixSocketPathLength(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError("Unix socket path too long (max " +
                                      std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                                      " bytes, this one has " + std::to_string(path.size()) +
                                      "): " + path);
  }
  return absl::OkStatus();
}

absl::Status PrepareUnixSocketPath(const std::string& path) {
  absl::Status length = CheckUnixSocketPathLength(path);
  if (!length.ok()) return length;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(path + " exists and is not a socket");
    }
    // A socket something still answers on belongs to a live daemon:
    // replacing it would leave that daemon unreachable (and its exit would
    // delete ours). Only a socket nobody listens on (ECONNREFUSED) is stale.
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      return absl::UnavailableError("cannot check socket " + path + ": " +
                                    std::strerror(errno));
    }
    struct sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int rc = ::connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr));
    const int e = errno;
    ::close(fd);
    if (rc == 0) {
      return absl::FailedPreconditionError(
          "another daemon is serving " + path + "; stop it first, or give this one "
          "another listen path");
    }
    if (e != ECONNREFUSED) {
      return absl::FailedPreconditionError("cannot tell whether a daemon serves " + path +
                                           " (connect: " + std::strerror(e) +
                                           "); refusing to replace it");
    }
    if (::unlink(path.c_str()) != 0) {
      return absl::UnavailableError("cannot remove stale socket " + path + ": " +
                                    std::strerror(errno));
    }
  }
  return absl::OkStatus();
}

absl::Status SetUnixSocketMode(const std::string& path, mode_t mode) {
  if (::chmod(path.c_str(), mode) != 0) {
    char m[8];
    std::snprintf(m, sizeof(m), "%04o", static_cast<unsigned>(mode));
    return absl::UnavailableError("cannot set mode " + std::string(m) + " on socket " + path +
                                  ": " + std::strerror(errno));
  }
  return absl::OkStatus();
}

void ExitAfterShutdown(int code) {
  std::fflush(nullptr);
  ::_exit(code);
}

absl::StatusOr<std::string> AnnouncedAddress(const std::string& ready_text,
                                             const std::string& key) {
  const std::string tag = "\n" + key + " ";
  const size_t at = ready_text.find(tag);
  if (at == std::string::npos) {
    return absl::NotFoundError("no '" + key + "' address announced");
  }
  const size_t from = at + tag.size();
  return ready_text.substr(from, ready_text.find('\n', from) - from);
}

void AnnounceReady(const std::string& path, const std::vector<std::string>& served,
                   const std::string& metrics) {
  if (path.empty()) return;
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "ready\n";
    for (const auto& a : served) out << "listen " << a << "\n";
    if (!metrics.empty()) out << "metrics " << metrics << "\n";
  }
  ::rename(tmp.c_str(), path.c_str());
}

}  // namespace gputravel
