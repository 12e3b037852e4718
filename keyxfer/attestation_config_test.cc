#include "keyxfer/attestation_config.h"

#include <string>

#include "gtest/gtest.h"
#include "keyxfer/tdx/intel_root_ca.h"
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

// The filled-in holder example with tdx.root_ca naming a file holding `pem`.
nlohmann::json TdxSectionWithRootCa(const std::string& file, const std::string& pem) {
  const std::string path = ::testing::TempDir() + "/" + file;
  EXPECT_TRUE(WriteFile(path, pem).ok()) << path;
  nlohmann::json s = WithPlaceholdersFilled(Section("holder-tdx.json"));
  s["tdx"]["root_ca"] = path;
  return s;
}

TEST(AttestationConfigTest, UnknownFieldsAreRefusedAndNamed) {
  // A misspelt optional field would otherwise be a default silently taken:
  // here the root CA the operator meant to pin.
  nlohmann::json tdx = WithPlaceholdersFilled(Section("holder-tdx.json"));
  tdx["tdx"]["root_cert"] = "/etc/gputravel/root.pem";
  auto st = MakeAttestationFromConfig(tdx, "h.json: attestation", "d");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find(
                "h.json: attestation: tdx: unknown field 'root_cert' (accepted: "
                "configfs_root, peer_policy, root_ca)"),
            std::string::npos)
      << st.status();
  // At the top level, per backend: the development fields are not the TDX
  // backend's.
  tdx = WithPlaceholdersFilled(Section("holder-tdx.json"));
  tdx["peer_mrtd"] = nlohmann::json::array();
  st = MakeAttestationFromConfig(tdx, "h.json: attestation", "d");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("unknown field 'peer_mrtd' (accepted: backend, tdx)"),
            std::string::npos)
      << st.status();
  auto dev = MakeAttestationFromConfig(
      nlohmann::json::parse(R"({"backend": "dev", "allow_insecure_dev_attestation": true,
                                "dev_keys": "/k.pem"})"),
      "h.json: attestation", "d");
  EXPECT_EQ(dev.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dev.status().message().find(
                "unknown field 'dev_keys' (accepted: allow_debug, "
                "allow_insecure_dev_attestation, backend, dev_cert, dev_key, dev_root_ca, "
                "peer_mrtd)"),
            std::string::npos)
      << dev.status();
}

TEST(AttestationConfigTest, EmptyRootCaIsRefusedNotReplacedByIntels) {
  for (const char* text : {"", "\n  \n"}) {
    nlohmann::json s = TdxSectionWithRootCa("empty-root.pem", text);
    const std::string path = s["tdx"]["root_ca"].get<std::string>();
    auto st = MakeAttestationFromConfig(s, "h.json: attestation", "d");
    EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(st.status().message().find("h.json: attestation: tdx.root_ca (" + path +
                                         "): the file is empty"),
              std::string::npos)
        << st.status();
  }
}

TEST(AttestationConfigTest, UnparsableRootCaNamesTheFieldAndTheFile) {
  nlohmann::json s = TdxSectionWithRootCa("bad-root.pem", "not a certificate\n");
  const std::string path = s["tdx"]["root_ca"].get<std::string>();
  auto st = MakeAttestationFromConfig(s, "h.json: attestation", "d");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("h.json: attestation: tdx.root_ca (" + path + "): "),
            std::string::npos)
      << st.status();
  EXPECT_EQ(st.status().message().find("peer_policy"), std::string::npos) << st.status();
  // A missing file, too.
  s["tdx"]["root_ca"] = ::testing::TempDir() + "/no-such-root.pem";
  st = MakeAttestationFromConfig(s, "h.json: attestation", "d");
  EXPECT_NE(st.status().message().find("tdx.root_ca (" + ::testing::TempDir() +
                                       "/no-such-root.pem): "),
            std::string::npos)
      << st.status();
  // A root that parses is taken.
  auto good = MakeAttestationFromConfig(
      TdxSectionWithRootCa("good-root.pem", tdx::kIntelSgxRootCaPem), "h.json: attestation",
      "d");
  EXPECT_TRUE(good.ok()) << good.status();
}

TEST(AttestationConfigTest, MissingOrUnknownBackendRefused) {
  EXPECT_FALSE(MakeAttestationFromConfig(nlohmann::json::object(), "x", "d").ok());
  auto st = MakeAttestationFromConfig(nlohmann::json::parse(R"({"backend": "sev"})"), "x", "d");
  EXPECT_NE(st.status().message().find("unknown attestation backend 'sev'"), std::string::npos);
}

}  // namespace
}  // namespace gputravel
