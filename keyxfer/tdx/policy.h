#ifndef GPUTRAVEL_KEYXFER_TDX_POLICY_H_
#define GPUTRAVEL_KEYXFER_TDX_POLICY_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/tdx/quote.h"
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
//     "require_report_data": true        // default true
//   }
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
};

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_POLICY_H_
