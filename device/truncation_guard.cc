#include "device/truncation_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace gputravel {
namespace {

struct Region {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};  // 0: free
  std::atomic<bool> faulted{false};
};

Region g_regions[TruncationGuard::kRegions];
std::mutex g_mu;  // registration only; never taken by the handler
struct sigaction g_previous;
bool g_installed = false;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Region& r : g_regions) {
    const uintptr_t end = r.end.load(std::memory_order_acquire);
    if (end == 0 || addr < r.begin.load(std::memory_order_acquire) || addr >= end) continue;
    // A page of zeros where the file's page was: the read resumes and the
    // reader learns from Faulted() that it read nothing it can use.
    const uintptr_t page = addr & ~(static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)) - 1);
    void* p = mmap(reinterpret_cast<void*>(page), static_cast<size_t>(sysconf(_SC_PAGESIZE)),
                   PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != MAP_FAILED) {
      r.faulted.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not a guarded mapping (or the page could not be replaced): what the
  // process did before, so a real bug still stops it.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  signal(SIGBUS, SIG_DFL);  // the faulting instruction runs again and dies
}

}  // namespace

absl::StatusOr<int> TruncationGuard::Register(const void* base, size_t length) {
  std::lock_guard<std::mutex> l(g_mu);
  if (!g_installed) {
    struct sigaction sa {};
    sa.sa_sigaction = &OnSigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_previous) != 0) {
      return absl::InternalError("cannot install the SIGBUS handler that guards bounce rings");
    }
    g_installed = true;
  }
  for (int i = 0; i < kRegions; ++i) {
    Region& r = g_regions[i];
    if (r.end.load(std::memory_order_relaxed) != 0) continue;
    const uintptr_t b = reinterpret_cast<uintptr_t>(base);
    r.faulted.store(false, std::memory_order_relaxed);
    r.begin.store(b, std::memory_order_release);
    r.end.store(b + length, std::memory_order_release);
    return i;
  }
  return absl::ResourceExhaustedError("too many bounce rings mapped at once (" +
                                      std::to_string(kRegions) + ")");
}

void TruncationGuard::Unregister(int region) {
  if (region < 0 || region >= kRegions) return;
  std::lock_guard<std::mutex> l(g_mu);
  g_regions[region].end.store(0, std::memory_order_release);
  g_regions[region].begin.store(0, std::memory_order_release);
}

bool TruncationGuard::Faulted(int region) {
  if (region < 0 || region >= kRegions) return false;
  return g_regions[region].faulted.load(std::memory_order_acquire);
}

}  // namespace gputravel
