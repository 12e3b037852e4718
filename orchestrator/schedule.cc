#include "orchestrator/schedule.h"

#include <algorithm>

namespace gputravel {
namespace {

// A holder's position as (whole passes, bytes into the current pass), with a
// cursor at or past the end counted as a completed pass. Keeps the
// comparisons below correct even if a caller persisted offset == size rather
// than wrapping it.
struct Position {
  uint64_t round;
  uint64_t offset;  // < size
};

Position Normalize(const HolderProgress& h) {
  if (h.dataset_bytes == 0) return {h.round, 0};
  if (h.cursor_offset >= h.dataset_bytes) return {uint64_t{h.round} + 1, 0};
  return {h.round, h.cursor_offset};
}

bool Eligible(const HolderProgress& h, uint32_t rounds) {
  return h.active && !HolderFinished(h, rounds);
}

// fraction(a) < fraction(b), where fraction = (round*size + offset) /
// (rounds*size). `rounds` is common to all holders, so this is
// round_a + offset_a/size_a < round_b + offset_b/size_b; with offsets below
// their sizes the whole parts compare first, then the fractional parts by
// cross-multiplying in 128 bits (exact, no floating point).
bool LessDone(const HolderProgress& a, const HolderProgress& b) {
  Position pa = Normalize(a), pb = Normalize(b);
  if (pa.round != pb.round) return pa.round < pb.round;
  using u128 = unsigned __int128;
  return u128{pa.offset} * b.dataset_bytes < u128{pb.offset} * a.dataset_bytes;
}

}  // namespace

bool HolderFinished(const HolderProgress& h, uint32_t rounds) {
  if (h.dataset_bytes == 0) return true;
  return Normalize(h).round >= rounds;
}

std::optional<size_t> PickNextHolder(SchedulePolicy policy,
                                     const std::vector<HolderProgress>& holders,
                                     uint32_t rounds, std::optional<size_t> last) {
  const size_t n = holders.size();
  if (policy == SchedulePolicy::kRoundRobin) {
    size_t start = (last.has_value() && *last < n) ? *last + 1 : 0;
    // n steps from `start`, wrapping: `last` itself is considered last, so a
    // single remaining holder keeps being picked.
    for (size_t k = 0; k < n; ++k) {
      size_t i = (start + k) % n;
      if (Eligible(holders[i], rounds)) return i;
    }
    return std::nullopt;
  }
  std::optional<size_t> best;
  for (size_t i = 0; i < n; ++i) {
    if (!Eligible(holders[i], rounds)) continue;
    // Strictly less: on a tie the earlier holder in list order stays.
    if (!best || LessDone(holders[i], holders[*best])) best = i;
  }
  return best;
}

Window NextWindow(const HolderProgress& h, uint64_t buffer_bytes) {
  if (h.cursor_offset >= h.dataset_bytes) return {h.cursor_offset, 0};
  return {h.cursor_offset, std::min(buffer_bytes, h.dataset_bytes - h.cursor_offset)};
}

HolderProgress AdvanceProgress(const HolderProgress& h, uint64_t length) {
  HolderProgress out = h;
  if (h.dataset_bytes == 0) return out;
  uint64_t left = h.cursor_offset < h.dataset_bytes ? h.dataset_bytes - h.cursor_offset : 0;
  if (length >= left) {
    out.round = h.round + 1;
    out.cursor_offset = 0;
  } else {
    out.cursor_offset = h.cursor_offset + length;
  }
  return out;
}

}  // namespace gputravel
