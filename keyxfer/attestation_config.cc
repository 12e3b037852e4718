#include "keyxfer/attestation_config.h"

#include <cstdlib>

#include <set>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/runtime_measurement.h"
#include "keyxfer/runtime_policy.h"
#include "keyxfer/secret_bytes.h"
#include "keyxfer/tdx/collateral_store.h"
#include "keyxfer/tdx/quote_verifier.h"
#include "keyxfer/tdx/rtmr.h"
#include "keyxfer/tdx/tdx_attester.h"
#include "keyxfer/x509.h"
#include "util/files.h"
#include "util/hex.h"
#include "util/json_fields.h"

namespace gputravel {
namespace {

// The fields each backend reads; any other is refused, so a misspelt
// optional field ("root_cert", "allow_debg") is an error at start rather
// than a default silently taken. The section's top level for each backend
// (the development backend keeps its fields there), and the "tdx" object.
const std::set<std::string> kDevFields = {
    "backend", "allow_insecure_dev_attestation", "dev_key", "dev_cert", "dev_root_ca",
    "peer_mrtd", "dev_peer_binaries", "allow_debug", "peer_rtmr3"};
const std::set<std::string> kTdxFields = {"backend", "tdx", "peer_rtmr3"};
const std::set<std::string> kTdxSectionFields = {"configfs_root", "measurements_root",
                                                 "root_ca", "peer_policy", "collateral"};

absl::StatusOr<Rtmr3Policy> PeerRtmr3(const nlohmann::json& s, const std::string& where) {
  return Rtmr3Policy::FromJson(s.at("peer_rtmr3"), where + ".peer_rtmr3");
}

// The development measurements of the binaries "dev_peer_binaries" names,
// read now: each file's SHA-384 (the development MRTD) and its RTMR3 binary
// event (hex), so that a rebuilt peer needs no edited pin, only a restart.
struct PeerBinaries {
  std::vector<std::string> mrtd;          // 48 bytes each
  std::vector<std::string> binary_event;  // hex
};

absl::StatusOr<PeerBinaries> MeasurePeerBinaries(const nlohmann::json& s,
                                                 const std::string& where) {
  PeerBinaries out;
  if (!s.contains("dev_peer_binaries")) return out;
  const std::string at = where + ".dev_peer_binaries";
  const nlohmann::json& list = s["dev_peer_binaries"];
  if (!list.is_array() || list.empty()) {
    return absl::InvalidArgumentError(
        at + ": must be a non-empty array of absolute paths of the peers' binaries");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item = at + "[" + std::to_string(i) + "]";
    if (!list[i].is_string() || list[i].get<std::string>().empty() ||
        list[i].get<std::string>()[0] != '/') {
      return absl::InvalidArgumentError(item + ": must be an absolute path of a peer's binary");
    }
    const std::string path = list[i].get<std::string>();
    auto mrtd = MeasureFile(path);
    if (!mrtd.ok()) {
      return absl::Status(mrtd.status().code(), item + ": " + std::string(mrtd.status().message()));
    }
    auto event = Rtmr3BinaryEvent(path);
    if (!event.ok()) {
      return absl::Status(event.status().code(),
                          item + ": " + std::string(event.status().message()));
    }
    out.mrtd.push_back(*mrtd);
    out.binary_event.push_back(HexEncode(*event));
  }
  return out;
}

// `peer_rtmr3` with the binary events of `binaries` added to its "binary"
// pins (a string or an array in the file): with dev_peer_binaries the file
// may leave "binary" out.
nlohmann::json WithPeerBinaryEvents(nlohmann::json pins, const PeerBinaries& binaries) {
  if (binaries.binary_event.empty() || !pins.is_object()) return pins;
  nlohmann::json list = nlohmann::json::array();
  if (pins.contains("binary")) {
    if (pins["binary"].is_array()) {
      list = pins["binary"];
    } else {
      list.push_back(pins["binary"]);
    }
  }
  for (const auto& hex : binaries.binary_event) list.push_back(hex);
  pins["binary"] = list;
  return pins;
}

absl::StatusOr<AttestationSetup> MakeDev(const nlohmann::json& s,
                                         const std::string& where,
                                         const std::string& domain,
                                         const RuntimeMeasurement& measurement) {
  absl::Status known = RefuseUnknownFields(s, kDevFields, where + " (backend \"dev\")");
  if (!known.ok()) return known;
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
  auto root_pem = measurement.File("/attestation/dev_root_ca",
                               where + ".dev_root_ca (" + *root_path + ")");
  if (!root_pem.ok()) return root_pem.status();
  auto root = CertificatePemToDer(*root_pem);
  if (!root.ok()) return absl::InvalidArgumentError(*root_path + ": " + std::string(root.status().message()));
  auto mrtd = MeasureFile("/proc/self/exe");
  if (!mrtd.ok()) return mrtd.status();
  auto attester = DevAttester::Create(domain, std::move(*key), *cert, *mrtd, measurement.rtmr3);
  if (!attester.ok()) return attester.status();
  auto binaries = MeasurePeerBinaries(s, where);
  if (!binaries.ok()) return binaries.status();
  DevPolicy policy;
  policy.allowed_mrtd = binaries->mrtd;
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
  out.attester = std::make_unique<MeasuredAttester>(std::move(*attester), measurement);
  out.verifier = std::make_unique<DevVerifier>(*root, policy);
  if (s.contains("peer_rtmr3")) {
    auto pins = Rtmr3Policy::FromJson(WithPeerBinaryEvents(s["peer_rtmr3"], *binaries),
                                      where + ".peer_rtmr3");
    if (!pins.ok()) return pins.status();
    out.verifier = std::make_unique<MeasuredVerifier>(std::move(out.verifier), std::move(*pins));
  }
  return out;
}

// Environment that would make the dynamic loader or OpenSSL run code the
// binary event does not cover (keyxfer/runtime_measurement.h), or make the
// daemon fail on purpose: a TDX daemon refuses to start with any of it.
constexpr const char* kUnmeasuredEnvironment[] = {
    "LD_PRELOAD",   "LD_LIBRARY_PATH", "LD_AUDIT",        "OPENSSL_CONF",
    "OPENSSL_MODULES", "OPENSSL_ENGINES", "GPUTRAVEL_FAILPOINT"};

absl::Status CheckMeasurableEnvironment(const std::string& where) {
  auto refuse = [&where](const std::string& name, const std::string& how) {
    return absl::FailedPreconditionError(
        where + ": environment variable " + name + " is set" + how +
        ": it would run code or configuration the runtime measurement does not cover; "
        "unset it (a TDX daemon starts only with what RTMR3 covers)");
  };
  for (const char* name : kUnmeasuredEnvironment) {
    if (std::getenv(name) != nullptr) return refuse(name, "");
  }
  // The environment the process was started with, as the kernel keeps it:
  // a preloaded library runs before main and can remove its own variable
  // from what getenv() sees, not from this.
  auto started = ReadFile("/proc/self/environ");
  if (!started.ok()) {
    return absl::FailedPreconditionError(
        where + ": cannot read /proc/self/environ to check the environment this daemon was "
                "started with (" + std::string(started.status().message()) +
        "); a TDX daemon needs /proc mounted");
  }
  for (absl::string_view entry : absl::StrSplit(*started, '\0', absl::SkipEmpty())) {
    const absl::string_view name = entry.substr(0, entry.find('='));
    for (const char* unmeasured : kUnmeasuredEnvironment) {
      if (name == unmeasured) {
        return refuse(std::string(name), " in the environment this daemon was started with "
                                         "(/proc/self/environ), though no longer visible");
      }
    }
  }
  return absl::OkStatus();
}

// What MakeTdx does with the TD: `kStart` checks the environment and extends
// RTMR3; `kCheck` (CheckAttestationConfig) touches neither.
enum class TdxUse { kStart, kCheck };

absl::StatusOr<AttestationSetup> MakeTdx(const nlohmann::json& s, const std::string& where,
                                         const RuntimeMeasurement& measurement,
                                         std::shared_ptr<tdx::TsmFs> measurements_fs,
                                         TdxUse use) {
  const std::string at = where + ": tdx";
  // The development fields are refused by name: a production daemon never
  // trusts whatever binary a path holds.
  for (const std::string& dev : kDevFields) {
    if (kTdxFields.count(dev) == 0 && s.contains(dev)) {
      return absl::PermissionDeniedError(
          where + "." + dev + ": a development field (backend \"dev\" only); the TDX "
          "backend pins peers with tdx.peer_policy and peer_rtmr3 (docs/tdx-attestation.md)");
    }
  }
  absl::Status known = RefuseUnknownFields(s, kTdxFields, where + " (backend \"tdx\")");
  if (!known.ok()) return known;
  if (use == TdxUse::kStart) {
    known = CheckMeasurableEnvironment(where);
    if (!known.ok()) return known;
  }
  if (!s.contains("tdx") || !s["tdx"].is_object()) {
    return absl::InvalidArgumentError(where + ": backend 'tdx' needs an object 'tdx' "
                                      "({\"configfs_root\", \"root_ca\", \"peer_policy\"})");
  }
  const auto& t = s["tdx"];
  known = RefuseUnknownFields(t, kTdxSectionFields, at);
  if (!known.ok()) return known;
  tdx::ConfigfsTsmOptions tsm;
  if (t.contains("configfs_root")) {
    auto r = JsonString(t, at, "configfs_root");
    if (!r.ok()) return r.status();
    tsm.root = *r;
  }
  tdx::RtmrOptions rtmr;
  rtmr.fs = std::move(measurements_fs);
  if (t.contains("measurements_root")) {
    auto r = JsonString(t, at, "measurements_root");
    if (!r.ok()) return r.status();
    rtmr.root = *r;
  }
  tdx::TdxVerifierOptions vo;
  if (t.contains("root_ca")) {
    auto path = JsonString(t, at, "root_ca");
    if (!path.ok()) return path.status();
    // Errors name the field and the file; the root is checked here, so a
    // later refusal from TdxVerifier::Create is about the policy alone.
    const std::string field = at + ".root_ca (" + *path + ")";
    // The bytes that were measured into RTMR3, not the file again: the host
    // supplies the disk and could serve another root to a second read.
    auto pem = measurement.File("/attestation/tdx/root_ca", field);
    if (!pem.ok()) return pem.status();
    // An empty root must not mean the default one (TdxVerifierOptions treats
    // an empty PEM as "the compiled-in Intel root"): the operator named a
    // file, so trusting something other than its contents would be a surprise.
    if (pem->find_first_not_of(" \t\r\n") == std::string::npos) {
      return absl::InvalidArgumentError(
          field + ": the file is empty; put the PEM certificate of the root to trust in it, "
          "or remove 'root_ca' to trust the compiled-in Intel SGX Root CA");
    }
    auto root = tdx::QuoteVerifier::Create(*pem);
    if (!root.ok()) {
      return absl::InvalidArgumentError(field + ": " + std::string(root.status().message()));
    }
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
  if (t.contains("collateral")) {
    // Intel's collateral changes over time (nextUpdate), so it is not measured
    // into RTMR3: Intel's signatures, checked at every use, authenticate it.
    auto path = JsonString(t, at, "collateral");
    if (!path.ok()) return path.status();
    auto store = tdx::CollateralStore::Open(*path);
    if (!store.ok()) {
      return absl::Status(store.status().code(),
                          at + ".collateral: " + std::string(store.status().message()));
    }
    vo.collateral = std::move(*store);
  }
  auto verifier = tdx::TdxVerifier::Create(std::move(vo));
  if (!verifier.ok()) {
    return absl::Status(verifier.status().code(),
                        at + ".peer_policy: " + std::string(verifier.status().message()));
  }
  if (!s.contains("peer_rtmr3")) {
    return absl::InvalidArgumentError(
        where + ": 'peer_rtmr3' is required: the peer's RTMR3 events (its binary and "
        "configuration, from `gputravel measure`); without it a peer whose host replaced "
        "its binary or configuration would pass (docs/tdx-attestation.md)");
  }
  auto pins = PeerRtmr3(s, where);
  if (!pins.ok()) return pins.status();
  AttestationSetup out;
  out.backend = "tdx";
  if (use == TdxUse::kCheck) return out;
  // Measured before anything is served: a daemon whose evidence cannot show
  // what it trusts must not run.
  tdx::RtmrRegisters registers(rtmr);
  absl::Status measured =
      tdx::MeasureIntoRtmr3(registers, measurement.EventList(), measurement.rtmr3);
  if (!measured.ok()) {
    return absl::Status(measured.code(),
                        where + ": cannot measure this daemon into RTMR3, refusing to start: " +
                            std::string(measured.message()));
  }
  out.attester =
      std::make_unique<MeasuredAttester>(std::make_unique<tdx::TdxAttester>(tsm), measurement);
  out.verifier = std::make_unique<MeasuredVerifier>(std::move(*verifier), std::move(*pins));
  return out;
}

}  // namespace

namespace {

absl::StatusOr<AttestationSetup> Make(const nlohmann::json& section, const std::string& where,
                                      const std::string& domain,
                                      const RuntimeMeasurement& measurement,
                                      std::shared_ptr<tdx::TsmFs> measurements_fs, TdxUse use) {
  if (!section.is_object()) return absl::InvalidArgumentError(where + ": must be an object");
  if (measurement.rtmr3.size() != kRtmrBytes ||
      measurement.rtmr3 != ReplayRtmr(measurement.EventList())) {
    return absl::InvalidArgumentError(where + ": no runtime measurement of this daemon "
                                      "(MeasureDaemon) to attest with");
  }
  auto backend = JsonString(section, where, "backend");
  if (!backend.ok()) return backend.status();
  if (*backend == "dev") return MakeDev(section, where, domain, measurement);
  if (*backend == "tdx") {
    return MakeTdx(section, where, measurement, std::move(measurements_fs), use);
  }
  return absl::InvalidArgumentError(where + ": unknown attestation backend '" +
                                    *backend + "' (use \"tdx\" or \"dev\")");
}

}  // namespace

absl::StatusOr<AttestationSetup> MakeAttestationFromConfig(
    const nlohmann::json& section, const std::string& where,
    const std::string& domain, const RuntimeMeasurement& measurement,
    std::shared_ptr<tdx::TsmFs> measurements_fs_for_test) {
  return Make(section, where, domain, measurement, std::move(measurements_fs_for_test),
              TdxUse::kStart);
}

absl::StatusOr<std::string> CheckAttestationConfig(const nlohmann::json& section,
                                                   const std::string& where,
                                                   const std::string& domain,
                                                   const RuntimeMeasurement& measurement) {
  auto setup = Make(section, where, domain, measurement, nullptr, TdxUse::kCheck);
  if (!setup.ok()) return setup.status();
  return setup->backend;
}

}  // namespace gputravel
