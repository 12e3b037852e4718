#include "util/hex.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace gputravel {
namespace {

int Nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string HexEncode(absl::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

std::string HexEncode(absl::Span<const uint8_t> bytes) {
  return HexEncode(absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

absl::StatusOr<std::string> HexDecode(absl::string_view hex) {
  if (hex.size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("odd number of hex characters (%d)", hex.size()));
  }
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < hex.size(); ++i) {
    int v = Nibble(hex[i]);
    if (v < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("invalid hex character '%c' at position %d", hex[i], i));
    }
    out[i / 2] = static_cast<char>((static_cast<unsigned char>(out[i / 2]) << 4) | v);
  }
  return out;
}

absl::StatusOr<std::vector<uint8_t>> HexDecodeExact(absl::string_view hex,
                                                    size_t expected_bytes) {
  if (hex.size() != expected_bytes * 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("expected %d hex characters (%d bytes), got %d characters",
                        expected_bytes * 2, expected_bytes, hex.size()));
  }
  auto bytes = HexDecode(hex);
  if (!bytes.ok()) return bytes.status();
  return std::vector<uint8_t>(bytes->begin(), bytes->end());
}

}  // namespace gputravel
