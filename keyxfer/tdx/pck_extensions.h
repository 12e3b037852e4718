#ifndef GPUTRAVEL_KEYXFER_TDX_PCK_EXTENSIONS_H_
#define GPUTRAVEL_KEYXFER_TDX_PCK_EXTENSIONS_H_

#include <openssl/types.h>

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gputravel::tdx {

// The Intel SGX extensions of a PCK certificate (OID 1.2.840.113741.1.13.1;
// Intel's "SGX PCK Certificate and CRL Profile"): the platform's identity and
// the TCB it was certified at, which TCB evaluation matches against Intel's
// TCB info. Only the fields TCB evaluation and operators need are kept.
struct PckExtensions {
  std::array<uint8_t, 16> ppid{};
  // SGX TCB components 1..16 (OIDs ...13.1.2.1 .. .2.16), index 0 = comp 1.
  std::array<uint8_t, 16> sgx_tcb_components{};
  uint16_t pce_svn = 0;                       // ...13.1.2.17
  std::array<uint8_t, 16> cpu_svn{};          // ...13.1.2.18
  std::array<uint8_t, 2> pce_id{};            // ...13.1.3
  std::array<uint8_t, 6> fmspc{};             // ...13.1.4
  int sgx_type = 0;                           // ...13.1.5 (0 Standard, 1 Scalable)
};

// Parses the SGX extensions of `cert`. Errors (kInvalidArgument) name the
// missing or malformed field by name and OID; every field above is required.
absl::StatusOr<PckExtensions> ParsePckExtensions(X509* cert);
// The same from a PEM certificate (the PCK leaf of a quote).
absl::StatusOr<PckExtensions> ParsePckExtensionsPem(absl::string_view pem);

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_PCK_EXTENSIONS_H_
