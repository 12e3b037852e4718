#include "orchestrator/campaign_config.h"

#include <functional>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

nlohmann::json Good() {
  return nlohmann::json::parse(R"({
    "listen": "unix:/tmp/o.sock", "domain": "orchestrator", "state_dir": "/tmp/s",
    "mux_endpoint": "unix:/tmp/m.sock",
    "gpu": {"name": "gpu0", "device_endpoint": "unix:/tmp/d.sock", "device_ca": "/tmp/ca.pem"},
    "attestation": {"backend": "dev"},
    "campaigns": [{"name": "c", "buffer_bytes": 1048576, "chunk_bytes": 262144,
                   "rounds": 2, "trip_timeout_seconds": 30,
                   "holders": [{"name": "a", "endpoint": "unix:/a", "domain": "ta"},
                               {"name": "b", "endpoint": "unix:/b", "domain": "tb"}]}]
  })");
}

TEST(CampaignConfigTest, GoodConfigParses) {
  auto c = ParseOrchestratorConfig(Good(), "o.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->campaigns[0].holders.size(), 2u);
  EXPECT_EQ(c->campaigns[0].rounds, 2u);
  EXPECT_EQ(c->campaigns[0].chunk_bytes, 262144u);
}

struct BadCase {
  std::string name;
  std::function<void(nlohmann::json&)> mutate;
  std::string expected;  // substring of the error
};

class BadConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadConfigTest, ErrorNamesTheField) {
  auto j = Good();
  GetParam().mutate(j);
  auto c = ParseOrchestratorConfig(j, "o.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(GetParam().expected), std::string::npos)
      << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Fields, BadConfigTest,
    ::testing::Values(
        BadCase{"no_listen", [](nlohmann::json& j) { j.erase("listen"); }, "'listen'"},
        BadCase{"no_domain", [](nlohmann::json& j) { j.erase("domain"); }, "'domain'"},
        BadCase{"no_state", [](nlohmann::json& j) { j.erase("state_dir"); }, "'state_dir'"},
        BadCase{"no_mux", [](nlohmann::json& j) { j.erase("mux_endpoint"); }, "'mux_endpoint'"},
        BadCase{"no_gpu", [](nlohmann::json& j) { j.erase("gpu"); }, "'gpu'"},
        BadCase{"gpu_ca", [](nlohmann::json& j) { j["gpu"].erase("device_ca"); }, "gpu: missing field 'device_ca'"},
        BadCase{"no_att", [](nlohmann::json& j) { j.erase("attestation"); }, "'attestation'"},
        BadCase{"no_campaigns", [](nlohmann::json& j) { j["campaigns"] = nlohmann::json::array(); }, "'campaigns'"},
        BadCase{"buffer_zero", [](nlohmann::json& j) { j["campaigns"][0]["buffer_bytes"] = 0; }, "campaigns[0].buffer_bytes"},
        BadCase{"buffer_unaligned", [](nlohmann::json& j) { j["campaigns"][0]["buffer_bytes"] = 33; }, "campaigns[0].buffer_bytes"},
        BadCase{"buffer_string", [](nlohmann::json& j) { j["campaigns"][0]["buffer_bytes"] = "1M"; }, "'buffer_bytes' must be a non-negative integer"},
        BadCase{"chunk", [](nlohmann::json& j) { j["campaigns"][0]["chunk_bytes"] = 100; }, "campaigns[0].chunk_bytes"},
        BadCase{"rounds", [](nlohmann::json& j) { j["campaigns"][0]["rounds"] = 0; }, "campaigns[0].rounds"},
        BadCase{"timeout", [](nlohmann::json& j) { j["campaigns"][0]["trip_timeout_seconds"] = -1; }, "trip_timeout_seconds"},
        BadCase{"no_holders", [](nlohmann::json& j) { j["campaigns"][0].erase("holders"); }, "campaigns[0].holders"},
        BadCase{"holder_endpoint", [](nlohmann::json& j) { j["campaigns"][0]["holders"][1].erase("endpoint"); }, "holders[1]: missing field 'endpoint'"},
        BadCase{"holder_dup", [](nlohmann::json& j) { j["campaigns"][0]["holders"][1]["name"] = "a"; }, "holder 'a' appears twice"},
        BadCase{"domain_dup", [](nlohmann::json& j) { j["campaigns"][0]["holders"][1]["domain"] = "ta"; }, "domain 'ta' is used by two holders"},
        BadCase{"campaign_dup", [](nlohmann::json& j) { j["campaigns"].push_back(j["campaigns"][0]); }, "campaign 'c' appears twice"}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return i.param.name; });

}  // namespace
}  // namespace gputravel
