#include "bench/provision_bench.h"

#include <chrono>
#include <cstring>

#include "bench/stats.h"
#include "device/bounce_buffer.h"
#include "keyxfer/device_session.h"
#include "keyxfer/handoff_lanes.h"
#include "keyxfer/random.h"
#include "util/files.h"
#include "util/hex.h"

namespace gputravel {
namespace bench {

absl::StatusOr<ProvisionResult> MeasureProvision(DeviceRig& rig, uint64_t buffer_id,
                                                 uint64_t length,
                                                 const ChunkSource& source,
                                                 const H2dWriterOptions& options) {
  CopyingSource copying(source);
  return MeasureProvision(rig, buffer_id, length, copying, options);
}

absl::StatusOr<ProvisionResult> MeasureProvision(DeviceRig& rig, uint64_t buffer_id,
                                                 uint64_t length, H2dSource& source,
                                                 const H2dWriterOptions& options) {
  return MeasureProvisionLanes(rig, buffer_id, length, source, options, 1);
}

absl::StatusOr<ProvisionResult> MeasureProvisionLanes(DeviceRig& rig, uint64_t buffer_id,
                                                      uint64_t length, H2dSource& source,
                                                      const H2dWriterOptions& options,
                                                      uint32_t engines) {
  auto planned = PlanLanes(length, options.chunk_size, engines);
  if (!planned.ok()) return planned.status();
  rig.RouteHome();
  auto handoff = rig.KeyForOrchestrator(static_cast<uint32_t>(planned->size()));
  if (!handoff.ok()) return handoff.status();
  const std::vector<H2dLaneWrite> lanes = LaneWrites(*planned, handoff->keys);
  absl::Status granted = rig.session().GrantH2d(LaneGrants(*planned, buffer_id));
  if (!granted.ok()) return granted;
  rig.gpu().SetOwner("holder");
  H2dWriter writer(rig.holder_channel(), options);
  auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ProcessCpuSeconds();
  auto stats = writer.Write(lanes, handoff->session_id, buffer_id, 0, length, source);
  const double seconds = SecondsSince(t0);
  const double cpu_seconds = ProcessCpuSeconds() - cpu0;
  rig.RouteHome();
  if (!stats.ok()) return stats.status();
  uint64_t chunks = 0;
  const v1::DeviceStatus status = rig.gpu().Status();
  for (const auto& ce : status.copy_engines()) chunks += ce.h2d_chunks();
  if (chunks != H2dWriter::ChunksFor(length, options.chunk_size)) {
    return absl::InternalError("the device's engines accepted " + std::to_string(chunks) +
                               " chunks, the writer sent " + std::to_string(stats->chunks));
  }
  ProvisionResult r;
  r.bytes = stats->bytes;
  r.chunks = stats->chunks;
  r.seconds = seconds;
  r.mbps = MegabytesPerSecond(length, seconds);
  r.cpu_seconds = cpu_seconds;
  r.read_seconds = stats->read_seconds;
  return r;
}

absl::StatusOr<DeviceCeiling> MeasureDeviceCeiling(DeviceRig& rig, uint64_t buffer_id,
                                                   uint64_t bytes, uint32_t chunk_size,
                                                   const ChunkSource& source,
                                                   const std::string& bounce_dir) {
  auto handoff = rig.HandToHolder();
  if (!handoff.ok()) return handoff.status();
  auto ring = BounceBuffer::Create(
      bounce_dir + "/gputravel-bounce-bench-" + HexEncode(RandomString(8)), 1, chunk_size);
  if (!ring.ok()) return ring.status();
  v1::AttachBounceRequest attach;
  attach.set_path((*ring)->path());
  attach.set_slots(1);
  attach.set_slot_size(chunk_size);
  auto bounce_id = rig.gpu().AttachBounce("holder", attach);
  if (!bounce_id.ok()) return bounce_id.status();
  auto cipher = ChannelCipher::Create(handoff->key);
  if (!cipher.ok()) return cipher.status();
  std::vector<uint8_t> plain(chunk_size);
  DeviceCeiling r;
  r.chunk_size = chunk_size;
  const uint32_t chunks = H2dWriter::ChunksFor(bytes, chunk_size);
  for (uint32_t i = 0; i < chunks; ++i) {
    const uint64_t off = uint64_t(i) * chunk_size;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(chunk_size, bytes - off));
    absl::Status s = source(off, plain.data(), n);
    if (!s.ok()) return s;
    std::string aad = ChunkAad(handoff->session_id, buffer_id, off, n);
    uint8_t tag[kGcmTagSize];
    s = (*cipher)->Encrypt(handoff->next_counter + i,
                           reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
                           plain.data(), n, (*ring)->slot(0), tag);
    if (!s.ok()) return s;
    v1::SubmitH2DRequest req;
    req.set_bounce_id(*bounce_id);
    req.set_slot(0);
    req.set_buffer_id(buffer_id);
    req.set_offset(off);
    req.set_length(n);
    std::memcpy((*ring)->tag(0), tag, kGcmTagSize);
    req.set_tag_offset((*ring)->tag_offset(0));
    req.set_session_id(handoff->session_id);
    auto t0 = std::chrono::steady_clock::now();
    auto next = rig.gpu().SubmitH2D("holder", req);
    r.seconds += SecondsSince(t0);
    if (!next.ok()) return next.status();
    r.bytes += n;
  }
  rig.RouteHome();
  r.mbps = MegabytesPerSecond(r.bytes, r.seconds);
  r.per_chunk_us = chunks ? r.seconds / chunks * 1e6 : 0;
  return r;
}

}  // namespace bench
}  // namespace gputravel
