#include "device/truncation_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <mutex>

namespace gputravel {
namespace {

// The calling thread's guarded range. Initial-exec TLS: reading it in the
// handler never allocates.
struct GuardedRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;  // 0: no scope
  std::atomic<bool>* faulted = nullptr;
};
__attribute__((tls_model("initial-exec"))) thread_local GuardedRange t_range;

std::once_flag g_once;
bool g_installed = false;
uintptr_t g_page = 4096;
struct sigaction g_previous;

// What the process would have done without us.
void Previous(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous.sa_handler == SIG_IGN) {
    return;
  } else if (g_previous.sa_handler != SIG_DFL) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default: terminate. For a fault, the instruction runs again and dies;
  // for a signal someone sent, raise it again.
  signal(SIGBUS, SIG_DFL);
  if (info->si_code <= 0) raise(SIGBUS);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const GuardedRange& r = t_range;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  // si_code > 0: raised by the kernel for this thread's own access (not sent).
  if (info->si_code > 0 && r.end != 0 && addr >= r.begin && addr < r.end) {
    void* p = mmap(reinterpret_cast<void*>(addr & ~(g_page - 1)), g_page, PROT_READ,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != MAP_FAILED) {
      r.faulted->store(true, std::memory_order_relaxed);
      errno = saved_errno;
      return;  // the read resumes and sees zeros
    }
  }
  Previous(sig, info, context);
  errno = saved_errno;
}

}  // namespace

absl::Status TruncationGuard::Install() {
  std::call_once(g_once, [] {
    const long page = sysconf(_SC_PAGESIZE);
    if (page > 0) g_page = static_cast<uintptr_t>(page);
    struct sigaction sa {};
    sa.sa_sigaction = &OnSigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    g_installed = sigaction(SIGBUS, &sa, &g_previous) == 0;
  });
  if (!g_installed) {
    return absl::InternalError("cannot install the SIGBUS handler that guards bounce rings");
  }
  return absl::OkStatus();
}

TruncationGuard::Scope::Scope(const void* base, size_t length, std::atomic<bool>* faulted) {
  t_range.faulted = faulted;
  t_range.begin = reinterpret_cast<uintptr_t>(base);
  t_range.end = t_range.begin + length;
  std::atomic_signal_fence(std::memory_order_seq_cst);  // set before any guarded read
}

TruncationGuard::Scope::~Scope() {
  std::atomic_signal_fence(std::memory_order_seq_cst);  // after every guarded read
  t_range.end = 0;
  t_range.begin = 0;
  t_range.faulted = nullptr;
}

}  // namespace gputravel
