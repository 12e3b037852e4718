#include "keyxfer/tdx/tcb_evaluation.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "util/hex.h"

namespace gputravel::tdx {
namespace {

absl::Status NotSupported(absl::string_view message) {
  return absl::PermissionDeniedError(
      absl::StrCat("TDX TCB not supported: ", message));
}

std::string DateOf(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d", t, absl::UTCTimeZone());
}

// The first level at or below `svn` (levels are newest first).
const IsvSvnLevel* FirstAtOrBelow(const std::vector<IsvSvnLevel>& levels,
                                  uint16_t svn) {
  for (const IsvSvnLevel& l : levels) {
    if (svn >= l.isv_svn) return &l;
  }
  return nullptr;
}

// Intel's convergence of a level's status with an OutOfDate or Revoked
// module or QE level.
std::string Converge(const std::string& status, const std::string& other) {
  if (other == "Revoked") return "Revoked";
  if (other == "OutOfDate") {
    if (status == "UpToDate" || status == "SWHardeningNeeded") {
      return "OutOfDate";
    }
    if (status == "ConfigurationNeeded" ||
        status == "ConfigurationAndSWHardeningNeeded") {
      return "OutOfDateConfigurationNeeded";
    }
  }
  return status;
}

// Empty if `level` matches, else the first component that falls short.
std::string Shortfall(const TcbLevel& level, const PckExtensions& pck,
                      const std::array<uint8_t, 16>& tee_tcb_svn) {
  for (size_t i = 0; i < 16; ++i) {
    if (pck.sgx_tcb_components[i] < level.sgx_components[i]) {
      return absl::StrFormat(
          "SGX TCB component %d of the PCK certificate is %d, the level "
          "needs %d",
          i + 1, pck.sgx_tcb_components[i], level.sgx_components[i]);
    }
  }
  if (pck.pce_svn < level.pce_svn) {
    return absl::StrFormat("PCESVN of the PCK certificate is %d, the level "
                           "needs %d",
                           pck.pce_svn, level.pce_svn);
  }
  for (size_t i = tee_tcb_svn[1] > 0 ? 2 : 0; i < 16; ++i) {
    if (tee_tcb_svn[i] < level.tdx_components[i]) {
      return absl::StrFormat(
          "TEE_TCB_SVN[%d] of the quote is %d, the level needs %d", i,
          tee_tcb_svn[i], level.tdx_components[i]);
    }
  }
  return "";
}

absl::Status CheckQeIdentity(const QeReport& qe, const QeIdentity& id) {
  auto mismatch = [](absl::string_view field, const std::string& expected,
                     const std::string& actual) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "TDX QE identity (collateral): %s mismatch: expected %s, actual %s",
        field, expected, actual));
  };
  if (qe.mr_signer != id.mr_signer) {
    return mismatch("MRSIGNER", HexEncode(id.mr_signer), HexEncode(qe.mr_signer));
  }
  if (qe.isv_prod_id != id.isv_prod_id) {
    return mismatch("ISVPRODID", absl::StrCat(id.isv_prod_id),
                    absl::StrCat(qe.isv_prod_id));
  }
  if ((qe.misc_select & id.misc_select_mask) !=
      (id.misc_select & id.misc_select_mask)) {
    return mismatch(
        absl::StrFormat("MISCSELECT under mask %08x", id.misc_select_mask),
        absl::StrFormat("%08x", id.misc_select & id.misc_select_mask),
        absl::StrFormat("%08x", qe.misc_select & id.misc_select_mask));
  }
  std::array<uint8_t, 16> want{}, got{};
  for (size_t i = 0; i < 16; ++i) {
    want[i] = id.attributes[i] & id.attributes_mask[i];
    got[i] = qe.attributes[i] & id.attributes_mask[i];
  }
  if (want != got) {
    return mismatch(
        absl::StrCat("ATTRIBUTES under mask ", HexEncode(id.attributes_mask)),
        HexEncode(want), HexEncode(got));
  }
  return absl::OkStatus();
}

