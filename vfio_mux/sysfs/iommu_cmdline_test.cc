#include "vfio_mux/sysfs/iommu_cmdline.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gputravel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

IommuEvidence Evidence(std::string cmdline, bool dmar = false) {
  IommuEvidence e;
  e.cmdline = std::move(cmdline);
  e.cmdline_file = "/proc/cmdline";
  e.dmar_active = dmar;
  e.iommu_class_dir = "/sys/class/iommu";
  return e;
}

TEST(CheckIntelIommu, OnWithPassthroughIsQuiet) {
  auto f = CheckIntelIommu(Evidence("BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt quiet\n"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_THAT(f->warnings, IsEmpty());
  EXPECT_THAT(f->notes, ElementsAre("kernel command line: IOMMU enabled"));
}

TEST(CheckIntelIommu, AnOptionListCountsAndTheLastOneWins) {
  EXPECT_TRUE(CheckIntelIommu(Evidence("ro intel_iommu=on,sm_on iommu=pt")).ok());
  auto off = CheckIntelIommu(Evidence("intel_iommu=on intel_iommu=off iommu=pt", true));
  ASSERT_EQ(off.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(off.status().message()),
              HasSubstr("intel_iommu=off is on the kernel command line (/proc/cmdline)"));
  EXPECT_TRUE(CheckIntelIommu(Evidence("intel_iommu=off intel_iommu=on iommu=pt")).ok());
}

TEST(CheckIntelIommu, MissingIsRefusedWithTheGrubFixUnlessTheKernelEnabledIt) {
  auto missing = CheckIntelIommu(Evidence("ro quiet iommu=pt"));
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(missing.status().message());
  EXPECT_THAT(msg, HasSubstr("intel_iommu=on is not on the kernel command line"));
  EXPECT_THAT(msg, HasSubstr("/sys/class/iommu has no dmar unit"));
  EXPECT_THAT(msg, HasSubstr("update-grub"));
  // "sm_on" alone does not turn it on.
  EXPECT_FALSE(CheckIntelIommu(Evidence("intel_iommu=sm_on iommu=pt")).ok());

  auto by_default = CheckIntelIommu(Evidence("ro quiet iommu=pt", /*dmar=*/true));
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  EXPECT_THAT(by_default->notes[0], HasSubstr("enabled the Intel IOMMU by default"));
}

TEST(CheckIntelIommu, NoPassthroughIsAWarning) {
  auto f = CheckIntelIommu(Evidence("ro intel_iommu=on"));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->warnings.size(), 1u);
  EXPECT_THAT(f->warnings[0], HasSubstr("iommu=pt is not on the kernel command line"));
}

}  // namespace
}  // namespace gputravel
