#include "util/daemon.h"

#include <signal.h>
#include <sys/stat.h>
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

absl::Status PrepareUnixSocketPath(const std::string& path) {
  if (path.size() >= 108) {
    return absl::InvalidArgumentError("Unix socket path too long (max 107 bytes): " +
                                      path);
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(path + " exists and is not a socket");
    }
    if (::unlink(path.c_str()) != 0) {
      return absl::UnavailableError("cannot remove stale socket " + path + ": " +
                                    std::strerror(errno));
    }
  }
  return absl::OkStatus();
}

void ExitAfterShutdown(int code) {
  std::fflush(nullptr);
  ::_exit(code);
}

void AnnounceReady(const std::string& path, const std::vector<std::string>& served) {
  if (path.empty()) return;
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "ready\n";
    for (const auto& a : served) out << "listen " << a << "\n";
  }
  ::rename(tmp.c_str(), path.c_str());
}

}  // namespace gputravel
