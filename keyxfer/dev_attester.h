#ifndef GPUTRAVEL_KEYXFER_DEV_ATTESTER_H_
#define GPUTRAVEL_KEYXFER_DEV_ATTESTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "keyxfer/attester.h"
#include "keyxfer/certificate_cache.h"
#include "keyxfer/ec_key.h"

namespace gputravel {

inline constexpr char kDevEvidenceFormat[] = "dev-attester-v1";

// DEVELOPMENT ONLY. Software-signed evidence with the fields of a TDX quote.
// The "MRTD" is SHA-384 of the running executable and RTMR3 the daemon's
// runtime measurement (keyxfer/runtime_measurement.h, as a TDX daemon extends
// it), so a policy can still pin which binary and configuration a peer runs,
// but the signing key is an ordinary file: anyone holding it can forge
// evidence. Constructed only through
// MakeAttesterFromConfig with "allow_insecure_dev_attestation": true.
class DevAttester : public Attester {
 public:
  // `key` signs evidence; `certificate_der` is its certificate from the
  // development root CA; `mrtd` is 48 bytes; `rtmr3` is 48 bytes or empty
  // (all zeros: nothing measured).
  static absl::StatusOr<std::unique_ptr<DevAttester>> Create(
      std::string domain, EcKey key, std::string certificate_der,
      std::string mrtd, std::string rtmr3 = "");
  absl::StatusOr<Evidence> Attest(const ReportData& report_data) override;

 private:
  DevAttester(std::string domain, EcKey key, std::string cert, std::string mrtd,
              std::string rtmr3)
      : domain_(std::move(domain)), key_(std::move(key)),
        cert_(std::move(cert)), mrtd_(std::move(mrtd)), rtmr3_(std::move(rtmr3)) {}
  std::string domain_;
  EcKey key_;
  std::string cert_, mrtd_, rtmr3_;
};

// Policy for development evidence: which measurements are acceptable.
struct DevPolicy {
  std::vector<std::string> allowed_mrtd;  // 48-byte values; empty: any
  bool allow_debug = false;
};

// Verifies dev-attester-v1 evidence: certificate chains to the development
// root, signature, report data, policy. Refuses every other format.
class DevVerifier : public Verifier {
 public:
  // How long a verified attestation-key certificate is trusted without
  // re-checking its chain and validity period (the evidence signature, report
  // data and policy are checked on every call).
  static constexpr absl::Duration kCertificateRecheck = absl::Seconds(60);

  DevVerifier(std::string root_ca_der, DevPolicy policy)
      : certificates_(std::move(root_ca_der), kCertificateRecheck),
        policy_(std::move(policy)) {}
  absl::StatusOr<AttestedIdentity> Verify(
      const Evidence& evidence, const ReportData& expected_report_data) override;

 private:
  CertificateCache certificates_;
  DevPolicy policy_;
};

// SHA-384 of a file's contents (the development "MRTD" of a binary).
absl::StatusOr<std::string> MeasureFile(const std::string& path);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_DEV_ATTESTER_H_
