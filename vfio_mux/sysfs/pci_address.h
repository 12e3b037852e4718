#ifndef GPUTRAVEL_VFIO_MUX_SYSFS_PCI_ADDRESS_H_
#define GPUTRAVEL_VFIO_MUX_SYSFS_PCI_ADDRESS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gputravel {

// A PCI function address (BDF). Every BDF that reaches a sysfs path or a
// libvirt XML document goes through ParsePciAddress first: a BDF from a config
// file must never be able to name "../" or inject XML.
struct PciAddress {
  uint32_t domain = 0;    // 0..0xffffffff (VMD domains exceed 0xffff)
  uint32_t bus = 0;       // 0..0xff
  uint32_t slot = 0;      // 0..0x1f
  uint32_t function = 0;  // 0..7

  // Canonical sysfs spelling: "0000:98:00.0" (lowercase, domain at least 4
  // digits), the name the kernel uses under /sys/bus/pci/devices.
  std::string ToString() const;
};

// Accepts "DDDD:BB:SS.F" or "BB:SS.F" (domain 0), hex digits in either case.
absl::StatusOr<PciAddress> ParsePciAddress(absl::string_view bdf);

// ParsePciAddress(bdf)->ToString(): the canonical form, or the parse error.
absl::StatusOr<std::string> CanonicalBdf(absl::string_view bdf);

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_SYSFS_PCI_ADDRESS_H_
