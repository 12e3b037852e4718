#ifndef GPUTRAVEL_KEYXFER_TDX_POLICY_H_
#define GPUTRAVEL_KEYXFER_TDX_POLICY_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/tcb_evaluation.h"
#include "nlohmann/json_fwd.hpp"

namespace gputravel::tdx {

// What a relying party requires of an authentic TD report. JSON form (every
// key optional here, since Check also serves offline inspection; unknown keys
// refused so a misspelt pin cannot silently disable itself). A policy that
// gates keys must pin more: TdxVerifier::Create refuses one without mrtd,
// rtmr0, rtmr1, rtmr2 and min_tee_tcb_svn, because MRTD measures only the
// initial firmware image and the RTMRs the firmware configuration (ACPI
// tables), kernel, command line and initrd:
//   {
//     "mrtd": "<96 hex>" or ["<96 hex>", ...],   // any of the listed values
//     "rtmr0" .. "rtmr3", "mrseam", "mrconfigid", "mrowner",
//     "mrownerconfig": same form as "mrtd",
//     "allow_debug": false,              // default false
//     "min_tee_tcb_svn": "<32 hex>",     // each of the 16 bytes is a minimum
//     "require_report_data": true,       // default true
//     "xfam": {"mask": "<16 hex>", "value": "<16 hex>"},
//     "td_attributes": {"mask": .., "value": ..},  // fixed bits: the bits
//         set in mask must equal value's (hex of the 64-bit number, as
//         `attest verify` prints it); td_attributes adds to allow_debug
//     "min_tee_tcb_svn_2": "<32 hex>",   // TDX 1.5 bodies; a TDX 1.0 body
//     "mrservicetd": same as "mrtd",     //   fails a policy that sets these
//     "min_qe_svn": 4,                   // the QE report's ISVSVN
//     "min_pce_svn": 11,                 // the PCK certificate's PCESVN
//     // With collateral (TcbEvaluation) only:
//     "allowed_tcb_statuses": ["UpToDate"],  // default ["UpToDate"]
//     "allowed_advisory_ids": ["INTEL-SA-00837", ...],  // default none
//     "max_collateral_age": "720h"       // TCB info / QE identity issueDate
//                                        //   and PCK CRL thisUpdate
//   }                                    //   at most this old at `at`
// A list lets both the old and the new image pass while a fleet is upgraded.
struct Policy {
  // Allowed values; empty means the register is not checked (which
  // TdxVerifier::Create refuses for mrtd and rtmr[0..2]).
  std::vector<Measurement> mrtd;
  std::array<std::vector<Measurement>, 4> rtmr;
  std::vector<Measurement> mrseam;
  std::vector<Measurement> mrconfigid;
  std::vector<Measurement> mrowner;
  std::vector<Measurement> mrownerconfig;
  // A debug TD's memory and registers are readable by the host, so none of
  // its measurements mean anything for confidentiality.
  bool allow_debug = false;
  // TEE_TCB_SVN is a vector of independent component SVNs (TDX module major/
  // minor, SEAM loader, ...), so it is compared component by component, not
  // as one number. Unset means not checked (TdxVerifier::Create refuses that).
  std::optional<std::array<uint8_t, 16>> min_tee_tcb_svn;
  // Whether REPORTDATA must equal the verifier's expected report data.
  // False only makes sense for offline inspection of a stored quote.
  bool require_report_data = true;

  // Fixed bits of a 64-bit field: (actual & mask) == (value & mask).
  struct FixedBits {
    uint64_t mask = 0;
    uint64_t value = 0;
  };
  std::optional<FixedBits> xfam;
  std::optional<FixedBits> td_attributes;
  // TDX 1.5 body fields (quote v5, body type 3).
  std::optional<std::array<uint8_t, 16>> min_tee_tcb_svn_2;
  std::vector<Measurement> mrservicetd;
  std::optional<uint16_t> min_qe_svn;
  std::optional<uint16_t> min_pce_svn;
  // TCB level under Intel's collateral. A status not listed refuses; an
  // advisory ID of the matched levels not listed refuses.
  std::vector<std::string> allowed_tcb_statuses = {"UpToDate"};
  std::vector<std::string> allowed_advisory_ids;
  std::optional<absl::Duration> max_collateral_age;
  // Whether the policy text named any of the three fields above, even at its
  // default: a policy that writes "allowed_tcb_statuses": ["UpToDate"] asks
  // for a TCB evaluation, which must not be skipped for want of collateral.
  bool tcb_fields_given = false;

  static absl::StatusOr<Policy> FromJson(absl::string_view json);
  // The same from an already parsed JSON value (e.g. a section of a daemon's
  // configuration file).
  static absl::StatusOr<Policy> FromJsonValue(const nlohmann::json& json);

  // OK if `body` satisfies the policy. Errors are kPermissionDenied and name
  // the field with the expected and actual values in hex, e.g.
  // "MRTD mismatch: expected ab.., actual cd..".
  // `expected_report_data` is a gputravel::ReportData (same type, spelt out
  // so this header does not need the Attester interfaces).
  absl::Status Check(const TdReportBody& body,
                     const std::array<uint8_t, 64>& expected_report_data) const;

  // Every violation of the policy by an authentic quote, each naming the
  // field with expected and actual values ("TDX policy: XFAM fixed bits
  // mismatch: expected ..., actual ..."); empty means accepted.
  // `expected_report_data` null skips REPORTDATA (offline inspection).
  // `tcb` is the TCB evaluation under verified collateral; null means no
  // collateral, and then the TCB status, advisory and collateral age fields
  // are not checked (TdxVerifier refuses a policy that sets any of them
  // without collateral). `at` is the verification time (collateral age).
  std::vector<std::string> Violations(
      const Quote& quote, const std::array<uint8_t, 64>* expected_report_data,
      const TcbEvaluation* tcb, absl::Time at) const;

  // True if a field that needs collateral is given or differs from its
  // default.
  bool NeedsCollateral() const;

 private:
  void BodyViolations(const TdReportBody& body,
                      const std::array<uint8_t, 64>* expected_report_data,
                      std::vector<std::string>* out) const;
};

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_POLICY_H_
