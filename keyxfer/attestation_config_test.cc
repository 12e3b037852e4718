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

// `section` with every "REPLACE-WITH-..." placeholder in tdx.peer_policy's
// lists replaced by a well-formed measurement, as a deployment would.
nlohmann::json WithPlaceholdersFilled(nlohmann::json section) {
  nlohmann::json& policy = section["tdx"]["peer_policy"];
  for (auto it = policy.begin(); it != policy.end(); ++it) {
    if (!it.value().is_array()) continue;
    for (nlohmann::json& entry : it.value()) {
      if (entry.is_string() &&
          entry.get<std::string>().rfind("REPLACE-WITH-", 0) == 0) {
        entry = std::string(96, 'a');
      }
    }
  }
  return section;
}

nlohmann::json TdxSectionWithPolicy(const nlohmann::json& peer_policy) {
  nlohmann::json s = nlohmann::json::parse(R"({"backend": "tdx", "tdx": {}})");
  s["tdx"]["peer_policy"] = peer_policy;
  return s;
}

TEST(AttestationConfigTest, ExampleTdxConfigsBuildTdxBackend) {
  // The examples carry placeholders where a deployment puts real values: the
  // placeholders must be refused, proving the policy is really parsed.
  auto orch = MakeAttestationFromConfig(Section("orchestrator-tdx.json"), "o", "orchestrator");
  EXPECT_FALSE(orch.ok());
  EXPECT_NE(orch.status().message().find("mrtd"), std::string::npos) << orch.status();
  // With the placeholders filled in, both examples pin everything TdxVerifier
  // requires (mrtd, rtmr0..2, min_tee_tcb_svn).
  auto filled_orch = MakeAttestationFromConfig(
      WithPlaceholdersFilled(Section("orchestrator-tdx.json")), "o", "orchestrator");
  ASSERT_TRUE(filled_orch.ok()) << filled_orch.status();
  auto holder = MakeAttestationFromConfig(WithPlaceholdersFilled(Section("holder-tdx.json")),
                                          "h", "td-hospital-a");
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->backend, "tdx");
  EXPECT_NE(holder->attester, nullptr);
  EXPECT_NE(holder->verifier, nullptr);
}

TEST(AttestationConfigTest, TdxPeerPolicyMustPinMeasurementsAndTcb) {
  // A policy that parses but pins nothing (or only the firmware image) would
  // hand keys to any TD on that firmware: refused at start-up.
  auto empty = MakeAttestationFromConfig(TdxSectionWithPolicy(nlohmann::json::object()),
                                         "h.json: attestation", "d");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find(
                "missing: mrtd, rtmr0, rtmr1, rtmr2, min_tee_tcb_svn ("),
            std::string::npos)
      << empty.status();
  nlohmann::json mrtd_only = {{"mrtd", std::string(96, 'a')}};
  auto only = MakeAttestationFromConfig(TdxSectionWithPolicy(mrtd_only),
                                        "h.json: attestation", "d");
  EXPECT_EQ(only.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(only.status().message().find("missing: rtmr0, rtmr1, rtmr2, min_tee_tcb_svn ("),
            std::string::npos)
      << only.status();
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
