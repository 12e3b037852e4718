#include "keyxfer/handoff_lanes.h"

#include <string>

#include "keyxfer/cc_channel.h"
#include "keyxfer/counter_window.h"
#include "keyxfer/device_session.h"

namespace gputravel {

absl::StatusOr<std::vector<v1::H2dLane>> PlanLanes(uint64_t length, uint32_t chunk_size,
                                                   uint32_t engines) {
  if (length == 0) return absl::InvalidArgumentError("the window is empty");
  if (chunk_size == 0 || chunk_size % 32 != 0) {
    return absl::InvalidArgumentError("chunk size " + std::to_string(chunk_size) +
                                      " is not a non-zero multiple of 32");
  }
  if (engines == 0 || engines > kCopyEngines) {
    return absl::InvalidArgumentError("a window is written through 1 to " +
                                      std::to_string(kCopyEngines) + " copy engines, not " +
                                      std::to_string(engines));
  }
  const uint64_t chunks = (length + chunk_size - 1) / chunk_size;
  const uint64_t lanes = std::min<uint64_t>(engines, chunks);
  // Each lane's chunks take one counter each from its engine's fresh key: a
  // lane with more chunks than the key has counters cannot be written (and
  // its 32-bit counter_count would wrap).
  const uint64_t most = chunks / lanes + (chunks % lanes != 0 ? 1 : 0);
  if (most > uint64_t{kLastMessageCounter} - kFirstMessageCounter + 1) {
    return absl::InvalidArgumentError(
        "a window of " + std::to_string(chunks) + " chunks over " + std::to_string(lanes) +
        " copy engines needs " + std::to_string(most) +
        " counters on one engine, more than a key has: use larger chunks or more engines");
  }
  std::vector<v1::H2dLane> out;
  uint64_t chunk = 0;
  for (uint64_t e = 0; e < lanes; ++e) {
    const uint64_t n = chunks / lanes + (e < chunks % lanes ? 1 : 0);
    v1::H2dLane l;
    l.set_copy_engine(static_cast<uint32_t>(e));
    l.set_offset(chunk * chunk_size);
    l.set_length(std::min<uint64_t>(n * chunk_size, length - chunk * chunk_size));
    l.set_first_counter(kFirstMessageCounter);
    l.set_counter_count(static_cast<uint32_t>(n));
    out.push_back(std::move(l));
    chunk += n;
  }
  return out;
}

absl::Status CheckLanes(const v1::HandoffBinding& b) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError("hand-off lanes refused: " + what);
  };
  const uint64_t cs = b.chunk_size();
  if (cs == 0 || cs % 32 != 0) return bad("chunk size " + std::to_string(cs));
  if (b.lanes_size() == 0) return bad("no lane");
  uint32_t seen = 0;
  uint64_t at = 0;
  for (int i = 0; i < b.lanes_size(); ++i) {
    const v1::H2dLane& l = b.lanes(i);
    const std::string name = "lane " + std::to_string(i) + " (LCE" +
                             std::to_string(l.copy_engine()) + ")";
    if (l.copy_engine() >= kCopyEngines) return bad(name + ": no such copy engine");
    if (seen & (1u << l.copy_engine())) return bad(name + ": engine used twice");
    seen |= 1u << l.copy_engine();
    if (l.offset() != at) {
      return bad(name + " starts at " + std::to_string(l.offset()) + ", not right after the "
                 "previous lane (" + std::to_string(at) + ")");
    }
    if (l.offset() % cs != 0) return bad(name + " does not start on a chunk boundary");
    if (l.length() == 0 || l.length() > b.window_length() - at) {
      return bad(name + " is empty or runs past the window");
    }
    const uint64_t chunks = (l.length() + cs - 1) / cs;
    if (chunks != l.counter_count()) {
      return bad(name + " has " + std::to_string(l.counter_count()) + " counters for " +
                 std::to_string(chunks) + " chunks");
    }
    auto w = CounterWindowAt(l.first_counter(), l.counter_count());
    if (!w.ok()) return bad(name + ": " + std::string(w.status().message()));
    at += l.length();
  }
  if (at != b.window_length()) {
    return bad("the lanes cover " + std::to_string(at) + " of the window's " +
               std::to_string(b.window_length()) + " bytes");
  }
  return absl::OkStatus();
}

}  // namespace gputravel
