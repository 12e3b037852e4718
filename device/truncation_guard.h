#ifndef GPUTRAVEL_DEVICE_TRUNCATION_GUARD_H_
#define GPUTRAVEL_DEVICE_TRUNCATION_GUARD_H_

#include <atomic>
#include <cstddef>

#include "absl/status/status.h"

namespace gputravel {

// Reads of a shared file mapping that another party may truncate at any time
// (a holder's bounce ring, mapped by the device). A read past the file's new
// end raises SIGBUS, which would kill the whole device and every session on
// it, where a real GPU gets an IOMMU fault on one channel. While a Scope is
// alive on a thread, a SIGBUS that thread takes inside the scope's range maps
// a page of zeros over the faulting page and sets the scope's flag; the
// reader checks the flag after its reads and refuses what it read. Any other
// SIGBUS (another range, another thread, one sent with kill) gets the
// disposition the process had before (a real bug still stops it).
//
// A fault is synchronous: it is delivered to the thread that read, so the
// handler consults only that thread's scope (no table another thread could
// change meanwhile).
class TruncationGuard {
 public:
  // Installs the SIGBUS handler, once per process; INTERNAL if it cannot.
  static absl::Status Install();

  // Guards this thread's reads of [base, base + length) for its lifetime;
  // `*faulted` is set when one of them faulted (it is never cleared here:
  // the faulting pages read as zeros from then on). Scopes do not nest.
  class Scope {
   public:
    Scope(const void* base, size_t length, std::atomic<bool>* faulted);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_TRUNCATION_GUARD_H_
