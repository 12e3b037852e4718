#ifndef GPUTRAVEL_UTIL_HEX_H_
#define GPUTRAVEL_UTIL_HEX_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gputravel {

// Lowercase hex, the form measurements, pins and identifiers are published in
// (and compared by eye).
std::string HexEncode(absl::string_view bytes);
std::string HexEncode(absl::Span<const uint8_t> bytes);

// The strict decoder: an even number of hex digits, both cases accepted,
// nothing else (no 0x prefix, no separators, no white space).
// absl::HexStringToBytes silently maps bad characters, which would turn a
// typo into a wrong pin. Errors say what was wrong and where; the caller
// prefixes the field or file.
absl::StatusOr<std::string> HexDecode(absl::string_view hex);

// HexDecode of exactly `expected_bytes` bytes.
absl::StatusOr<std::vector<uint8_t>> HexDecodeExact(absl::string_view hex,
                                                    size_t expected_bytes);

}  // namespace gputravel

#endif  // GPUTRAVEL_UTIL_HEX_H_
