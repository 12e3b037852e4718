#include "vfio_mux/libvirt/hostdev_xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

// The sandbox has no PATH guarantees; Debian's libvirt-clients puts it here.
constexpr char kValidator[] = "/usr/bin/virt-xml-validate";

// Runs virt-xml-validate on `xml` as a `domain` document; returns its exit
// status and puts its output in *out.
int Validate(const std::string& xml, std::string* out) {
  const std::string dir = MakeTestDir("hostdev_xml_test.");
  const std::string file = dir + "/domain.xml";
  std::ofstream(file) << xml;
  const std::string cmd =
      absl::StrCat(kValidator, " ", file, " domain 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  char buf[512];
  out->clear();
  while (p != nullptr && fgets(buf, sizeof(buf), p) != nullptr) *out += buf;
  int status = p != nullptr ? pclose(p) : -1;
  std::filesystem::remove_all(dir);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The smallest domain the schema accepts, around `devices`.
std::string MinimalDomain(const std::string& devices) {
  return absl::StrCat(
      "<domain type='kvm'>\n"
      "  <name>gputravel-validate</name>\n"
      "  <memory unit='KiB'>1048576</memory>\n"
      "  <os><type arch='x86_64' machine='q35'>hvm</type></os>\n"
      "  <devices>\n",
      devices,
      "  </devices>\n"
      "</domain>\n");
}

TEST(HostdevAliasTest, AcceptsUserAliases) {
  EXPECT_TRUE(ValidateHostdevAlias("ua-gpu0").ok());
  EXPECT_TRUE(ValidateHostdevAlias("ua-GPU_0.a-b").ok());
}

TEST(HostdevAliasTest, RejectsOthersWithReason) {
  for (const char* bad : {"gpu0", "hostdev0", "ua-", "ua-gpu 0", "ua-gpu'/>",
                          "ua-gpü", "UA-gpu0"}) {
    absl::Status s = ValidateHostdevAlias(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("ua-"), absl::string_view::npos) << s;
  }
  EXPECT_FALSE(ValidateHostdevAlias("ua-" + std::string(62, 'x')).ok());
}

TEST(HostdevAliasTest, DefaultAliasIsValid) {
  EXPECT_EQ(DefaultHostdevAlias("gpu0"), "ua-gputravel-gpu0");
  EXPECT_EQ(DefaultHostdevAlias("0000:98:00.0"), "ua-gputravel-0000-98-00.0");
  EXPECT_TRUE(ValidateHostdevAlias(DefaultHostdevAlias("a b/c'd")).ok());
  EXPECT_TRUE(ValidateHostdevAlias(DefaultHostdevAlias(std::string(100, 'g')))
                  .ok());
}

TEST(HostdevXmlTest, GeneratesManagedNoHostdev) {
  absl::StatusOr<std::string> xml = HostdevXml("0000:98:00.0", "ua-gpu0");
  ASSERT_TRUE(xml.ok()) << xml.status();
  EXPECT_EQ(*xml,
            "<hostdev mode='subsystem' type='pci' managed='no'>\n"
            "  <source>\n"
            "    <address domain='0x0000' bus='0x98' slot='0x00' "
            "function='0x0'/>\n"
            "  </source>\n"
            "  <alias name='ua-gpu0'/>\n"
            "</hostdev>\n");
  absl::StatusOr<std::string> bare = HostdevXml("ab:1f.7", "");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->find("<alias"), std::string::npos);
  EXPECT_NE(bare->find("bus='0xab' slot='0x1f' function='0x7'"),
            std::string::npos);
}

TEST(HostdevXmlTest, RejectsBadInput) {
  EXPECT_EQ(HostdevXml("0000:98:00.0' evil='1", "ua-gpu0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HostdevXml("0000:98:00.0", "gpu0").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostdevXmlTest, EveryGeneratedFormPassesLibvirtSchema) {
  ASSERT_TRUE(std::filesystem::exists(kValidator))
      << kValidator << " missing: apt-get install libvirt-clients";
  const std::pair<const char*, const char*> cases[] = {
      {"0000:98:00.0", "ua-gpu0"},
      {"0000:b8:1f.7", ""},
      {"10000:01:00.0", "ua-gputravel-0000-98-00.0"},
  };
  for (const auto& [bdf, alias] : cases) {
    absl::StatusOr<std::string> xml = HostdevXml(bdf, alias);
    ASSERT_TRUE(xml.ok()) << xml.status();
    std::string out;
    EXPECT_EQ(Validate(MinimalDomain(*xml), &out), 0)
        << bdf << " " << alias << ":\n" << *xml << out;
  }
  std::string xml = *HostdevXml("0000:98:00.0", DefaultHostdevAlias("gpu 0"));
  std::string out;
  EXPECT_EQ(Validate(MinimalDomain(xml), &out), 0) << out;
}

TEST(HostdevXmlTest, ValidatorCatchesBrokenHostdev) {
  // Guards the test above: the validator must actually reject things.
  std::string out;
  EXPECT_NE(Validate(MinimalDomain("<hostdev mode='subsystem' type='pci'>"
                                   "<alias name='bad name'/></hostdev>\n"),
                     &out),
            0);
}

// Shaped like virDomainGetXMLDesc of a running QEMU domain; its first
// hostdev is laid out as libvirt 9.0 writes a hot-plugged one
// (//vfio_mux/real_kernel:libvirt_template_test prints it).
constexpr char kLiveXml[] = R"(<domain type='kvm' id='3'>
  <name>td-a</name>
  <metadata>
    <gt:note xmlns:gt="urn:gputravel">
      <hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x11' slot='0x00' function='0x0'/></source></hostdev>
    </gt:note>
  </metadata>
  <!-- <hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x12' slot='0x00' function='0x0'/></source></hostdev> -->
  <description><![CDATA[<hostdev mode='subsystem' type='pci'>]]> &amp; more</description>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <hostdev mode='subsystem' type='pci' managed='no'>
      <driver name='vfio'/>
      <source>
        <address domain='0x0000' bus='0x98' slot='0x00' function='0x0'/>
      </source>
      <alias name='ua-gpu0'/>
      <address type='pci' domain='0x0000' bus='0x05' slot='0x00' function='0x0'/>
    </hostdev>
    <hostdev mode="subsystem" type="pci" managed="yes">
      <source>
        <address domain="0x0000" bus="0xb8" slot="0x00" function="0x1"/>
      </source>
      <alias name="hostdev1"/>
    </hostdev>
    <hostdev mode='subsystem' type='usb' managed='yes'>
      <source><vendor id='0x1234'/><product id='0xbeef'/></source>
      <alias name='hostdev2'/>
    </hostdev>
  </devices>
</domain>
)";

TEST(ParsePciHostdevsTest, FindsOnlyRealPciHostdevs) {
  absl::StatusOr<std::vector<PciHostdev>> h = ParsePciHostdevs(kLiveXml);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].bdf, "0000:98:00.0");  // host address, not guest 05:00.0
  EXPECT_EQ((*h)[0].alias, "ua-gpu0");
  EXPECT_FALSE((*h)[0].managed);
  EXPECT_EQ((*h)[1].bdf, "0000:b8:00.1");
  EXPECT_EQ((*h)[1].alias, "hostdev1");
  EXPECT_TRUE((*h)[1].managed);
}

