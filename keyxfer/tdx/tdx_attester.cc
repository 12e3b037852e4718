#include "keyxfer/tdx/tdx_attester.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "keyxfer/tdx/appraisal.h"
#include "util/hex.h"
#include "keyxfer/tdx/intel_root_ca.h"
#include "keyxfer/tdx/quote.h"

namespace gputravel::tdx {
namespace {

const char* FormatFor(const Quote& quote) {
  return quote.header.version == 5 ? kEvidenceFormatQuoteV5
                                   : kEvidenceFormatQuoteV4;
}

}  // namespace

TdxAttester::TdxAttester(ConfigfsTsmOptions options)
    : provider_(std::move(options)) {}

absl::StatusOr<Evidence> TdxAttester::Attest(const ReportData& report_data) {
  auto blob = provider_.GetQuote(report_data);
  if (!blob.ok()) return blob.status();
  // Catch a broken platform here rather than as a puzzling verifier error on
  // the other side of the connection.
  auto quote = ParseQuote(*blob);
  if (!quote.ok()) {
    return absl::InternalError(absl::StrCat(
        "configfs-tsm returned an unusable quote: ", quote.status().message()));
  }
  if (quote->body.report_data != report_data) {
    return absl::InternalError(absl::StrFormat(
        "configfs-tsm returned a quote for other report data: requested %s, "
        "got %s",
        HexEncode(report_data), HexEncode(quote->body.report_data)));
  }
  Evidence evidence;
  evidence.set_format(FormatFor(*quote));
  evidence.set_blob(std::move(*blob));
  return evidence;
}

absl::StatusOr<std::unique_ptr<TdxVerifier>> TdxVerifier::Create(
    TdxVerifierOptions options) {
  if (!options.policy.require_report_data) {
    return absl::InvalidArgumentError(
        "TdxVerifier: policy require_report_data is false, but a Verifier must "
        "bind evidence to the expected report data (use Policy::Check "
        "directly for offline inspection)");
  }
  // A policy that leaves these unpinned accepts TDs nobody reviewed: MRTD
  // measures only the initial firmware image, RTMR0 the firmware's
  // configuration including the host-supplied ACPI tables, RTMR1 the kernel
  // (OS loader), RTMR2 the kernel command line and initrd; and without a
  // minimum TEE_TCB_SVN a TDX module with known, since fixed, flaws passes.
  // RTMR3 (extended at run time by the daemon, with what it trusts) is
  // pinned through its events by MeasuredVerifier; the other registers stay
  // optional.
  const Policy& policy = options.policy;
  std::vector<std::string> missing;
  if (policy.mrtd.empty()) missing.push_back("mrtd");
  for (int i = 0; i < 3; ++i) {
    if (policy.rtmr[i].empty()) missing.push_back(absl::StrCat("rtmr", i));
  }
  if (!policy.min_tee_tcb_svn.has_value()) {
    missing.push_back("min_tee_tcb_svn");
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TdxVerifier: peer policy must pin mrtd, rtmr0, rtmr1, rtmr2 and "
        "min_tee_tcb_svn; missing: ",
        absl::StrJoin(missing, ", "),
        " (MRTD measures only the initial firmware image, so without the "
        "RTMRs any TD on the same firmware passes, whatever kernel, command "
        "line or ACPI tables it runs; without min_tee_tcb_svn any TDX module "
        "version passes). Pin the reviewed image's values "
        "(docs/tdx-attestation.md)"));
  }
  if (policy.NeedsCollateral() && options.collateral == nullptr) {
    return absl::InvalidArgumentError(
        "TdxVerifier: peer policy sets allowed_tcb_statuses, "
        "allowed_advisory_ids or max_collateral_age, which need Intel's "
        "collateral; configure \"collateral\" (a bundle file or directory, "
        "docs/tdx-attestation.md)");
  }
  if (options.root_ca_pem.empty()) options.root_ca_pem = kIntelSgxRootCaPem;
  if (!options.clock) options.clock = [] { return absl::Now(); };
  auto quote_verifier = QuoteVerifier::Create(options.root_ca_pem);
  if (!quote_verifier.ok()) return quote_verifier.status();
  return std::unique_ptr<TdxVerifier>(
      new TdxVerifier(std::move(*quote_verifier), std::move(options)));
}

absl::StatusOr<AttestedIdentity> TdxVerifier::Verify(
    const Evidence& evidence, const ReportData& expected_report_data) {
  if (evidence.format() != kEvidenceFormatQuoteV4 &&
      evidence.format() != kEvidenceFormatQuoteV5) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TdxVerifier: evidence format \"%s\" is not \"%s\" or \"%s\"",
        evidence.format(), kEvidenceFormatQuoteV4, kEvidenceFormatQuoteV5));
  }
  auto quote = ParseQuote(evidence.blob());
  if (!quote.ok()) return quote.status();
  if (evidence.format() != FormatFor(*quote)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TdxVerifier: evidence format \"%s\" but the quote is version %d",
        evidence.format(), quote->header.version));
  }
  Appraisal appraisal = AppraiseWithStore(
      *quote, quote_verifier_, options_.collateral.get(), options_.policy,
      &expected_report_data, options_.clock());
  if (absl::Status s = appraisal.Verdict(); !s.ok()) return s;

  AttestedIdentity id;
  id.format = evidence.format();
  id.mrtd.assign(quote->body.mr_td.begin(), quote->body.mr_td.end());
  for (const Measurement& r : quote->body.rtmr) {
    id.rtmr.emplace_back(r.begin(), r.end());
  }
  id.td_attributes = quote->body.td_attributes;
  id.tee_tcb_svn.assign(quote->body.tee_tcb_svn.begin(),
                        quote->body.tee_tcb_svn.end());
  if (appraisal.tcb_evaluation.has_value()) {
    id.tcb_status = appraisal.tcb_evaluation->status;
    id.advisory_ids = appraisal.tcb_evaluation->advisory_ids;
    id.collateral_issued_unix =
        absl::ToUnixSeconds(appraisal.verified_collateral->OldestIssue());
    id.collateral_next_update_unix = absl::ToUnixSeconds(
        appraisal.verified_collateral->EarliestNextUpdate());
  }
  return id;
}

}  // namespace gputravel::tdx
