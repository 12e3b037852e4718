#ifndef GPUTRAVEL_HOLDER_AGENT_DATASET_H_
#define GPUTRAVEL_HOLDER_AGENT_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gputravel {

// A holder's dataset on local disk, read by windows with pread (streaming: no
// more than one chunk is ever in memory).
//   "llmc-tokens": an llm.c token shard: a header of 256 little-endian int32
//     (magic 20240520, version 1, token count, rest reserved) then `count`
//     uint16 tokens. The payload is the token bytes.
//   "raw": any file; the payload is the whole file.
class Dataset {
 public:
  static constexpr int32_t kLlmcMagic = 20240520;
  static constexpr int32_t kLlmcVersion = 1;
  static constexpr uint64_t kLlmcHeaderBytes = 256 * 4;

  // Opens and validates; errors name the file and what is wrong with it.
  // `format` is "llmc-tokens", "raw" or "auto" (llm.c if the magic matches).
  static absl::StatusOr<std::unique_ptr<Dataset>> Open(const std::string& path,
                                                       const std::string& format);
  ~Dataset();

  const std::string& path() const { return path_; }
  const std::string& format() const { return format_; }
  uint64_t payload_bytes() const { return payload_bytes_; }

  // Reads payload bytes [offset, offset + n) into dst.
  absl::Status Read(uint64_t offset, uint8_t* dst, size_t n) const;

 private:
  Dataset() = default;
  std::string path_, format_;
  int fd_ = -1;
  uint64_t payload_offset_ = 0;
  uint64_t payload_bytes_ = 0;
};

// Writes an llm.c token shard (used by the demo and tests to make datasets).
absl::Status WriteLlmcShard(const std::string& path, const uint16_t* tokens,
                            uint64_t count);

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_DATASET_H_
