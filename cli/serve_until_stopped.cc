#include "cli/serve_until_stopped.h"

#include <poll.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdio>

#include "cli/terminal_text.h"
#include "util/subprocess.h"

namespace gputravel {
namespace {

volatile std::sig_atomic_t g_stop = 0;
void Stop(int) { g_stop = 1; }

}  // namespace

int ServeUntilStopped(EmulatedStack& stack, const std::string& program) {
  struct sigaction sa = {};
  sa.sa_handler = Stop;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  while (!g_stop) {
    for (const auto& [name, log] : stack.logs()) {
      Subprocess* p = stack.process(name);
      if (p == nullptr || p->Running()) continue;
      const int st = p->exit_status();
      std::fprintf(stderr, "%s: %s %s %d; the end of its log (%s):\n", program.c_str(),
                   name.c_str(),
                   WIFSIGNALED(st) ? "was killed by signal" : "exited with status",
                   WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), log.c_str());
      std::fprintf(stderr, "%s", TerminalSafeLines(LogTail(log), "  ").c_str());
      stack.Stop();
      return 1;
    }
    ::poll(nullptr, 0, 100);
  }
  stack.Stop();
  return 0;
}

}  // namespace gputravel
