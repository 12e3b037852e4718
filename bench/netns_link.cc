#include "bench/netns_link.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace gputravel {
namespace bench {
namespace {

constexpr char kPrefix[] = "gtbench-";
constexpr char kHolderVeth[] = "gtb-h";
constexpr char kOrchestratorVeth[] = "gtb-o";

// What the signal handler deletes: fixed buffers, as a handler may use only
// async-signal-safe calls (fork, execve, waitpid, _exit).
char g_ip_path[64];
char g_ns[2][64];

void DeleteOnSignal(int sig) {
  for (char* ns : g_ns) {
    if (ns[0] == '\0' || g_ip_path[0] == '\0') continue;
    pid_t pid = fork();
    if (pid == 0) {
      char arg0[] = "ip", arg1[] = "netns", arg2[] = "delete";
      char* argv[] = {arg0, arg1, arg2, ns, nullptr};
      char* envp[] = {nullptr};
      execve(g_ip_path, argv, envp);
      _exit(127);
    }
    if (pid > 0) waitpid(pid, nullptr, 0);
  }
  _exit(128 + sig);
}

void CopyName(const std::string& s, char* dst) {
  std::snprintf(dst, 64, "%s", s.c_str());
}

// Namespaces "gtbench-<pid>-x" whose process no longer runs.
void DeleteStale() {
  std::string list;
  if (!RunCommand({"ip", "netns", "list"}, &list).ok()) return;
  std::istringstream in(list);
  std::string line;
  while (std::getline(in, line)) {
    std::string name = line.substr(0, line.find(' '));
    if (name.rfind(kPrefix, 0) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + sizeof(kPrefix) - 1));
    if (pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)) continue;
    (void)RunCommand({"ip", "netns", "delete", name});
  }
}

}  // namespace

std::string IpBinary() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "ip";
}

absl::Status RunCommand(const std::vector<std::string>& argv, std::string* out) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::InternalError("pipe failed");
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return absl::InternalError("fork failed");
  }
  // Both pipes drained in turn: the commands here write little to stderr.
  std::string stdout_text, stderr_text;
  char buf[4096];
  ssize_t n;
  while ((n = read(out_pipe[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) stdout_text.append(buf, n);
  }
  while ((n = read(err_pipe[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) stderr_text.append(buf, n);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (out != nullptr) *out = stdout_text;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    if (stderr_text.size() > 500) stderr_text = stderr_text.substr(stderr_text.size() - 500);
    while (!stderr_text.empty() && stderr_text.back() == '\n') stderr_text.pop_back();
    return absl::FailedPreconditionError(
        "`" + cmd + "` failed (" +
        (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status)) : "killed") +
        "): " + stderr_text);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NetnsLink>> NetnsLink::Create() {
  if (geteuid() != 0) {
    return absl::PermissionDeniedError(
        "the network baseline makes network namespaces and traffic control: run it as root");
  }
  DeleteStale();
  std::unique_ptr<NetnsLink> link(new NetnsLink());
  const std::string base = kPrefix + std::to_string(getpid());
  link->holder_ns_ = base + "-h";
  link->orchestrator_ns_ = base + "-o";
  // Registered before anything exists, so a signal during set-up cleans up.
  CopyName(link->holder_ns_, g_ns[0]);
  CopyName(link->orchestrator_ns_, g_ns[1]);
  const std::string& h = link->holder_ns_;
  const std::string& o = link->orchestrator_ns_;
  const std::vector<std::vector<std::string>> steps = {
      {"ip", "netns", "add", h},
      {"ip", "netns", "add", o},
      {"ip", "link", "add", kHolderVeth, "netns", h, "type", "veth", "peer", "name",
       kOrchestratorVeth, "netns", o},
      {"ip", "-n", h, "addr", "add", std::string(kHolderAddress) + "/30", "dev", kHolderVeth},
      {"ip", "-n", o, "addr", "add", std::string(kOrchestratorAddress) + "/30", "dev",
       kOrchestratorVeth},
      {"ip", "-n", h, "link", "set", "lo", "up"},
      {"ip", "-n", o, "link", "set", "lo", "up"},
      {"ip", "-n", h, "link", "set", kHolderVeth, "up"},
      {"ip", "-n", o, "link", "set", kOrchestratorVeth, "up"},
  };
  for (const auto& step : steps) {
    absl::Status s = RunCommand(step);
    if (!s.ok()) {
      return absl::FailedPreconditionError(
          "cannot set up the benchmark's network namespaces (needs root, iproute2 and "
          "veth): " + std::string(s.message()));
    }
  }
  return link;
}

NetnsLink::~NetnsLink() {
  for (const std::string* ns : {&holder_ns_, &orchestrator_ns_}) {
    absl::Status s = RunCommand({"ip", "netns", "delete", *ns});
    if (!s.ok()) std::fprintf(stderr, "network baseline: %s\n", std::string(s.message()).c_str());
  }
  g_ns[0][0] = '\0';
  g_ns[1][0] = '\0';
}

uint64_t NetnsLink::BurstBytes(uint64_t rate_bits_per_second) {
  // One millisecond at the rate, at least 32 KiB (a few full-size packets;
  // tbf splits larger GSO packets into segments that fit).
  return std::max<uint64_t>(rate_bits_per_second / 8 / 1000, 32u << 10);
}

absl::Status NetnsLink::Shape(uint64_t rate_bits_per_second, double delay_ms) {
  // "del" of a missing qdisc fails; only the "replace"/"add" that follow count.
  (void)RunCommand({"ip", "netns", "exec", holder_ns_, "tc", "qdisc", "del", "dev",
                    kHolderVeth, "root"});
  (void)RunCommand({"ip", "netns", "exec", orchestrator_ns_, "tc", "qdisc", "del", "dev",
                    kOrchestratorVeth, "root"});
  if (rate_bits_per_second > 0) {
    absl::Status s = RunCommand(
        {"ip", "netns", "exec", holder_ns_, "tc", "qdisc", "add", "dev", kHolderVeth, "root",
         "tbf", "rate", std::to_string(rate_bits_per_second) + "bit", "burst",
         std::to_string(BurstBytes(rate_bits_per_second)), "latency", "100ms"});
    if (!s.ok()) return absl::FailedPreconditionError("cannot shape the link: " + std::string(s.message()));
  }
  if (delay_ms > 0) {
    std::ostringstream d;
    d << delay_ms << "ms";
    absl::Status s =
        RunCommand({"ip", "netns", "exec", orchestrator_ns_, "tc", "qdisc", "add", "dev",
                    kOrchestratorVeth, "root", "netem", "delay", d.str()});
    if (!s.ok()) return absl::FailedPreconditionError("cannot delay the link: " + std::string(s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> NetnsLink::ShapedBytesSent() const {
  std::string out;
  absl::Status s = RunCommand(
      {"ip", "netns", "exec", holder_ns_, "tc", "-s", "qdisc", "show", "dev", kHolderVeth},
      &out);
  if (!s.ok()) return s;
  // "qdisc tbf 8001: root refcnt 2 rate ...\n Sent 12345 bytes 67 pkt ..."
  if (out.find("qdisc tbf") == std::string::npos) return uint64_t{0};
  size_t p = out.find("Sent ");
  if (p == std::string::npos) {
    return absl::InternalError("no byte count in `tc -s qdisc show`: " + out);
  }
  return static_cast<uint64_t>(std::strtoull(out.c_str() + p + 5, nullptr, 10));
}

void NetnsLink::InstallSignalCleanup() {
  CopyName(IpBinary(), g_ip_path);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = DeleteOnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

}  // namespace bench
}  // namespace gputravel
