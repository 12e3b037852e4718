#include "util/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace gputravel {

Subprocess::~Subprocess() { Terminate(3000); }

absl::Status Subprocess::Start(const std::vector<std::string>& argv,
                               const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  if (::access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError("cannot execute " + argv[0] + ": " + std::strerror(errno));
  }
  int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) {
    return absl::UnavailableError("cannot open log " + log_path + ": " + std::strerror(errno));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return absl::ResourceExhaustedError("fork failed: " + std::string(std::strerror(errno)));
  }
  if (pid == 0) {
    // Child: its own signal mask (the parent may block SIGTERM), logs, exec.
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    ::dup2(log, 1);
    ::dup2(log, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execv(args[0], args.data());
    _exit(127);
  }
  ::close(log);
  pid_ = pid;
  status_ = -1;
  return absl::OkStatus();
}

bool Subprocess::Running() {
  if (pid_ <= 0) return false;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    status_ = st;
    pid_ = -1;
    return false;
  }
  return r == 0;
}

int Subprocess::Terminate(int grace_ms) {
  if (!Running()) return status_;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!Running()) return status_;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Kill();
  return status_;
}

void Subprocess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  status_ = st;
  pid_ = -1;
}

absl::Status WaitForFile(const std::string& path, Subprocess* process,
                         const std::string& what, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (::access(path.c_str(), F_OK) == 0) return absl::OkStatus();
    if (process != nullptr && !process->Running()) {
      return absl::UnavailableError(what + " exited during start-up");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::DeadlineExceededError(what + " did not become ready within " +
                                     std::to_string(timeout_ms / 1000) + " s");
}

std::string LogTail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

}  // namespace gputravel
