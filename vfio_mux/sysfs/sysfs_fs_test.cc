#include "vfio_mux/sysfs/sysfs_fs.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

class RealSysfsFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("sysfs_fs_test.");
    std::ofstream(dir_ + "/attr") << "0x10de\n";
    std::filesystem::create_directory(dir_ + "/sub");
    std::filesystem::create_symlink("../../bus/pci/drivers/vfio-pci",
                                    dir_ + "/driver");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RealSysfsFsTest, ReadsWritesAndListsFiles) {
  std::shared_ptr<SysfsFs> fs = RealSysfsFs();
  EXPECT_EQ(*fs->ReadFile(dir_ + "/attr"), "0x10de\n");
  ASSERT_TRUE(fs->WriteFile(dir_ + "/attr", "vfio-pci").ok());
  // One write without truncation: the new bytes overwrite the start.
  EXPECT_EQ(*fs->ReadFile(dir_ + "/attr"), "vfio-pci");
  EXPECT_EQ(*fs->ReadLink(dir_ + "/driver"), "../../bus/pci/drivers/vfio-pci");
  std::vector<std::string> names = *fs->ListDir(dir_);
  EXPECT_EQ(names, (std::vector<std::string>{"attr", "driver", "sub"}));
  EXPECT_TRUE(fs->Exists(dir_ + "/sub"));
  EXPECT_FALSE(fs->Exists(dir_ + "/driver"));  // dangling link
  EXPECT_FALSE(fs->Exists(dir_ + "/missing"));
}

TEST_F(RealSysfsFsTest, ErrorsNamePathAndErrno) {
  std::shared_ptr<SysfsFs> fs = RealSysfsFs();
  absl::StatusOr<std::string> r = fs->ReadFile(dir_ + "/missing");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(dir_ + "/missing"), std::string::npos);
  EXPECT_NE(r.status().message().find("No such file"), std::string::npos);

  // Writes never create files: a typo in a sysfs path must fail, not leave a
  // stray regular file behind.
  absl::Status w = fs->WriteFile(dir_ + "/missing", "1");
  EXPECT_EQ(w.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/missing"));

  w = fs->WriteFile(dir_ + "/sub", "1");
  EXPECT_FALSE(w.ok());
  EXPECT_NE(w.message().find("errno"), std::string::npos) << w;

  EXPECT_FALSE(fs->ReadLink(dir_ + "/attr").ok());
  EXPECT_EQ(fs->ListDir(dir_ + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

// The holder scan identifies a device file by its number, through links
// (as /proc/PID/fd/N is one), never by the name it was opened under.
TEST_F(RealSysfsFsTest, CharDeviceNumberFollowsLinksToTheDevice) {
  std::shared_ptr<SysfsFs> fs = RealSysfsFs();
  std::filesystem::create_symlink("/dev/null", dir_ + "/null-link");
  absl::StatusOr<uint64_t> direct = fs->CharDeviceNumber("/dev/null");
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_NE(*direct, 0u);
  EXPECT_EQ(*fs->CharDeviceNumber(dir_ + "/null-link"), *direct);
  EXPECT_EQ(*fs->CharDeviceNumber(dir_), 0u);  // not a character device
  EXPECT_EQ(fs->CharDeviceNumber(dir_ + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gputravel
