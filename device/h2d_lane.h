#ifndef GPUTRAVEL_DEVICE_H2D_LANE_H_
#define GPUTRAVEL_DEVICE_H2D_LANE_H_

#include <cstdint>

#include "keyxfer/cc_channel.h"
#include "keyxfer/counter_window.h"

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

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_H2D_LANE_H_
