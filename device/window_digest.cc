#include "device/window_digest.h"

#include <algorithm>
#include <vector>

#include "device/tag_digest.h"
#include "keyxfer/device_session.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

namespace {

// Adds the tags of `plaintext`'s bytes [from, from + length) in chunks at
// counters from `first_counter` under `key`.
absl::Status AddTags(const ChannelMaterial& key, uint64_t session_id, uint64_t buffer_id,
                     uint64_t dest_offset, const std::string& plaintext, uint64_t from,
                     uint64_t length, uint32_t chunk_size, uint32_t first_counter,
                     std::vector<uint8_t>& scratch, TagDigest& digest) {
  auto cipher = ChannelCipher::Create(key);
  if (!cipher.ok()) return cipher.status();
  for (uint64_t off = from, i = 0; off < from + length; off += chunk_size, ++i) {
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(chunk_size, from + length - off));
    std::string aad = ChunkAad(session_id, buffer_id, dest_offset + off, n);
    uint8_t tag[kGcmTagSize];
    absl::Status st = (*cipher)->Encrypt(
        first_counter + static_cast<uint32_t>(i),
        reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
        reinterpret_cast<const uint8_t*>(plaintext.data()) + off, n, scratch.data(), tag);
    if (!st.ok()) return st;
    digest.Add(tag);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> WindowDigest(const ChannelMaterial& key,
                                         uint64_t session_id, uint64_t buffer_id,
                                         uint64_t dest_offset,
                                         const std::string& plaintext,
                                         uint32_t chunk_size,
                                         uint32_t first_counter) {
  std::vector<H2dLaneWrite> one(1);
  one[0].key = &key;
  one[0].window = CounterWindow{first_counter, 0};
  one[0].length = plaintext.size();
  return WindowDigest(one, session_id, buffer_id, dest_offset, plaintext, chunk_size);
}

absl::StatusOr<std::string> WindowDigest(const std::vector<H2dLaneWrite>& lanes,
                                         uint64_t session_id, uint64_t buffer_id,
                                         uint64_t dest_offset, const std::string& plaintext,
                                         uint32_t chunk_size) {
  if (chunk_size == 0) return absl::InvalidArgumentError("chunk size is 0");
  TagDigest digest;
  std::vector<uint8_t> scratch(chunk_size);
  absl::Status st;
  for (const H2dLaneWrite& l : lanes) {
    if (l.key == nullptr || l.offset > plaintext.size() ||
        l.length > plaintext.size() - l.offset) {
      st = absl::InvalidArgumentError("a lane lies outside the window read back");
      break;
    }
    st = AddTags(*l.key, session_id, buffer_id, dest_offset, plaintext, l.offset, l.length,
                 chunk_size, l.window.first, scratch, digest);
    if (!st.ok()) break;
  }
  Zeroize(scratch.data(), scratch.size());
  if (!st.ok()) return st;
  return digest.Final();
}

}  // namespace gputravel
