#include "keyxfer/counter_window.h"

#include <string>

#include "keyxfer/cc_channel.h"

namespace gputravel {

absl::StatusOr<CounterWindow> CounterWindowAt(uint64_t next_counter, uint32_t count) {
  if (count == 0) return absl::InvalidArgumentError("a counter window needs at least one counter");
  if (next_counter < kFirstMessageCounter) {
    return absl::InvalidArgumentError("message counter " + std::to_string(next_counter) +
                                      " is never used; counters start at " +
                                      std::to_string(kFirstMessageCounter));
  }
  if (next_counter > kLastMessageCounter ||
      count - 1 > kLastMessageCounter - next_counter) {
    return absl::ResourceExhaustedError(
        "the copy engine's next counter " + std::to_string(next_counter) +
        " leaves no room for " + std::to_string(count) +
        " chunks on this key; a fresh key exchange is needed");
  }
  return CounterWindow{static_cast<uint32_t>(next_counter), count};
}

}  // namespace gputravel
