#include "cli/request_id.h"

#include <cstdint>

#include "absl/types/span.h"
#include "keyxfer/random.h"
#include "util/hex.h"

namespace gputravel::cli {

std::string RandomRequestId() {
  uint8_t b[16];
  RandomBytes(b, sizeof(b));
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // variant RFC 4122
  const std::string hex = HexEncode(absl::Span<const uint8_t>(b, sizeof(b)));
  return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
         hex.substr(16, 4) + "-" + hex.substr(20);
}

}  // namespace gputravel::cli
