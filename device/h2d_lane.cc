#include "device/h2d_lane.h"

namespace gputravel {

std::vector<H2dLaneWrite> LaneWrites(const std::vector<v1::H2dLane>& lanes,
                                     const std::vector<ChannelMaterial>& keys) {
  std::vector<H2dLaneWrite> out;
  for (size_t i = 0; i < lanes.size() && i < keys.size(); ++i) {
    const v1::H2dLane& l = lanes[i];
    out.push_back(H2dLaneWrite{l.copy_engine(), &keys[i],
                               CounterWindow{l.first_counter(), l.counter_count()}, l.offset(),
                               l.length()});
  }
  return out;
}

std::vector<v1::H2dGrant> LaneGrants(const std::vector<v1::H2dLane>& lanes, uint64_t buffer_id) {
  std::vector<v1::H2dGrant> out;
  for (const v1::H2dLane& l : lanes) {
    v1::H2dGrant g;
    g.set_copy_engine(l.copy_engine());
    g.set_buffer_id(buffer_id);
    g.set_offset(l.offset());
    g.set_length(l.length());
    g.set_last_counter(l.first_counter() + l.counter_count() - 1);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace gputravel
