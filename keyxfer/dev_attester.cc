#include "keyxfer/dev_attester.h"

#include "keyxfer/runtime_measurement.h"
#include "keyxfer/x509.h"
#include "util/hex.h"

namespace gputravel {

absl::StatusOr<std::unique_ptr<DevAttester>> DevAttester::Create(
    std::string domain, EcKey key, std::string certificate_der,
    std::string mrtd, std::string rtmr3) {
  if (mrtd.size() != 48) {
    return absl::InvalidArgumentError("development MRTD must be 48 bytes");
  }
  if (rtmr3.empty()) rtmr3.assign(48, '\0');
  if (rtmr3.size() != 48) {
    return absl::InvalidArgumentError("development RTMR3 must be 48 bytes");
  }
  return std::unique_ptr<DevAttester>(
      new DevAttester(std::move(domain), std::move(key), std::move(certificate_der),
                      std::move(mrtd), std::move(rtmr3)));
}

absl::StatusOr<Evidence> DevAttester::Attest(const ReportData& report_data) {
  v1::DevReport report;
  report.set_domain(domain_);
  report.set_mrtd(mrtd_);
  for (int i = 0; i < 3; ++i) report.add_rtmr(std::string(48, '\0'));
  report.add_rtmr(rtmr3_);
  report.set_td_attributes(0);
  report.set_tee_tcb_svn(std::string(16, '\0'));
  report.set_report_data(std::string(report_data.begin(), report_data.end()));
  v1::DevEvidence ev;
  ev.set_report(report.SerializeAsString());
  auto sig = key_.Sign(ev.report());
  if (!sig.ok()) return sig.status();
  ev.set_signature_der(*sig);
  ev.set_certificate_der(cert_);
  Evidence out;
  out.set_format(kDevEvidenceFormat);
  out.set_blob(ev.SerializeAsString());
  return out;
}

absl::StatusOr<AttestedIdentity> DevVerifier::Verify(
    const Evidence& evidence, const ReportData& expected_report_data) {
  if (evidence.format() != kDevEvidenceFormat) {
    return absl::PermissionDeniedError("evidence format '" + evidence.format() +
                                       "' is not accepted by the development "
                                       "verifier");
  }
  v1::DevEvidence ev;
  if (!ev.ParseFromString(evidence.blob())) {
    return absl::InvalidArgumentError("development evidence is malformed");
  }
  auto cert = certificates_.Verify(ev.certificate_der());
  if (!cert.ok()) {
    return absl::UnauthenticatedError("attestation key certificate: " +
                                      std::string(cert.status().message()));
  }
  absl::Status sig = (*cert)->public_key.Verify(ev.report(), ev.signature_der());
  if (!sig.ok()) {
    return absl::UnauthenticatedError("evidence signature does not verify");
  }
  v1::DevReport report;
  if (!report.ParseFromString(ev.report())) {
    return absl::InvalidArgumentError("development report is malformed");
  }
  std::string expected(expected_report_data.begin(), expected_report_data.end());
  if (report.report_data() != expected) {
    return absl::PermissionDeniedError(
        "REPORTDATA mismatch: evidence is bound to another channel or nonce "
        "(expected " + HexEncode(expected).substr(0, 24) +
        "..., actual " + HexEncode(report.report_data()).substr(0, 24) +
        "...)");
  }
  if ((report.td_attributes() & 1) != 0 && !policy_.allow_debug) {
    return absl::PermissionDeniedError(
        "TD attributes: DEBUG is set and the policy does not allow it");
  }
  if (!policy_.allowed_mrtd.empty()) {
    bool found = false;
    for (const auto& m : policy_.allowed_mrtd) found = found || m == report.mrtd();
    if (!found) {
      return absl::PermissionDeniedError(
          "MRTD mismatch: actual " + HexEncode(report.mrtd()) +
          " is not among the " + std::to_string(policy_.allowed_mrtd.size()) +
          " allowed value(s), first expected " +
          HexEncode(policy_.allowed_mrtd[0]));
    }
  }
  AttestedIdentity id;
  id.format = evidence.format();
  id.mrtd.assign(report.mrtd().begin(), report.mrtd().end());
  for (const auto& r : report.rtmr()) id.rtmr.emplace_back(r.begin(), r.end());
  id.td_attributes = report.td_attributes();
  id.tee_tcb_svn.assign(report.tee_tcb_svn().begin(), report.tee_tcb_svn().end());
  return id;
}

absl::StatusOr<std::string> MeasureFile(const std::string& path) {
  return Sha384File(path);  // every OpenSSL call checked there
}

}  // namespace gputravel
