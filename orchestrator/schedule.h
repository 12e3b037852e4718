#ifndef GPUTRAVEL_ORCHESTRATOR_SCHEDULE_H_
#define GPUTRAVEL_ORCHESTRATOR_SCHEDULE_H_

// Which holder's window goes to the GPU next. Everything here is a pure
// function of persisted progress (no hidden state, no clocks, no randomness),
// so an orchestrator that restarts after a crash makes exactly the choice it
// would have made before.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "orchestrator/campaign_spec.h"

namespace gputravel {

// One holder's persisted progress through its dataset.
struct HolderProgress {
  uint64_t dataset_bytes;  // payload size the holder reported; 0: nothing to do
  uint64_t cursor_offset;  // next byte to send in the current pass
  uint32_t round;          // completed passes over the dataset
  bool active;             // false: failed or skipped, never picked again
};

// True when the holder has nothing left to send in `rounds` passes (inactive
// holders are not "finished", just excluded; see PickNextHolder).
bool HolderFinished(const HolderProgress& h, uint32_t rounds);

// Index of the holder whose window comes next, or nullopt when every active
// holder has done `rounds` passes.
//  round-robin:  the next active, unfinished holder after `last` in list
//                order, wrapping (the first one if `last` is nullopt or out
//                of range); one window each.
//  proportional: trips are shared in proportion to dataset size so all
//                holders finish together: the active, unfinished holder with
//                the smallest fraction done, (round*size + offset) /
//                (rounds*size), ties by list order. `last` is not used.
//                Fractions are compared exactly (integer arithmetic).
std::optional<size_t> PickNextHolder(SchedulePolicy policy,
                                     const std::vector<HolderProgress>& holders,
                                     uint32_t rounds, std::optional<size_t> last);

// The window [offset, offset + length) for a holder's next trip:
// length = min(buffer_bytes, dataset_bytes - cursor_offset) (0 if the cursor
// is at or past the end).
struct Window {
  uint64_t offset;
  uint64_t length;
};
Window NextWindow(const HolderProgress& h, uint64_t buffer_bytes);

// The progress after a trip that delivered `length` bytes at the cursor: the
// cursor moves on, and reaching the end of the dataset completes a pass
// (round + 1, cursor back to 0). This is the bookkeeping the functions above
// assume; persist its result before picking again.
HolderProgress AdvanceProgress(const HolderProgress& h, uint64_t length);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_SCHEDULE_H_
