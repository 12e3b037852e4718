#ifndef GPUTRAVEL_VFIO_MUX_LIBVIRT_HOSTDEV_XML_H_
#define GPUTRAVEL_VFIO_MUX_LIBVIRT_HOSTDEV_XML_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gputravel {

// OK if `alias` is a libvirt user alias: "ua-" then 1 to 61 characters of
// [A-Za-z0-9_.-] (libvirt keeps only "ua-" aliases it did not invent, and
// its schema allows only those characters).
absl::Status ValidateHostdevAlias(absl::string_view alias);

// "ua-gputravel-" + the MUX's GPU name with every other character mapped to
// '-': the alias used when the config does not give one.
std::string DefaultHostdevAlias(absl::string_view gpu_name);

// The <hostdev> element that passes the PCI function `bdf` through with
// managed='no' (the MUX, not libvirt, owns the vfio-pci binding). `alias` may
// be empty (no <alias>); otherwise it must pass ValidateHostdevAlias.
absl::StatusOr<std::string> HostdevXml(absl::string_view bdf,
                                       absl::string_view alias);

// A PCI host device found in a domain's XML.
struct PciHostdev {
  std::string bdf;    // canonical host address from <source><address>
  std::string alias;  // <alias name=...>, "" when absent (inactive XML)
  bool managed = false;
};

// Every <hostdev mode='subsystem' type='pci'> directly under
// <domain><devices>, from libvirt's XML (virDomainGetXMLDesc). Comments,
// CDATA and <metadata> cannot produce matches; malformed XML is an error
// rather than a guess, because a missed hostdev would let one GPU be attached
// to two VMs.
absl::StatusOr<std::vector<PciHostdev>> ParsePciHostdevs(
    absl::string_view domain_xml);

// The type of the domain's <launchSecurity> ("tdx" for a TDX guest, "sev",
// ...), "" when it has none; malformed XML is an error, as above.
absl::StatusOr<std::string> LaunchSecurityType(absl::string_view domain_xml);

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_LIBVIRT_HOSTDEV_XML_H_
