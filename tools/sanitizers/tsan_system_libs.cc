// ThreadSanitizer and Debian's libraries. libabsl_synchronization.so is built
// without TSan, so TSan does not see that absl::Mutex, CondVar, Notification,
// BlockingCounter and Barrier order memory accesses, and would report every
// access guarded by them as a race. This file, linked into every binary of
// --config=tsan only (.bazelrc: --custom_malloc), interposes those functions:
// each forwards to abseil's own (dlsym RTLD_NEXT) and tells TSan the
// happens-before edge it makes (__tsan_release before an unlock or a signal,
// __tsan_acquire after a lock or a wait), keyed on the object's address.
// Mutual exclusion itself stays abseil's; TSan checks the accesses around it.
// The symbols are abseil 20220623's, inline namespace debian3 (libabsl-dev).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#ifndef __SANITIZE_THREAD__
#if defined(__has_feature)
#if !__has_feature(thread_sanitizer)
#error "tsan_system_libs.cc is for --config=tsan only"
#endif
#endif
#endif

namespace {

void* Real(const char* symbol) {
  void* f = dlsym(RTLD_NEXT, symbol);
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_system_libs: %s not found in libabsl: %s\n", symbol, dlerror());
    std::abort();
  }
  return f;
}

// The abseil function named `symbol`, looked up once.
template <typename F>
F Lookup(std::atomic<void*>& slot, const char* symbol) {
  void* f = slot.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = Real(symbol);
    slot.store(f, std::memory_order_release);
  }
  return reinterpret_cast<F>(f);
}

void Acquire(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
void Release(const void* p) { __tsan_release(const_cast<void*>(p)); }

// abseil evaluates a waiter's Condition with the mutex held, on whichever
// thread is releasing or acquiring it, and may release the mutex right
// after (inside abseil): the evaluation acquires the mutex and releases it.
// The waiter publishes the Guarded (on its stack) before abseil can read it.
struct Guarded {
  const absl::Mutex* mu;
  const absl::Condition* cond;
};
bool EvalGuarded(const Guarded* g) {
  Acquire(g);
  Acquire(g->mu);
  const bool r = g->cond->Eval();
  Release(g->mu);
  return r;
}

}  // namespace

// Condition `c` of mutex `mu`, evaluated after an acquire of `mu`.
#define GT_GUARD(mu, c)                       \
  const Guarded guarded{(mu), &(c)};           \
  const absl::Condition g(&EvalGuarded, &guarded); \
  Release(&guarded)

