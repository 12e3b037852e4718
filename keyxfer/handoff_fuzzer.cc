// libFuzzer entry point for the trip hand-off as a holder receives it: a
// HandoffBinding (protobuf, from the orchestrator) and a wrapped hand-off
// blob. Plain C++ so gcc builds it; handoff_fuzzer_replay_test replays the
// corpus with it (tools/fuzzer.bzl).
//   input = binding length (2 bytes, big-endian) || binding || blob
// Each input goes through what the holder does (CheckLanes, UnwrapHandoff,
// and OpenReport on the orchestrator's side), then through properties that
// must hold for any binding: a hand-off wrapped for it unwraps to the same
// keys and is refused once altered or for another trip, and lanes planned
// for its window pass CheckLanes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "keyxfer/cc_channel.h"
#include "keyxfer/handoff.h"
#include "keyxfer/handoff_lanes.h"
#include "keyxfer/report_seal.h"
#include "keyxfer/secret_bytes.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/holder.pb.h"

namespace {

using gputravel::ChannelMaterial;
using gputravel::SecretBytes;

SecretBytes FixedKey(uint8_t fill) {
  std::vector<uint8_t> k(32, fill);
  return SecretBytes(k.data(), k.size());
}

// One key per lane, derived from the lane's index and the input's bytes.
std::vector<ChannelMaterial> LaneKeys(size_t lanes, const uint8_t* data, size_t size) {
  std::vector<ChannelMaterial> keys(lanes);
  for (size_t i = 0; i < lanes; ++i) {
    std::vector<uint8_t> k(32);
    for (size_t j = 0; j < k.size(); ++j) {
      k[j] = static_cast<uint8_t>(i * 31 + j + (size ? data[(i + j) % size] : 0));
    }
    keys[i].key = SecretBytes(k.data(), k.size());
    for (size_t j = 0; j < keys[i].iv_mask.size(); ++j) keys[i].iv_mask[j] = uint8_t(i + j);
    keys[i].channel_counter = (uint64_t{i} << 40) + size;
  }
  return keys;
}

bool SameKeys(const std::vector<ChannelMaterial>& a, const std::vector<ChannelMaterial>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].key.Equals(b[i].key) || a[i].iv_mask != b[i].iv_mask ||
        a[i].channel_counter != b[i].channel_counter) {
      return false;
    }
  }
  return true;
}

}  // namespace

// Protobuf logs every string field that is not UTF-8; the parse fails either
// way, and the log would be most of the fuzzer's time.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t n = (size_t{data[0]} << 8) | data[1];
  if (n > size - 2) return 0;
  gputravel::v1::HandoffBinding binding;
  if (!binding.ParseFromArray(data + 2, static_cast<int>(n))) return 0;
  const std::string blob(reinterpret_cast<const char*>(data + 2 + n), size - 2 - n);
  const SecretBytes key = FixedKey(0x5a);

  // What the holder and the orchestrator do with bytes from the other side.
  const bool lanes_ok = gputravel::CheckLanes(binding).ok();
  auto keys = gputravel::UnwrapHandoff(key, binding, blob);
  if (keys.ok() && keys->size() != static_cast<size_t>(binding.lanes_size())) std::abort();
  auto report = gputravel::OpenReport(key, binding, blob);
  (void)report;

  // A hand-off wrapped for this binding opens to the same keys, and only
  // for it: altered by one bit, or for the next trip, it is refused.
  if (binding.lanes_size() >= 1 && binding.lanes_size() <= 8) {
    const std::vector<ChannelMaterial> lane_keys =
        LaneKeys(static_cast<size_t>(binding.lanes_size()), data, size);
    auto wrapped = gputravel::WrapHandoff(key, binding, lane_keys);
    if (!wrapped.ok()) std::abort();
    auto opened = gputravel::UnwrapHandoff(key, binding, *wrapped);
    if (!opened.ok() || !SameKeys(*opened, lane_keys)) std::abort();
    std::string altered = *wrapped;
    altered[(size + n) % altered.size()] ^= static_cast<char>(1u << (size % 8));
    if (gputravel::UnwrapHandoff(key, binding, altered).ok()) std::abort();
    gputravel::v1::HandoffBinding other = binding;
    other.set_trip(binding.trip() + 1);
    if (gputravel::UnwrapHandoff(key, other, *wrapped).ok()) std::abort();
    if (gputravel::UnwrapHandoff(FixedKey(0xa5), binding, *wrapped).ok()) std::abort();
  }

  // Lanes the orchestrator plans for this window always pass the holder's
  // check; and checked lanes cover the window exactly.
  const uint32_t engines = static_cast<uint32_t>(binding.lanes_size());
  auto planned =
      gputravel::PlanLanes(binding.window_length(), binding.chunk_size(), engines);
  if (planned.ok()) {
    gputravel::v1::HandoffBinding replanned = binding;
    replanned.clear_lanes();
    for (const auto& l : *planned) *replanned.add_lanes() = l;
    if (!gputravel::CheckLanes(replanned).ok()) std::abort();
  }
  if (lanes_ok) {
    uint64_t covered = 0;
    for (const auto& l : binding.lanes()) covered += l.length();
    if (covered != binding.window_length()) std::abort();
  }
  return 0;
}
