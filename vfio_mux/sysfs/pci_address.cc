#include "vfio_mux/sysfs/pci_address.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gputravel {
namespace {

// Strict hex: absl::SimpleHexAtoi would accept "0x" prefixes and signs, which
// have no place in a BDF.
bool ParseHexField(absl::string_view s, size_t min_len, size_t max_len,
                   uint32_t max_value, uint32_t* out) {
  if (s.size() < min_len || s.size() > max_len) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
    int d = absl::ascii_isdigit(static_cast<unsigned char>(c))
                ? c - '0'
                : absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    v = v * 16 + d;
  }
  if (v > max_value) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

std::string PciAddress::ToString() const {
  return absl::StrFormat("%04x:%02x:%02x.%x", domain, bus, slot, function);
}

absl::StatusOr<PciAddress> ParsePciAddress(absl::string_view bdf) {
  auto invalid = [&]() {
    return absl::InvalidArgumentError(absl::StrFormat(
        "invalid PCI address '%s': expected DDDD:BB:SS.F such as 0000:98:00.0 "
        "(see `lspci -D`)",
        absl::CHexEscape(bdf)));
  };
  std::vector<absl::string_view> colon = absl::StrSplit(bdf, ':');
  if (colon.size() == 2) colon.insert(colon.begin(), "0000");
  if (colon.size() != 3) return invalid();
  std::vector<absl::string_view> dot = absl::StrSplit(colon[2], '.');
  if (dot.size() != 2) return invalid();
  PciAddress a;
  if (!ParseHexField(colon[0], 4, 8, 0xffffffffu, &a.domain) ||
      !ParseHexField(colon[1], 2, 2, 0xff, &a.bus) ||
      !ParseHexField(dot[0], 2, 2, 0x1f, &a.slot) ||
      !ParseHexField(dot[1], 1, 1, 7, &a.function)) {
    return invalid();
  }
  return a;
}

absl::StatusOr<std::string> CanonicalBdf(absl::string_view bdf) {
  absl::StatusOr<PciAddress> a = ParsePciAddress(bdf);
  if (!a.ok()) return a.status();
  return a->ToString();
}

}  // namespace gputravel
