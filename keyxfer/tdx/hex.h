#ifndef GPUTRAVEL_KEYXFER_TDX_HEX_H_
#define GPUTRAVEL_KEYXFER_TDX_HEX_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gputravel::tdx {

// Lowercase hex, the form measurements are published in (and compared by eye).
std::string ToHex(absl::Span<const uint8_t> bytes);

// Strict decoder for policy values: exactly `expected_bytes` bytes, both cases
// accepted, nothing else (no 0x prefix, no separators). absl::HexStringToBytes
// silently maps bad characters, which would turn a typo into a wrong pin.
// Errors say what was wrong and where; the caller prefixes the field name.
absl::StatusOr<std::vector<uint8_t>> FromHex(absl::string_view hex,
                                             size_t expected_bytes);

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_HEX_H_
