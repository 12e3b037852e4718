#ifndef GPUTRAVEL_DEVICE_TRUNCATION_GUARD_H_
#define GPUTRAVEL_DEVICE_TRUNCATION_GUARD_H_

#include <cstddef>

#include "absl/status/statusor.h"

namespace gputravel {

// Reads of a shared file mapping that another party may truncate at any time
// (a holder's bounce ring, mapped by the device). A read past the file's new
// end raises SIGBUS, which would kill the whole device and every session on
// it, where a real GPU gets an IOMMU fault on one channel. While a mapping
// is registered here, a SIGBUS inside it maps a page of zeros over the
// faulting page and marks the region faulted; the reader checks Faulted()
// after its copy and refuses what it read. A SIGBUS anywhere else gets the
// previous disposition (the process still dies on a real bug).
//
// Thread-safe; the signal handler reads a fixed table without locks.
class TruncationGuard {
 public:
  static constexpr int kRegions = 256;

  // Registers [base, base + length) (a shared, read-only mapping); installs
  // the handler on first use. RESOURCE_EXHAUSTED when kRegions mappings are
  // registered already.
  static absl::StatusOr<int> Register(const void* base, size_t length);
  // Before the mapping is unmapped.
  static void Unregister(int region);
  // True once a read in the region faulted: pages past the file's end now
  // read as zeros, so nothing read from the region since can be trusted.
  static bool Faulted(int region);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_TRUNCATION_GUARD_H_
