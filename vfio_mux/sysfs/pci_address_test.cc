#include "vfio_mux/sysfs/pci_address.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(PciAddressTest, ParsesFullAddress) {
  absl::StatusOr<PciAddress> a = ParsePciAddress("0000:98:00.0");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->domain, 0u);
  EXPECT_EQ(a->bus, 0x98u);
  EXPECT_EQ(a->slot, 0u);
  EXPECT_EQ(a->function, 0u);
  EXPECT_EQ(a->ToString(), "0000:98:00.0");
}

TEST(PciAddressTest, CanonicalizesCaseAndMissingDomain) {
  EXPECT_EQ(*CanonicalBdf("AB:1F.7"), "0000:ab:1f.7");
  EXPECT_EQ(*CanonicalBdf("10000:01:00.1"), "10000:01:00.1");
}

TEST(PciAddressTest, RejectsMalformedAndPathLikeInput) {
  for (const char* bad :
       {"", "0000:98:00", "0000:98:00.8", "0000:98:20.0", "0000:998:00.0",
        "../../etc", "0000:98:00.0/../x", "0x00:98:00.0", "0000:98:00.0\n",
        "0000:98:0g.0", "0000:98:00.0'/>"}) {
    absl::StatusOr<PciAddress> a = ParsePciAddress(bad);
    EXPECT_FALSE(a.ok()) << bad;
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(a.status().message().find("lspci -D"), absl::string_view::npos);
    }
  }
}

}  // namespace
}  // namespace gputravel
