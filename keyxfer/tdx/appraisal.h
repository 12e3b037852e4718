#ifndef GPUTRAVEL_KEYXFER_TDX_APPRAISAL_H_
#define GPUTRAVEL_KEYXFER_TDX_APPRAISAL_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "keyxfer/tdx/collateral.h"
#include "keyxfer/tdx/collateral_store.h"
#include "keyxfer/tdx/policy.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/quote_verifier.h"
#include "keyxfer/tdx/tcb_evaluation.h"

namespace gputravel::tdx {

// One certificate of the quote's PCK chain, for reports.
struct CertificateSummary {
  std::string subject;
  std::string issuer;
  std::string serial;
  absl::Time not_before;
  absl::Time not_after;
};

// Everything a relying party learns about one parsed quote: authenticity,
// collateral, TCB level and the policy verdict, each step's outcome kept as
// data so a tool can show all of it and a verifier can refuse on the first
// failure. Steps after a failed one are not run (their fields stay empty).
struct Appraisal {
  std::vector<CertificateSummary> pck_chain;
  // Quote signatures, PCK chain (with the collateral's CRLs when given).
  absl::Status authenticity;
  // Whether collateral was supplied; then its verification and the TCB
  // evaluation.
  bool with_collateral = false;
  absl::Status collateral;
  std::optional<VerifiedCollateral> verified_collateral;
  absl::Status tcb;
  std::optional<TcbEvaluation> tcb_evaluation;
  // Policy violations (empty = policy accepts).
  std::vector<std::string> violations;

  // OK when every step passed; else the first failure (policy violations
  // as kPermissionDenied, all of them joined by "; ").
  absl::Status Verdict() const;
};

// Appraises `quote` at `at`: QuoteVerifier (with the collateral's CRLs),
// VerifyCollateral, EvaluateTcb, Policy::Violations. `collateral` null means
// none (TCB not evaluated); a policy whose fields need collateral then
// fails with a violation saying so. `expected_report_data` null skips the
// REPORTDATA check (offline inspection).
Appraisal Appraise(const Quote& quote, const QuoteVerifier& verifier,
                   const CollateralBundle* collateral, const Policy& policy,
                   const std::array<uint8_t, 64>* expected_report_data,
                   absl::Time at);

// The same, finding the collateral for the quote's FMSPC in `store` (null:
// none).
Appraisal AppraiseWithStore(const Quote& quote, const QuoteVerifier& verifier,
                            CollateralStore* store, const Policy& policy,
                            const std::array<uint8_t, 64>* expected_report_data,
                            absl::Time at);

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_APPRAISAL_H_
