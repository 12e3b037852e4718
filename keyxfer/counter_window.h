#ifndef GPUTRAVEL_KEYXFER_COUNTER_WINDOW_H_
#define GPUTRAVEL_KEYXFER_COUNTER_WINDOW_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace gputravel {

// A range of message counters [first, first + count) on one channel key: what
// a holder may use of the copy engine's H2D key for its one window (P4).
struct CounterWindow {
  uint32_t first = 0;
  uint32_t count = 0;
};

// The window of `count` counters that starts at the copy engine's next
// counter `next_counter` (the device decrypts only at that counter, in order).
// Each copy-engine key serves exactly one trip, so this is the only window
// ever cut from the key. InvalidArgument for count 0 or counter 0 (never a
// valid message counter); ResourceExhausted when the window would pass the
// last 32-bit message counter (the key must be replaced by a fresh exchange).
absl::StatusOr<CounterWindow> CounterWindowAt(uint64_t next_counter, uint32_t count);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_COUNTER_WINDOW_H_
