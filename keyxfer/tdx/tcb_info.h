#ifndef GPUTRAVEL_KEYXFER_TDX_TCB_INFO_H_
#define GPUTRAVEL_KEYXFER_TDX_TCB_INFO_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "keyxfer/tdx/quote.h"

namespace gputravel::tdx {

// Intel's signed TCB documents for TDX, as the PCS serves them (the JSON
// value of "tcbInfo" and "enclaveIdentity"; Intel PCS API v4). Parsing only:
// the signature over these exact bytes is CollateralVerifier's.
//
// TCB statuses are kept as Intel's strings ("UpToDate", "SWHardeningNeeded",
// "ConfigurationNeeded", "ConfigurationAndSWHardeningNeeded", "OutOfDate",
// "OutOfDateConfigurationNeeded", "Revoked"); a level with any other string
// is refused at parse time, so a policy can only ever allow a status Intel
// defined.
bool IsKnownTcbStatus(absl::string_view status);

struct TcbLevel {
  std::array<uint8_t, 16> sgx_components{};
  uint16_t pce_svn = 0;
  std::array<uint8_t, 16> tdx_components{};
  absl::Time tcb_date;
  std::string status;
  std::vector<std::string> advisory_ids;
};

// A TCB level of a TDX module identity or of the QE identity: one ISVSVN.
struct IsvSvnLevel {
  uint16_t isv_svn = 0;
  absl::Time tcb_date;
  std::string status;
  std::vector<std::string> advisory_ids;
};

struct TdxModuleIdentity {
  std::string id;  // "TDX_01", ...; empty for the tcbInfo's "tdxModule"
  Measurement mr_signer{};
  uint64_t attributes = 0;
  uint64_t attributes_mask = 0;
  std::vector<IsvSvnLevel> levels;  // empty for "tdxModule"
};

struct TcbInfo {
  std::string id;  // "TDX"
  int version = 0;  // 3
  absl::Time issue_date;
  absl::Time next_update;
  std::array<uint8_t, 6> fmspc{};
  std::array<uint8_t, 2> pce_id{};
  int tcb_type = 0;
  int tcb_evaluation_data_number = 0;
  TdxModuleIdentity tdx_module;
  std::vector<TdxModuleIdentity> tdx_module_identities;
  std::vector<TcbLevel> levels;  // in the document's order (newest first)
};

struct QeIdentity {
  std::string id;  // "TD_QE"
  int version = 0;  // 2
  absl::Time issue_date;
  absl::Time next_update;
  int tcb_evaluation_data_number = 0;
  uint32_t misc_select = 0;
  uint32_t misc_select_mask = 0;
  std::array<uint8_t, 16> attributes{};
  std::array<uint8_t, 16> attributes_mask{};
  std::array<uint8_t, 32> mr_signer{};
  uint16_t isv_prod_id = 0;
  std::vector<IsvSvnLevel> levels;  // newest first
};

// Parses a TCB info body; refuses anything but "id": "TDX", "version": 3,
// and any missing or mistyped field (errors name it with its JSON path).
// Unknown fields are ignored: Intel may add some, and the signature covers
// them anyway.
absl::StatusOr<TcbInfo> ParseTcbInfo(absl::string_view json);
// Parses a QE identity body; refuses anything but "id": "TD_QE",
// "version": 2.
absl::StatusOr<QeIdentity> ParseQeIdentity(absl::string_view json);

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_TCB_INFO_H_