// Declares and defines the interposer NAME for abseil's SYMBOL, with return
// type RET and parameters PARAMS (the object first); BODY calls real(ARGS).
#define GT_INTERPOSE(RET, NAME, SYMBOL, PARAMS, ...)                       \
  extern "C" RET NAME PARAMS __asm__(SYMBOL);                              \
  static std::atomic<void*> NAME##_real{nullptr};                          \
  extern "C" RET NAME PARAMS {                                             \
    using Fn = RET(*) PARAMS;                                              \
    Fn real = Lookup<Fn>(NAME##_real, SYMBOL);                             \
    __VA_ARGS__                                                            \
  }

using absl::Barrier;
using absl::BlockingCounter;
using absl::Condition;
using absl::CondVar;
using absl::Duration;
using absl::Mutex;
using absl::Notification;
using absl::Time;

#define NS "_ZN4absl7debian3"

// absl::Mutex: locks acquire, unlocks release, Await releases and acquires.
GT_INTERPOSE(void, gt_lock, NS "5Mutex4LockEv", (Mutex * mu), real(mu); Acquire(mu);)
GT_INTERPOSE(void, gt_reader_lock, NS "5Mutex10ReaderLockEv", (Mutex * mu), real(mu);
             Acquire(mu);)
GT_INTERPOSE(bool, gt_try_lock, NS "5Mutex7TryLockEv", (Mutex * mu), bool ok = real(mu);
             if (ok) Acquire(mu); return ok;)
GT_INTERPOSE(bool, gt_reader_try_lock, NS "5Mutex13ReaderTryLockEv", (Mutex * mu),
             bool ok = real(mu);
             if (ok) Acquire(mu); return ok;)
GT_INTERPOSE(void, gt_unlock, NS "5Mutex6UnlockEv", (Mutex * mu), Release(mu); real(mu);)
GT_INTERPOSE(void, gt_reader_unlock, NS "5Mutex12ReaderUnlockEv", (Mutex * mu), Release(mu);
             real(mu);)
GT_INTERPOSE(void, gt_lock_when, NS "5Mutex8LockWhenERKNS0_9ConditionE",
             (Mutex * mu, const Condition& c), GT_GUARD(mu, c); real(mu, g); Acquire(mu);)
GT_INTERPOSE(void, gt_reader_lock_when, NS "5Mutex14ReaderLockWhenERKNS0_9ConditionE",
             (Mutex * mu, const Condition& c), GT_GUARD(mu, c); real(mu, g); Acquire(mu);)
GT_INTERPOSE(bool, gt_lock_when_timeout,
             NS "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE",
             (Mutex * mu, const Condition& c, Duration d), GT_GUARD(mu, c); bool ok = real(mu, g, d);
             Acquire(mu); return ok;)
GT_INTERPOSE(bool, gt_lock_when_deadline,
             NS "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE",
             (Mutex * mu, const Condition& c, Time t), GT_GUARD(mu, c); bool ok = real(mu, g, t);
             Acquire(mu); return ok;)
GT_INTERPOSE(bool, gt_reader_lock_when_timeout,
             NS "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE",
             (Mutex * mu, const Condition& c, Duration d), GT_GUARD(mu, c); bool ok = real(mu, g, d);
             Acquire(mu); return ok;)
GT_INTERPOSE(bool, gt_reader_lock_when_deadline,
             NS "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE",
             (Mutex * mu, const Condition& c, Time t), GT_GUARD(mu, c); bool ok = real(mu, g, t);
             Acquire(mu); return ok;)
GT_INTERPOSE(void, gt_await, NS "5Mutex5AwaitERKNS0_9ConditionE",
             (Mutex * mu, const Condition& c), GT_GUARD(mu, c); Release(mu); real(mu, g); Acquire(mu);)
GT_INTERPOSE(bool, gt_await_timeout,
             NS "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE",
             (Mutex * mu, const Condition& c, Duration d), GT_GUARD(mu, c);
             Release(mu); bool ok = real(mu, g, d); Acquire(mu); return ok;)
GT_INTERPOSE(bool, gt_await_deadline,
             NS "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE",
             (Mutex * mu, const Condition& c, Time t), GT_GUARD(mu, c);
             Release(mu); bool ok = real(mu, g, t); Acquire(mu); return ok;)

// absl::CondVar: a wait releases its mutex and acquires it again.
GT_INTERPOSE(void, gt_cv_wait, NS "7CondVar4WaitEPNS0_5MutexE", (CondVar * cv, Mutex* mu),
             Release(mu); real(cv, mu); Acquire(mu);)
GT_INTERPOSE(bool, gt_cv_wait_timeout, NS "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE",
             (CondVar * cv, Mutex* mu, Duration d), Release(mu); bool r = real(cv, mu, d);
             Acquire(mu); return r;)
GT_INTERPOSE(bool, gt_cv_wait_deadline,
             NS "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE",
             (CondVar * cv, Mutex* mu, Time t), Release(mu); bool r = real(cv, mu, t);
             Acquire(mu); return r;)

// absl::Notification: Notify releases; whoever sees it notified acquires.
// HasBeenNotified() (inline) passes the address of the flag, a member of the
// Notification: both addresses are released.
GT_INTERPOSE(void, gt_notify, NS "12Notification6NotifyEv", (Notification * n),
             Release(n); Release(reinterpret_cast<const char*>(n) + sizeof(Mutex)); real(n);)
GT_INTERPOSE(bool, gt_has_been_notified,
             NS "12Notification23HasBeenNotifiedInternalEPKSt6atomicIbE",
             (const std::atomic<bool>* flag), bool r = real(flag);
             if (r) Acquire(flag); return r;)
GT_INTERPOSE(void, gt_wait_notification, "_ZNK4absl7debian312Notification19WaitForNotificationEv",
             (const Notification* n), real(n); Acquire(n);)
GT_INTERPOSE(bool, gt_wait_notification_timeout,
             "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE",
             (const Notification* n, Duration d), bool r = real(n, d);
             if (r) Acquire(n); return r;)
GT_INTERPOSE(bool, gt_wait_notification_deadline,
             "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE",
             (const Notification* n, Time t), bool r = real(n, t);
             if (r) Acquire(n); return r;)

// absl::BlockingCounter and absl::Barrier: each arrival releases, the
// waiters acquire.
GT_INTERPOSE(bool, gt_decrement_count, NS "15BlockingCounter14DecrementCountEv",
             (BlockingCounter * c), Release(c); bool r = real(c); Acquire(c); return r;)
GT_INTERPOSE(void, gt_counter_wait, NS "15BlockingCounter4WaitEv", (BlockingCounter * c),
             real(c); Acquire(c);)
GT_INTERPOSE(bool, gt_barrier_block, NS "7Barrier5BlockEv", (Barrier * b), Release(b);
             bool r = real(b); Acquire(b); return r;)

// What TSan reports from inside Debian's gRPC and abseil (the calls it
// intercepts there, memcpy, memmove, recvmsg, are all it sees of them): they
// order those accesses with their own, uninstrumented atomics and locks
// (gRPC's slices and event engine, protobuf's and OpenSSL's buffers under
// gRPC, abseil's Status payloads and deadlock detector), so every such
// report is TSan missing an edge, not a race. Races between accesses in this
// project's code are still reported. What gRPC hands from one thread to
// another through its own queues (a request, a response) stays unordered for
// TSan, so the tests of gRPC services are not run under it (tools/checks.sh).
// gRPC's header templates (its streams, call operation sets, metadata) are
// compiled into the code that instantiates them, so they are instrumented,
// while the call objects they read are set up by gRPC's own threads: a race
// reported with one of them on the stack is that same missing edge. They
// only appear above this project's calls into gRPC, never around its own
// code, so races in it are still reported.
extern "C" const char* __tsan_default_suppressions() {
  return "race:grpc::internal::ServerReaderWriterBody\n"
         "race:grpc::ClientReaderWriter\n"
         "race:grpc::internal::CallOpSet\n"
         "race:grpc::internal::FillMetadataArray\n"
         "race:grpc::internal::UnaryDeserializeHelper\n"
         "race:grpc::internal::CallOpRecvMessage\n"
         "race:grpc::internal::CallOpSendMessage\n"
         "called_from_lib:libgrpc.so\n"
         "called_from_lib:libprotobuf.so\n"
         "called_from_lib:libssl.so\n"
         "called_from_lib:libcrypto.so\n"
         "called_from_lib:libabsl_status.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libabsl_graphcycles_internal.so\n"
         "called_from_lib:libabsl_cord.so\n";
}
