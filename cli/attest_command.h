#ifndef GPUTRAVEL_CLI_ATTEST_COMMAND_H_
#define GPUTRAVEL_CLI_ATTEST_COMMAND_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "keyxfer/tdx/configfs_tsm.h"

namespace gputravel {

// Exit codes of `gputravel attest verify` (docs/cli.md).
inline constexpr int kAttestAccepted = 0;      // authentic, collateral and
                                               // TCB fine, policy accepts
inline constexpr int kAttestRefused = 1;       // authentic, but the TCB is not
                                               // supported or policy refuses
inline constexpr int kAttestUsage = 2;         // bad usage
inline constexpr int kAttestNotAuthentic = 3;  // malformed, signature, chain,
                                               // revocation or collateral
                                               // failure
inline constexpr int kAttestIoError = 4;       // a file or configfs-tsm failed

// `gputravel attest verify QUOTE [--collateral FILE|DIR] [--policy FILE]
// [--at TIME] [--json]` and `gputravel attest quote --report_data HEX
// [--configfs_root DIR] [--out FILE]`. Returns the exit code.
int AttestCommand(int argc, char** argv);

struct AttestVerifyInput {
  std::string quote_path;
  std::string collateral_path;  // empty: none
  std::string policy_path;      // empty: {} (the default policy)
  absl::Time at;
  bool json = false;
};

struct AttestVerifyOutput {
  int exit_code = kAttestAccepted;
  std::string text;  // the report (JSON or human-readable)
};

// The report `attest verify` prints, and its exit code.
AttestVerifyOutput AttestVerify(const AttestVerifyInput& input);

// `attest quote`: a quote for `report_data` from configfs-tsm (`options`),
// as raw bytes.
absl::StatusOr<std::string> AttestQuote(const std::array<uint8_t, 64>& report_data,
                                        tdx::ConfigfsTsmOptions options);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_ATTEST_COMMAND_H_