absl::Status CheckModule(const TdReportBody& body,
                         const TdxModuleIdentity& module,
                         absl::string_view name) {
  if (body.mr_signer_seam != module.mr_signer) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "TDX module identity %s: MRSIGNERSEAM mismatch: expected %s, actual "
        "%s",
        name, HexEncode(module.mr_signer), HexEncode(body.mr_signer_seam)));
  }
  if ((body.seam_attributes & module.attributes_mask) !=
      (module.attributes & module.attributes_mask)) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "TDX module identity %s: SEAM attributes under mask %016x mismatch: "
        "expected %016x, actual %016x",
        name, module.attributes_mask,
        module.attributes & module.attributes_mask,
        body.seam_attributes & module.attributes_mask));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TcbEvaluation> EvaluateTcb(const Quote& quote,
                                          const PckExtensions& pck,
                                          const TcbInfo& tcb_info,
                                          const QeIdentity& qe_identity) {
  if (pck.fmspc != tcb_info.fmspc) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "TDX collateral is for another platform: TCB info FMSPC %s, the PCK "
        "certificate's FMSPC %s (supply the collateral for FMSPC %s)",
        absl::AsciiStrToUpper(HexEncode(tcb_info.fmspc)),
        absl::AsciiStrToUpper(HexEncode(pck.fmspc)),
        absl::AsciiStrToUpper(HexEncode(pck.fmspc))));
  }
  if (pck.pce_id != tcb_info.pce_id) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "TDX collateral is for another PCE: TCB info PCE-ID %s, the PCK "
        "certificate's PCE-ID %s",
        HexEncode(tcb_info.pce_id), HexEncode(pck.pce_id)));
  }
  TcbEvaluation out;
  out.pck = pck;
  out.tcb_info_issue_date = tcb_info.issue_date;
  out.tcb_info_next_update = tcb_info.next_update;
  out.qe_identity_issue_date = qe_identity.issue_date;
  out.qe_identity_next_update = qe_identity.next_update;
  out.tcb_evaluation_data_number = tcb_info.tcb_evaluation_data_number;
  std::vector<std::string> advisories;

  // Quoting Enclave.
  if (absl::Status s = CheckQeIdentity(quote.qe_report, qe_identity); !s.ok()) {
    return s;
  }
  out.qe_isv_svn = quote.qe_report.isv_svn;
  const IsvSvnLevel* qe_level =
      FirstAtOrBelow(qe_identity.levels, quote.qe_report.isv_svn);
  if (qe_level == nullptr) {
    return NotSupported(absl::StrFormat(
        "QE ISVSVN %d is below every TCB level of the QE identity (lowest "
        "%d)",
        quote.qe_report.isv_svn,
        qe_identity.levels.empty() ? 0 : qe_identity.levels.back().isv_svn));
  }
  out.qe_status = qe_level->status;
  out.qe_tcb_date = qe_level->tcb_date;
  advisories.insert(advisories.end(), qe_level->advisory_ids.begin(),
                    qe_level->advisory_ids.end());

  // TDX module.
  const TdReportBody& body = quote.body;
  const uint8_t module_version = body.tee_tcb_svn[1];
  if (module_version == 0) {
    if (absl::Status s = CheckModule(body, tcb_info.tdx_module, "tdxModule");
        !s.ok()) {
      return s;
    }
  } else {
    const std::string id = absl::StrFormat("TDX_%02X", module_version);
    const TdxModuleIdentity* identity = nullptr;
    for (const TdxModuleIdentity& m : tcb_info.tdx_module_identities) {
      if (absl::AsciiStrToUpper(m.id) == id) identity = &m;
    }
    if (identity == nullptr) {
      return NotSupported(absl::StrFormat(
          "TEE_TCB_SVN[1] = %d names TDX module identity %s, which the TCB "
          "info does not list",
          module_version, id));
    }
    if (absl::Status s = CheckModule(body, *identity, id); !s.ok()) return s;
    out.tdx_module_id = id;
    out.tdx_module_isv_svn = body.tee_tcb_svn[0];
    const IsvSvnLevel* module_level =
        FirstAtOrBelow(identity->levels, body.tee_tcb_svn[0]);
    if (module_level == nullptr) {
      return NotSupported(absl::StrFormat(
          "TDX module %s ISVSVN (TEE_TCB_SVN[0]) %d is below every level of "
          "its identity",
          id, body.tee_tcb_svn[0]));
    }
    out.tdx_module_status = module_level->status;
    advisories.insert(advisories.end(), module_level->advisory_ids.begin(),
                      module_level->advisory_ids.end());
  }

  // Platform level.
  std::vector<std::string> shortfalls;
  for (size_t i = 0; i < tcb_info.levels.size(); ++i) {
    const TcbLevel& level = tcb_info.levels[i];
    std::string why = Shortfall(level, pck, body.tee_tcb_svn);
    if (why.empty()) {
      out.level_index = static_cast<int>(i);
      break;
    }
    shortfalls.push_back(absl::StrFormat("level %d (%s, %s): %s", i,
                                         level.status, DateOf(level.tcb_date),
                                         why));
  }
  if (out.level_index < 0) {
    return NotSupported(absl::StrFormat(
        "no TCB level of the TCB info for FMSPC %s matches this platform: %s",
        absl::AsciiStrToUpper(HexEncode(tcb_info.fmspc)),
        absl::StrJoin(shortfalls, "; ")));
  }
  const TcbLevel& level = tcb_info.levels[out.level_index];
  out.level_status = level.status;
  out.level_tcb_date = level.tcb_date;
  advisories.insert(advisories.end(), level.advisory_ids.begin(),
                    level.advisory_ids.end());

  out.status = level.status;
  if (!out.tdx_module_status.empty()) {
    out.status = Converge(out.status, out.tdx_module_status);
  }
  out.status = Converge(out.status, out.qe_status);
  std::sort(advisories.begin(), advisories.end());
  advisories.erase(std::unique(advisories.begin(), advisories.end()),
                   advisories.end());
  out.advisory_ids = std::move(advisories);
  return out;
}

}  // namespace gputravel::tdx
