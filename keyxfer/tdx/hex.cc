#include "keyxfer/tdx/hex.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace gputravel::tdx {
namespace {

int Nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string ToHex(absl::Span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

absl::StatusOr<std::vector<uint8_t>> FromHex(absl::string_view hex,
                                             size_t expected_bytes) {
  if (hex.size() != expected_bytes * 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "expected %d hex characters (%d bytes), got %d characters",
        expected_bytes * 2, expected_bytes, hex.size()));
  }
  std::vector<uint8_t> out(expected_bytes);
  for (size_t i = 0; i < hex.size(); ++i) {
    int v = Nibble(hex[i]);
    if (v < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "invalid hex character '%c' at position %d", hex[i], i));
    }
    out[i / 2] = static_cast<uint8_t>((out[i / 2] << 4) | v);
  }
  return out;
}

}  // namespace gputravel::tdx
