#ifndef GPUTRAVEL_KEYXFER_HANDOFF_LANES_H_
#define GPUTRAVEL_KEYXFER_HANDOFF_LANES_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/holder.pb.h"

namespace gputravel {

// How a hand-off's window is spread over copy engines (HandoffBinding.lanes):
// the orchestrator plans the lanes, the device is granted them, and the
// holder checks them before it writes through them.

// Splits a window of `length` bytes, in chunks of `chunk_size`, among copy
// engines LCE0..LCE(engines-1): contiguous parts of whole chunks, in window
// order, as even as the chunks allow (the first parts one chunk longer when
// they do not divide evenly); an engine left without a chunk gets no lane.
// Each lane's counter window starts at kFirstMessageCounter (each engine's
// key is handed out with an IV space nobody has used). INVALID_ARGUMENT for
// an empty window, a chunk size that is 0 or not a multiple of 32, an
// engine count outside 1..8, or a lane with more chunks than a key has
// message counters.
absl::StatusOr<std::vector<v1::H2dLane>> PlanLanes(uint64_t length, uint32_t chunk_size,
                                                   uint32_t engines);

// Checks a hand-off's lanes against its window: at least one lane, engines
// 0..7 each at most once, lanes in window order covering [0, window_length)
// exactly, each starting at a multiple of chunk_size, each with one counter
// per chunk in a usable counter window (CounterWindowAt). INVALID_ARGUMENT
// naming what is wrong.
absl::Status CheckLanes(const v1::HandoffBinding& binding);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_HANDOFF_LANES_H_
