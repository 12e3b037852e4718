#include "vfio_mux/backend_factory.h"

#include "gtest/gtest.h"

namespace gputravel {
namespace {

// The configuration's "domains" is added where a test does not give one.
absl::Status Make(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text);
  if (j.is_object() && !j.contains("domains")) j["domains"] = {"td-a"};
  return MakeRoutingBackend(j, "mux.json").status();
}

// P8: no backend without the administrator's list of domains.
TEST(BackendFactoryTest, DomainsRequiredAndChecked) {
  const std::string gpus = R"("gpus": [{"name": "gpu0", "admin_endpoint": "unix:/x"}])";
  auto s = MakeRoutingBackend(
      nlohmann::json::parse(R"({"backend": "emulated", )" + gpus + "}"), "mux.json").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'domains' must be a non-empty array"), std::string::npos) << s;
  for (const char* bad : {R"([])", R"(["a", "a"])", R"(["a b"])", R"([7])"}) {
    s = MakeRoutingBackend(nlohmann::json::parse(std::string(R"({"backend": "emulated", )") +
                                                 gpus + R"(, "domains": )" + bad + "}"),
                           "mux.json")
            .status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(Make(R"({"backend": "emulated", "domains": ["td-a", "orchestrator"], )" + gpus +
                   "}")
                  .ok());
}

// A libvirt name mapping is only for a configured domain; it does not make
// one routable.
TEST(BackendFactoryTest, LibvirtDomainNamesOnlyForConfiguredDomains) {
  auto s = Make(R"({"backend": "libvirt", "domains": ["td-a"], "libvirt": {
      "uri": "test:///default", "check_sysfs": false,
      "domain_names": {"td-b": "test"},
      "gpus": [{"name": "gpu0", "bdf": "0000:98:00.0"}]}})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'td-b', which is not in"), std::string::npos) << s;
}

// An empty "gpus" list is refused: the sysfs backend routes only the GPUs
// its administrator lists.
TEST(BackendFactoryTest, SysfsNeedsAnExplicitGpuList) {
  auto s = Make(R"({"backend": "sysfs", "sysfs": {"gpus": []}})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("non-empty array"), std::string::npos) << s;
  s = Make(R"({"backend": "sysfs", "sysfs": {}})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(BackendFactoryTest, BackendIsRequiredNoDefault) {
  auto s = Make(R"({"gpus": [{"name": "gpu0", "admin_endpoint": "unix:/x"}]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'backend'"), std::string::npos);
}

TEST(BackendFactoryTest, UnknownBackendNamed) {
  auto s = Make(R"({"backend": "magic"})");
  EXPECT_NE(s.message().find("unknown MUX backend 'magic'"), std::string::npos);
  // A misspelt backend is named as such, not as its section's unknown field.
  s = Make(R"({"backend": "sysfss", "sysfs": {}})");
  EXPECT_NE(s.message().find("unknown MUX backend 'sysfss'"), std::string::npos) << s;
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

// A misspelt field is refused, not ignored, at every level: a sysfs or
// libvirt option would otherwise take its default silently.
TEST(BackendFactoryTest, UnknownFieldsRefusedAtEveryLevel) {
  auto s = Make(R"({"backend": "emulated", "listen": "x", "state_file": "x", "audit_log": "x",
                    "tls": {}, "gpu": [], "gpus": [{"name": "gpu0", "admin_endpoint": "unix:/x"}]})");
  EXPECT_NE(s.message().find("mux.json: unknown field 'gpu'"), std::string::npos) << s;
  s = Make(R"({"backend": "emulated", "sysfs": {},
               "gpus": [{"name": "gpu0", "admin_endpoint": "unix:/x"}]})");
  EXPECT_NE(s.message().find("unknown field 'sysfs'"), std::string::npos) << s;
  s = Make(R"({"backend": "emulated", "gpus": [{"name": "g", "admin_endpoint": "u", "bdf": "b"}]})");
  EXPECT_NE(s.message().find("gpus[]: unknown field 'bdf'"), std::string::npos) << s;
  s = Make(R"({"backend": "sysfs", "sysfs": {"driver_timeout": 5}})");
  EXPECT_NE(s.message().find("sysfs: unknown field 'driver_timeout'"), std::string::npos) << s;
  s = Make(R"({"backend": "sysfs", "sysfs": {"gpus": [{"bdf": "0000:98:00.0", "alias": "a"}]}})");
  EXPECT_NE(s.message().find("unknown field 'alias'"), std::string::npos) << s;
  s = Make(R"({"backend": "libvirt", "libvirt": {"detach_timeout": 5, "gpus": []}})");
  EXPECT_NE(s.message().find("libvirt: unknown field 'detach_timeout'"), std::string::npos) << s;
  s = Make(R"({"backend": "libvirt", "libvirt": {"gpus": [{"bdf": "b", "domain": "d"}]}})");
  EXPECT_NE(s.message().find("libvirt.gpus[]: unknown field 'domain'"), std::string::npos) << s;
}

// Every field of the shipped examples is known (the examples' placeholders
// are for the backends to refuse, not the parser).
TEST(BackendFactoryTest, ShippedExamplesUseOnlyKnownFields) {
  for (const char* path : {"deploy/examples/mux-sysfs.json", "deploy/examples/mux-libvirt.json"}) {
    FILE* f = fopen(path, "r");
    ASSERT_NE(f, nullptr) << path;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    fclose(f);
    auto s = Make(text);
    EXPECT_EQ(s.message().find("unknown field"), std::string::npos) << path << ": " << s;
  }
}

}  // namespace
}  // namespace gputravel
