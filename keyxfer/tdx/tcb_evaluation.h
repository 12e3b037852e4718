#ifndef GPUTRAVEL_KEYXFER_TDX_TCB_EVALUATION_H_
#define GPUTRAVEL_KEYXFER_TDX_TCB_EVALUATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "keyxfer/tdx/pck_extensions.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/tcb_info.h"

namespace gputravel::tdx {

// The TCB level of an authentic quote under verified collateral, as data.
struct TcbEvaluation {
  // Intel's status for the platform, TDX module and QE together (the
  // strings of tcb_info.h).
  std::string status;
  // Advisory IDs of the matched platform level, TDX module level and QE
  // level, sorted, without duplicates.
  std::vector<std::string> advisory_ids;

  // The platform level matched (index into TcbInfo::levels).
  int level_index = -1;
  std::string level_status;
  absl::Time level_tcb_date;
  // TDX module: the identity ("TDX_01", ...) when TEE_TCB_SVN[1] > 0, else
  // empty (tcbInfo.tdxModule was matched and has no levels of its own).
  std::string tdx_module_id;
  uint8_t tdx_module_isv_svn = 0;
  std::string tdx_module_status;  // empty when tdx_module_id is empty
  // Quoting Enclave.
  uint16_t qe_isv_svn = 0;
  std::string qe_status;
  absl::Time qe_tcb_date;

  // What the level was matched on.
  PckExtensions pck;
  // The collateral's own dates.
  absl::Time tcb_info_issue_date;
  absl::Time tcb_info_next_update;
  absl::Time qe_identity_issue_date;
  absl::Time qe_identity_next_update;
  // thisUpdate of the PCK CRL the PCK certificate was checked against (set by
  // Appraise, which verified that CRL; infinite future when not known). Intel
  // reissues it with the TCB info, so an old one may predate a revocation.
  absl::Time pck_crl_this_update = absl::InfiniteFuture();
  int tcb_evaluation_data_number = 0;
};

// Matches an authentic quote (QuoteVerifier passed) and its PCK leaf's SGX
// extensions against verified collateral, following Intel's quote
// verification library for TDX:
//   - FMSPC and PCE-ID of the PCK certificate equal the TCB info's
//     (kFailedPrecondition otherwise: the collateral is another platform's);
//   - the QE report matches the QE identity (MRSIGNER, ISVPRODID, MISCSELECT
//     and ATTRIBUTES under their masks) and its ISVSVN selects the first QE
//     TCB level at or below it;
//   - the TDX module: TEE_TCB_SVN[1] > 0 selects the identity "TDX_%02X" of
//     it, whose MRSIGNER must equal MRSIGNERSEAM and whose attributes must
//     equal SEAM attributes under the mask, and whose first level at or
//     below TEE_TCB_SVN[0] gives the module's status; TEE_TCB_SVN[1] == 0
//     checks MRSIGNERSEAM and attributes against tcbInfo.tdxModule only;
//   - the platform level: the first TCB level whose 16 SGX components are
//     at or below the PCK certificate's, whose PCESVN is at or below its
//     PCESVN, and whose TDX components are at or below TEE_TCB_SVN
//     (components 0 and 1 skipped when TEE_TCB_SVN[1] > 0, since the module
//     identity covers them);
//   - the status is the level's, lowered to OutOfDate /
//     OutOfDateConfigurationNeeded by an OutOfDate module or QE level and to
//     Revoked by a Revoked one.
// No matching level, QE level or module identity is kPermissionDenied
// (Intel's "TCB not supported"), whatever a policy allows; the reason lists,
// per level, the first component that falls short. TD relaunch advice for
// TDX 1.5 (TEE_TCB_SVN_2) is not evaluated; policy covers TEE_TCB_SVN_2.
absl::StatusOr<TcbEvaluation> EvaluateTcb(const Quote& quote,
                                          const PckExtensions& pck,
                                          const TcbInfo& tcb_info,
                                          const QeIdentity& qe_identity);

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_TCB_EVALUATION_H_
