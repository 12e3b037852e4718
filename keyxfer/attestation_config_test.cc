#include "keyxfer/attestation_config.h"

#include "gtest/gtest.h"
#include "util/files.h"

namespace gputravel {
namespace {

nlohmann::json Section(const std::string& example) {
  auto j = ReadJsonFile("deploy/examples/" + example);
  EXPECT_TRUE(j.ok()) << j.status();
  return (*j)["attestation"];
}

TEST(AttestationConfigTest, ExampleTdxConfigsBuildTdxBackend) {
  // The examples carry placeholders where a deployment puts real values: the
  // placeholders must be refused, proving the policy is really parsed.
  auto orch = MakeAttestationFromConfig(Section("orchestrator-tdx.json"), "o", "orchestrator");
  EXPECT_FALSE(orch.ok());
  EXPECT_NE(orch.status().message().find("mrtd"), std::string::npos) << orch.status();
  nlohmann::json s = Section("holder-tdx.json");
  s["tdx"]["peer_policy"]["mrtd"] = {std::string(96, 'a')};
  auto holder = MakeAttestationFromConfig(s, "h", "td-hospital-a");
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->backend, "tdx");
  EXPECT_NE(holder->attester, nullptr);
  EXPECT_NE(holder->verifier, nullptr);
}

TEST(AttestationConfigTest, TdxNeedsPeerPolicy) {
  auto st = MakeAttestationFromConfig(nlohmann::json::parse(R"({"backend": "tdx", "tdx": {}})"),
                                      "h.json: attestation", "d");
  EXPECT_NE(st.status().message().find("peer_policy"), std::string::npos);
}

TEST(AttestationConfigTest, DevRefusedUnlessExplicitlyEnabled) {
  for (const char* text : {R"({"backend": "dev"})",
                           R"({"backend": "dev", "allow_insecure_dev_attestation": false})",
                           R"({"backend": "dev", "allow_insecure_dev_attestation": "true"})",
                           R"({"backend": "dev", "allow_insecure_dev_attestation": 1})"}) {
    auto st = MakeAttestationFromConfig(nlohmann::json::parse(text), "x", "d");
    EXPECT_EQ(st.status().code(), absl::StatusCode::kPermissionDenied) << text;
    EXPECT_NE(st.status().message().find("insecure"), std::string::npos);
  }
}

TEST(AttestationConfigTest, MissingOrUnknownBackendRefused) {
  EXPECT_FALSE(MakeAttestationFromConfig(nlohmann::json::object(), "x", "d").ok());
  auto st = MakeAttestationFromConfig(nlohmann::json::parse(R"({"backend": "sev"})"), "x", "d");
  EXPECT_NE(st.status().message().find("unknown attestation backend 'sev'"), std::string::npos);
}

}  // namespace
}  // namespace gputravel
