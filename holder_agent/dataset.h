#ifndef GPUTRAVEL_HOLDER_AGENT_DATASET_H_
#define GPUTRAVEL_HOLDER_AGENT_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gputravel {

// A read-only mapping of part of a dataset file (page-aligned underneath,
// `data()` points at the requested first byte); unmapped when destroyed, so
// its pages leave the process's resident set. Move-only.
class DatasetMapping {
 public:
  DatasetMapping() = default;
  ~DatasetMapping();
  DatasetMapping(DatasetMapping&& other) noexcept { *this = std::move(other); }
  DatasetMapping& operator=(DatasetMapping&& other) noexcept;
  DatasetMapping(const DatasetMapping&) = delete;
  DatasetMapping& operator=(const DatasetMapping&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  friend class Dataset;
  void* base_ = nullptr;  // what mmap returned (page-aligned)
  size_t mapped_ = 0;     // bytes mapped from base_
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A holder's dataset on local disk, read by windows (streaming: no more than
// a few chunks are ever in memory), either mapped in place (Map) or copied
// with pread (Read).
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

  // Maps payload bytes [offset, offset + n) read-only, in place (any offset:
  // the mapping starts at the page below it, the llm.c header included).
  // Thread-safe. A file truncated while a range is mapped makes the next
  // access to the lost pages fault (SIGBUS); Map itself refuses ranges the
  // file no longer has.
  absl::StatusOr<DatasetMapping> Map(uint64_t offset, size_t n) const;
  // Whether the file can be mapped at all (probed at Open; false on file
  // systems without mmap, where Read is the only way).
  bool mappable() const { return mappable_; }

 private:
  Dataset() = default;
  std::string path_, format_;
  int fd_ = -1;
  uint64_t payload_offset_ = 0;
  uint64_t payload_bytes_ = 0;
  bool mappable_ = false;
};

// Writes an llm.c token shard (used by the demo and tests to make datasets).
absl::Status WriteLlmcShard(const std::string& path, const uint16_t* tokens,
                            uint64_t count);

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_DATASET_H_
