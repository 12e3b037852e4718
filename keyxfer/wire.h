#ifndef GPUTRAVEL_KEYXFER_WIRE_H_
#define GPUTRAVEL_KEYXFER_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace gputravel {

// Unambiguous byte encoding for transcripts and associated data: integers
// big-endian, byte strings prefixed with their 32-bit length, so no two field
// sequences encode to the same bytes.
class WireWriter {
 public:
  void U32(uint32_t v);
  void U64(uint64_t v);
  void Bytes(absl::string_view b);
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what WireWriter wrote; every read fails cleanly on truncation.
class WireReader {
 public:
  explicit WireReader(absl::string_view in) : in_(in) {}
  bool U32(uint32_t* v);
  bool U64(uint64_t* v);
  bool Bytes(std::string* b);
  bool done() const { return in_.empty(); }

 private:
  absl::string_view in_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_WIRE_H_
