#ifndef GPUTRAVEL_KEYXFER_TDX_POLICY_H_
#define GPUTRAVEL_KEYXFER_TDX_POLICY_H_

#include <array>
#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/tdx/quote.h"

namespace gputravel::tdx {

// What a relying party requires of an authentic TD report. Unset optional
// fields are not checked. JSON form (every key optional, unknown keys refused
// so a misspelt pin cannot silently disable itself):
//   {
//     "mrtd": "<96 hex>", "rtmr0" .. "rtmr3": "<96 hex>",
//     "mrseam": "<96 hex>", "mrconfigid": "<96 hex>", "mrowner": "<96 hex>",
//     "mrownerconfig": "<96 hex>",
//     "allow_debug": false,              // default false
//     "min_tee_tcb_svn": "<32 hex>",     // each of the 16 bytes is a minimum
//     "require_report_data": true        // default true
//   }
struct Policy {
  std::optional<Measurement> mrtd;
  std::array<std::optional<Measurement>, 4> rtmr;
  std::optional<Measurement> mrseam;
  std::optional<Measurement> mrconfigid;
  std::optional<Measurement> mrowner;
  std::optional<Measurement> mrownerconfig;
  // A debug TD's memory and registers are readable by the host, so none of
  // its measurements mean anything for confidentiality.
  bool allow_debug = false;
  // TEE_TCB_SVN is a vector of independent component SVNs (TDX module major/
  // minor, SEAM loader, ...), so it is compared component by component, not
  // as one number.
  std::optional<std::array<uint8_t, 16>> min_tee_tcb_svn;
  // Whether REPORTDATA must equal the verifier's expected report data.
  // False only makes sense for offline inspection of a stored quote.
  bool require_report_data = true;

  static absl::StatusOr<Policy> FromJson(absl::string_view json);

  // OK if `body` satisfies the policy. Errors are kPermissionDenied and name
  // the field with the expected and actual values in hex, e.g.
  // "MRTD mismatch: expected ab.., actual cd..".
  // `expected_report_data` is a gputravel::ReportData (same type, spelt out
  // so this header does not need the Attester interfaces).
  absl::Status Check(const TdReportBody& body,
                     const std::array<uint8_t, 64>& expected_report_data) const;
};

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_POLICY_H_
