#include "keyxfer/attestation_config.h"

#include "keyxfer/dev_attester.h"
#include "keyxfer/secret_bytes.h"
#include "keyxfer/tdx/tdx_attester.h"
#include "keyxfer/x509.h"
#include "util/files.h"

namespace gputravel {
namespace {

absl::StatusOr<AttestationSetup> MakeDev(const nlohmann::json& s,
                                         const std::string& where,
                                         const std::string& domain) {
  if (!s.contains("allow_insecure_dev_attestation") ||
      s["allow_insecure_dev_attestation"] != true) {
    return absl::PermissionDeniedError(
        where + ": the development attester is insecure and must be enabled "
        "explicitly with \"allow_insecure_dev_attestation\": true (production "
        "uses \"backend\": \"tdx\")");
  }
  auto key_path = JsonString(s, where, "dev_key");
  if (!key_path.ok()) return key_path.status();
  auto cert_path = JsonString(s, where, "dev_cert");
  if (!cert_path.ok()) return cert_path.status();
  auto root_path = JsonString(s, where, "dev_root_ca");
  if (!root_path.ok()) return root_path.status();
  auto key_pem = ReadFile(*key_path);
  if (!key_pem.ok()) return key_pem.status();
  auto key = EcKey::FromPrivatePem(*key_pem);
  Zeroize(&(*key_pem)[0], key_pem->size());  // the private key lives on only in `key`
  if (!key.ok()) return absl::InvalidArgumentError(*key_path + ": " + std::string(key.status().message()));
  auto cert_pem = ReadFile(*cert_path);
  if (!cert_pem.ok()) return cert_pem.status();
  auto cert = CertificatePemToDer(*cert_pem);
  if (!cert.ok()) return absl::InvalidArgumentError(*cert_path + ": " + std::string(cert.status().message()));
  auto root_pem = ReadFile(*root_path);
  if (!root_pem.ok()) return root_pem.status();
  auto root = CertificatePemToDer(*root_pem);
  if (!root.ok()) return absl::InvalidArgumentError(*root_path + ": " + std::string(root.status().message()));
  auto mrtd = MeasureFile("/proc/self/exe");
  if (!mrtd.ok()) return mrtd.status();
  auto attester = DevAttester::Create(domain, std::move(*key), *cert, *mrtd);
  if (!attester.ok()) return attester.status();
  DevPolicy policy;
  if (s.contains("peer_mrtd")) {
    if (!s["peer_mrtd"].is_array()) {
      return absl::InvalidArgumentError(where + ": 'peer_mrtd' must be an array of hex strings");
    }
    for (const auto& m : s["peer_mrtd"]) {
      auto bytes = m.is_string() ? HexDecode(m.get<std::string>())
                                 : absl::StatusOr<std::string>(absl::InvalidArgumentError(""));
      if (!bytes.ok() || bytes->size() != 48) {
        return absl::InvalidArgumentError(where + ": every 'peer_mrtd' entry must be 96 hex digits");
      }
      policy.allowed_mrtd.push_back(*bytes);
    }
  }
  if (s.contains("allow_debug")) {
    if (!s["allow_debug"].is_boolean()) {
      return absl::InvalidArgumentError(where + ": 'allow_debug' must be true or false");
    }
    policy.allow_debug = s["allow_debug"].get<bool>();
  }
  AttestationSetup out;
  out.backend = "dev";
  out.attester = std::move(*attester);
  out.verifier = std::make_unique<DevVerifier>(*root, policy);
  return out;
}

absl::StatusOr<AttestationSetup> MakeTdx(const nlohmann::json& s, const std::string& where) {
  const std::string at = where + ": tdx";
  if (!s.contains("tdx") || !s["tdx"].is_object()) {
    return absl::InvalidArgumentError(where + ": backend 'tdx' needs an object 'tdx' "
                                      "({\"configfs_root\", \"root_ca\", \"peer_policy\"})");
  }
  const auto& t = s["tdx"];
  tdx::ConfigfsTsmOptions tsm;
  if (t.contains("configfs_root")) {
    auto r = JsonString(t, at, "configfs_root");
    if (!r.ok()) return r.status();
    tsm.root = *r;
  }
  tdx::TdxVerifierOptions vo;
  if (t.contains("root_ca")) {
    auto path = JsonString(t, at, "root_ca");
    if (!path.ok()) return path.status();
    auto pem = ReadFile(*path);
    if (!pem.ok()) return pem.status();
    vo.root_ca_pem = *pem;
  }
  if (!t.contains("peer_policy") || !t["peer_policy"].is_object()) {
    return absl::InvalidArgumentError(
        at + ": 'peer_policy' is required: the measurements peers must have "
        "(docs/tdx-attestation.md)");
  }
  auto policy = tdx::Policy::FromJsonValue(t["peer_policy"]);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(at + ".peer_policy: " + std::string(policy.status().message()));
  }
  vo.policy = std::move(*policy);
  auto verifier = tdx::TdxVerifier::Create(std::move(vo));
  if (!verifier.ok()) {
    return absl::Status(verifier.status().code(),
                        at + ".peer_policy: " + std::string(verifier.status().message()));
  }
  AttestationSetup out;
  out.backend = "tdx";
  out.attester = std::make_unique<tdx::TdxAttester>(tsm);
  out.verifier = std::move(*verifier);
  return out;
}

}  // namespace

absl::StatusOr<AttestationSetup> MakeAttestationFromConfig(
    const nlohmann::json& section, const std::string& where,
    const std::string& domain) {
  auto backend = JsonString(section, where, "backend");
  if (!backend.ok()) return backend.status();
  if (*backend == "dev") return MakeDev(section, where, domain);
  if (*backend == "tdx") return MakeTdx(section, where);
  return absl::InvalidArgumentError(where + ": unknown attestation backend '" +
                                    *backend + "' (use \"tdx\" or \"dev\")");
}

}  // namespace gputravel
