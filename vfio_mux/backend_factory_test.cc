#include "vfio_mux/backend_factory.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

absl::Status Make(const std::string& text) {
  return MakeRoutingBackend(nlohmann::json::parse(text), "mux.json").status();
}

TEST(BackendFactoryTest, BackendIsRequiredNoDefault) {
  auto s = Make(R"({"gpus": [{"name": "gpu0", "admin_endpoint": "unix:/x"}]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'backend'"), std::string::npos);
}

TEST(BackendFactoryTest, UnknownBackendNamed) {
  auto s = Make(R"({"backend": "magic"})");
  EXPECT_NE(s.message().find("unknown MUX backend 'magic'"), std::string::npos);
}

TEST(BackendFactoryTest, EmulatedNeedsEndpoints) {
  EXPECT_TRUE(Make(R"({"backend": "emulated", "gpus": [{"name": "gpu0", "admin_endpoint": "unix:/x"}]})").ok());
  auto s = Make(R"({"backend": "emulated", "gpus": [{"name": "gpu0"}]})");
  EXPECT_NE(s.message().find("admin_endpoint"), std::string::npos);
}

TEST(BackendFactoryTest, SysfsSectionRequiredAndChecked) {
  EXPECT_NE(Make(R"({"backend": "sysfs"})").message().find("'sysfs'"), std::string::npos);
  auto s = Make(R"({"backend": "sysfs", "sysfs": {"driver_timeout_ms": "x"}})");
  EXPECT_NE(s.message().find("driver_timeout_ms"), std::string::npos);
  // A root with no PCI devices: the backend itself reports what is missing.
  s = Make(R"({"backend": "sysfs", "sysfs": {"sysfs_root": "/nonexistent-root",
               "gpus": [{"name": "gpu0", "bdf": "0000:98:00.0"}]}})");
  EXPECT_FALSE(s.ok());
}

TEST(BackendFactoryTest, LibvirtSectionChecked) {
  EXPECT_NE(Make(R"({"backend": "libvirt", "libvirt": {}})").message().find("'gpus'"),
            std::string::npos);
  auto s = Make(R"({"backend": "libvirt", "libvirt": {"gpus": [{"name": "g"}]}})");
  EXPECT_NE(s.message().find("'bdf'"), std::string::npos);
}

}  // namespace
}  // namespace gputravel
