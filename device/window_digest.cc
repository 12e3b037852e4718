#include "device/window_digest.h"

#include <algorithm>
#include <vector>

#include "device/tag_digest.h"
#include "keyxfer/device_session.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

absl::StatusOr<std::string> WindowDigest(const ChannelMaterial& key,
                                         uint64_t session_id, uint64_t buffer_id,
                                         uint64_t dest_offset,
                                         const std::string& plaintext,
                                         uint32_t chunk_size,
                                         uint32_t first_counter) {
  auto cipher = ChannelCipher::Create(key);
  if (!cipher.ok()) return cipher.status();
  TagDigest digest;
  std::vector<uint8_t> scratch(chunk_size);
  for (uint64_t off = 0, i = 0; off < plaintext.size(); off += chunk_size, ++i) {
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(chunk_size, plaintext.size() - off));
    std::string aad = ChunkAad(session_id, buffer_id, dest_offset + off, n);
    uint8_t tag[kGcmTagSize];
    absl::Status st = (*cipher)->Encrypt(
        first_counter + static_cast<uint32_t>(i),
        reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
        reinterpret_cast<const uint8_t*>(plaintext.data()) + off, n, scratch.data(), tag);
    if (!st.ok()) return st;
    digest.Add(tag);
  }
  Zeroize(scratch.data(), scratch.size());
  return digest.Final();
}

}  // namespace gputravel
