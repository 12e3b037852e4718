#ifndef GPUTRAVEL_DEVICE_H2D_LANE_H_
#define GPUTRAVEL_DEVICE_H2D_LANE_H_

#include <cstdint>
#include <vector>

#include "keyxfer/cc_channel.h"
#include "keyxfer/counter_window.h"
#include "proto/device.pb.h"
#include "proto/holder.pb.h"

namespace gputravel {

// One copy engine's part of a write (a hand-off's lane): the engine, its H2D
// key (not owned; must outlive the write) and counter window, and its bytes
// [offset, offset + length) of the window (relative to the window's start;
// offset a multiple of the chunk size).
struct H2dLaneWrite {
  uint32_t engine = 0;
  const ChannelMaterial* key = nullptr;
  CounterWindow window;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// The writes of a hand-off's lanes, with `keys` (one per lane, in the same
// order; not owned, must outlive the writes). Lanes past the last key get no
// write.
std::vector<H2dLaneWrite> LaneWrites(const std::vector<v1::H2dLane>& lanes,
                                     const std::vector<ChannelMaterial>& keys);

// The device grants (GrantH2dCommand) that confine each lane's engine to its
// lane of buffer `buffer_id` (the window written from the buffer's offset 0)
// and to its counter window.
std::vector<v1::H2dGrant> LaneGrants(const std::vector<v1::H2dLane>& lanes, uint64_t buffer_id);

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_H2D_LANE_H_
