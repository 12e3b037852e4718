#include "keyxfer/tdx/appraisal.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "keyxfer/tdx/openssl_util.h"
#include "keyxfer/tdx/pck_extensions.h"

namespace gputravel::tdx {
namespace {

std::vector<CertificateSummary> Summarise(const Quote& quote) {
  std::vector<CertificateSummary> out;
  for (const std::string& pem : quote.pck_chain_pem) {
    auto cert = ParsePemCertificate(pem);
    if (!cert.ok()) break;
    CertificateSummary s;
    s.subject = SubjectOf(cert->get());
    s.issuer = NameOf(X509_get_issuer_name(cert->get()));
    s.serial = SerialOf(cert->get());
    s.not_before =
        Asn1TimeToTime(X509_get0_notBefore(cert->get())).value_or(absl::Time());
    s.not_after =
        Asn1TimeToTime(X509_get0_notAfter(cert->get())).value_or(absl::Time());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

absl::Status Appraisal::Verdict() const {
  if (!authenticity.ok()) return authenticity;
  if (with_collateral && !collateral.ok()) return collateral;
  if (with_collateral && !tcb.ok()) return tcb;
  if (!violations.empty()) {
    return absl::PermissionDeniedError(absl::StrJoin(violations, "; "));
  }
  return absl::OkStatus();
}

Appraisal Appraise(const Quote& quote, const QuoteVerifier& verifier,
                   const CollateralBundle* collateral, const Policy& policy,
                   const std::array<uint8_t, 64>* expected_report_data,
                   absl::Time at) {
  Appraisal a;
  a.pck_chain = Summarise(quote);
  a.with_collateral = collateral != nullptr;
  if (collateral != nullptr) {
    auto verified = VerifyCollateral(*collateral, verifier.root(), at);
    a.collateral = verified.status();
    if (verified.ok()) a.verified_collateral = std::move(*verified);
  }
  if (a.verified_collateral.has_value()) {
    a.authenticity = verifier.Verify(quote, at, a.verified_collateral->Crls());
  } else {
    a.authenticity = verifier.Verify(quote, at);
  }
  if (!a.authenticity.ok()) return a;
  if (a.with_collateral) {
    if (!a.collateral.ok()) return a;
    auto pck = ParsePckExtensionsPem(quote.pck_chain_pem.at(0));
    if (!pck.ok()) {
      a.tcb = pck.status();
      return a;
    }
    auto e = EvaluateTcb(quote, *pck, a.verified_collateral->tcb_info,
                         a.verified_collateral->qe_identity);
    a.tcb = e.status();
    if (!e.ok()) return a;
    a.tcb_evaluation = std::move(*e);
    a.tcb_evaluation->pck_crl_this_update =
        a.verified_collateral->pck_crl.this_update;
  }
  a.violations = policy.Violations(
      quote, expected_report_data,
      a.tcb_evaluation.has_value() ? &*a.tcb_evaluation : nullptr, at);
  if (!a.with_collateral && policy.NeedsCollateral()) {
    a.violations.push_back(
        "TDX policy: TCB status, advisory IDs or collateral age: expected an "
        "evaluation under Intel's collateral, actual none (no collateral "
        "given)");
  }
  return a;
}

Appraisal AppraiseWithStore(const Quote& quote, const QuoteVerifier& verifier,
                            CollateralStore* store, const Policy& policy,
                            const std::array<uint8_t, 64>* expected_report_data,
                            absl::Time at) {
  if (store == nullptr) {
    return Appraise(quote, verifier, nullptr, policy, expected_report_data, at);
  }
  absl::Status failure;
  std::shared_ptr<const CollateralBundle> bundle;
  if (quote.pck_chain_pem.empty()) {
    failure = absl::InvalidArgumentError("TDX quote has no PCK certificate");
  } else {
    auto pck = ParsePckExtensionsPem(quote.pck_chain_pem[0]);
    if (!pck.ok()) {
      failure = pck.status();
    } else {
      auto found = store->ForFmspc(pck->fmspc);
      if (found.ok()) {
        bundle = *found;
      } else {
        failure = found.status();
      }
    }
  }
  if (bundle != nullptr) {
    return Appraise(quote, verifier, bundle.get(), policy,
                    expected_report_data, at);
  }
  // No usable collateral: still report authenticity, and refuse.
  Appraisal a = Appraise(quote, verifier, nullptr, policy,
                         expected_report_data, at);
  a.with_collateral = true;
  a.collateral = failure;
  a.violations.clear();
  return a;
}

}  // namespace gputravel::tdx