TEST(ParsePciHostdevsTest, RoundTripsGeneratedXml) {
  std::string dev = *HostdevXml("0000:98:00.0", "ua-gpu0");
  absl::StatusOr<std::vector<PciHostdev>> h =
      ParsePciHostdevs(MinimalDomain(dev));
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 1u);
  EXPECT_EQ((*h)[0].bdf, "0000:98:00.0");
  EXPECT_EQ((*h)[0].alias, "ua-gpu0");
}

TEST(ParsePciHostdevsTest, DomainWithoutHostdevs) {
  absl::StatusOr<std::vector<PciHostdev>> h = ParsePciHostdevs(
      "<?xml version='1.0'?>\n<domain type='test'><name>test</name>"
      "<devices><disk type='file' device='disk'/></devices></domain>");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->empty());
}

TEST(ParsePciHostdevsTest, MalformedXmlIsAnErrorNotAGuess) {
  for (const char* bad : {
           "",
           "<domain><devices></domain>",
           "<domain><devices>",
           "<domain a=1/>",
           "<domain a='1' a='2'/>",
           "<domain/><domain/>",
           "<domain><!-- open",
           "<domain x='&bogus;'/>",
           "<domain><devices><hostdev mode='subsystem' type='pci'><source>"
           "<address domain='0x0000' bus='0x98'/></source></hostdev>"
           "</devices></domain>",
       }) {
    absl::StatusOr<std::vector<PciHostdev>> h = ParsePciHostdevs(bad);
    EXPECT_FALSE(h.ok()) << bad;
    if (!h.ok()) {
      EXPECT_NE(h.status().message().find("refusing to guess"),
                absl::string_view::npos);
    }
  }
}

// The example domain operators start from holds the same hostdev the backend
// attaches and looks for, so the MUX recognises a cold-plugged GPU.
TEST(ParsePciHostdevsTest, ExampleTdxGuestMatchesWhatTheBackendAttaches) {
  std::ifstream in("deploy/libvirt/tdx-guest.xml");
  ASSERT_TRUE(in.good()) << "deploy/libvirt/tdx-guest.xml not in runfiles";
  std::string xml((std::istreambuf_iterator<char>(in)),
                  std::istreambuf_iterator<char>());
  absl::StatusOr<std::vector<PciHostdev>> h = ParsePciHostdevs(xml);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->size(), 1u);
  EXPECT_EQ((*h)[0].bdf, "0000:98:00.0");
  EXPECT_EQ((*h)[0].alias, DefaultHostdevAlias("gpu0"));
  EXPECT_FALSE((*h)[0].managed);
  // ... and is a TD, which the backend requires before it attaches.
  EXPECT_EQ(*LaunchSecurityType(xml), "tdx");
}

// Only <domain><launchSecurity> counts: not one in metadata, a comment or
// deeper in the tree.
TEST(LaunchSecurityTypeTest, ReadsOnlyTheDomainsOwn) {
  EXPECT_EQ(*LaunchSecurityType("<domain><launchSecurity type='tdx'/></domain>"), "tdx");
  EXPECT_EQ(*LaunchSecurityType("<domain><launchSecurity type='sev'/></domain>"), "sev");
  EXPECT_EQ(*LaunchSecurityType("<domain><devices/></domain>"), "");
  EXPECT_EQ(*LaunchSecurityType("<domain><!-- <launchSecurity type='tdx'/> --></domain>"), "");
  EXPECT_EQ(*LaunchSecurityType(
                "<domain><metadata><launchSecurity type='tdx'/></metadata></domain>"),
            "");
  EXPECT_FALSE(LaunchSecurityType("<domain><launchSecurity type='tdx'>").ok());
}

}  // namespace
}  // namespace gputravel
