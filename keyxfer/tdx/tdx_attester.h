#ifndef GPUTRAVEL_KEYXFER_TDX_TDX_ATTESTER_H_
#define GPUTRAVEL_KEYXFER_TDX_TDX_ATTESTER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "keyxfer/attester.h"
#include "keyxfer/tdx/collateral_store.h"
#include "keyxfer/tdx/configfs_tsm.h"
#include "keyxfer/tdx/policy.h"
#include "keyxfer/tdx/quote_verifier.h"

namespace gputravel::tdx {

// Evidence.format values this backend produces and accepts.
inline constexpr char kEvidenceFormatQuoteV4[] = "tdx-quote-v4";
inline constexpr char kEvidenceFormatQuoteV5[] = "tdx-quote-v5";

// Evidence = a TDX quote from configfs-tsm whose REPORTDATA is the caller's
// report data. Thread-safe (each Attest uses its own report directory).
class TdxAttester : public Attester {
 public:
  explicit TdxAttester(ConfigfsTsmOptions options = {});

  // Evidence{format = "tdx-quote-v4" (or "-v5" if the platform produces v5),
  // blob = outblob as configfs-tsm returned it}. Parses the quote before
  // handing it out and refuses one whose REPORTDATA is not `report_data`.
  absl::StatusOr<Evidence> Attest(const ReportData& report_data) override;

 private:
  ConfigfsTsmQuoteProvider provider_;
};

struct TdxVerifierOptions {
  // Trust anchor for PCK chains; empty means the compiled-in Intel SGX Root
  // CA (kIntelSgxRootCaPem), which is what production should use.
  std::string root_ca_pem;
  Policy policy;
  // Time at which certificates must be valid; null means absl::Now. Tests set
  // it because the sample quote's certificates expire.
  std::function<absl::Time()> clock;
  // Intel's collateral (TCB info, QE identity, CRLs) by FMSPC. With it every
  // quote must have verified, fresh collateral for its platform, a PCK chain
  // not revoked, a TCB level the policy allows (default UpToDate only).
  // Without it no TCB status is evaluated, and Create refuses a policy with
  // TCB fields (allowed_tcb_statuses, allowed_advisory_ids,
  // max_collateral_age).
  std::shared_ptr<CollateralStore> collateral;
};

// Verifies "tdx-quote-v4"/"tdx-quote-v5" evidence: parse, authenticity
// (QuoteVerifier), then policy including REPORTDATA == expected report data.
// Immutable after Create; thread-safe.
class TdxVerifier : public Verifier {
 public:
  // Refuses (kInvalidArgument) an unparsable root CA; a policy with
  // require_report_data = false: the Verifier contract is that evidence is
  // bound to the expected report data, and a verifier that skipped it would
  // accept replays; and a policy that does not pin mrtd, rtmr0, rtmr1, rtmr2
  // and min_tee_tcb_svn (the message names each missing one): MRTD measures
  // only the initial firmware image, so without RTMR0 (firmware configuration
  // including the host's ACPI tables), RTMR1 (kernel) and RTMR2 (command line,
  // initrd) any TD on the same firmware would pass. mrseam, mrconfigid,
  // mrowner and mrownerconfig stay optional, and so does rtmr3 here: the
  // daemons pin RTMR3 through its events (attestation.peer_rtmr3, checked by
  // MeasuredVerifier, keyxfer/runtime_policy.h), since a fixed value would
  // make two parties that pin each other circular.
  static absl::StatusOr<std::unique_ptr<TdxVerifier>> Create(
      TdxVerifierOptions options);

  // Errors: kInvalidArgument (wrong format, malformed quote),
  // kUnauthenticated (chain, signatures, revocation, collateral),
  // kNotFound/kFailedPrecondition (no collateral for the platform),
  // kPermissionDenied (TCB not supported, or policy: every violation, each
  // naming the field with expected and actual values).
  absl::StatusOr<AttestedIdentity> Verify(
      const Evidence& evidence, const ReportData& expected_report_data) override;

 private:
  TdxVerifier(QuoteVerifier quote_verifier, TdxVerifierOptions options)
      : quote_verifier_(std::move(quote_verifier)),
        options_(std::move(options)) {}

  const QuoteVerifier quote_verifier_;
  const TdxVerifierOptions options_;
};

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_TDX_ATTESTER_H_
