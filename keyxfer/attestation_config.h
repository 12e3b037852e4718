#ifndef GPUTRAVEL_KEYXFER_ATTESTATION_CONFIG_H_
#define GPUTRAVEL_KEYXFER_ATTESTATION_CONFIG_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "keyxfer/attester.h"
#include "keyxfer/runtime_measurement.h"
#include "keyxfer/tdx/configfs_tsm.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// Builds this process's Attester and its Verifier for peers from the
// "attestation" section of a daemon's configuration:
//
//   {"backend": "tdx", "tdx": {"configfs_root": DIR (default the kernel's),
//    "measurements_root": DIR (default /sys/class/misc/tdx_guest/measurements),
//    "root_ca": PEM (default the compiled-in Intel SGX Root CA),
//    "collateral": FILE or DIR of Intel collateral bundles (optional;
//                  tdx::CollateralStore, reread when it changes),
//    "peer_policy": {"mrtd": .., "rtmr0".., "allow_debug": false,
//                    "min_tee_tcb_svn": .., "allowed_tcb_statuses": ..}},
//    "peer_rtmr3": {"binary": .., "config": .., "peer_pins": ..}} (production)
//   {"backend": "dev", "allow_insecure_dev_attestation": true,
//    "dev_key": PEM, "dev_cert": PEM, "dev_root_ca": PEM,
//    "peer_mrtd": [hex, ...], "dev_peer_binaries": [PATH, ...],
//    "allow_debug": false, "peer_rtmr3": {...} (optional)}   (development)
//
// `measurement` is this daemon's (MeasureDaemon over the whole configuration
// file). Its events ride on every piece of evidence (MeasuredAttester). The
// TDX backend extends them into RTMR3 before it returns (tdx::MeasureIntoRtmr3)
// and fails if it cannot, so a daemon that serves has measured what it
// trusts; it requires "peer_rtmr3" (keyxfer/runtime_policy.h). The
// development attester reports measurement.rtmr3 as its RTMR3, and checks
// peers' events when "peer_rtmr3" is given.
//
// "dev_peer_binaries" (development only) names the peers' binaries by
// absolute path: at start each file's SHA-384 is added to the allowed peer
// MRTDs and its RTMR3 binary event to peer_rtmr3's "binary" pins (which the
// file may then leave out), so a rebuilt peer is pinned again by a restart,
// with no edited configuration. It trusts whatever those files hold when the
// daemon starts, which only a development deployment may do: the TDX
// backend refuses it (and every other development field) by name.
//
// The development backend is refused unless
// "allow_insecure_dev_attestation" is literally true: it cannot be reached by
// a missing or mistyped field. Errors name `where` and the field.
struct AttestationSetup {
  std::string backend;
  std::unique_ptr<Attester> attester;
  std::unique_ptr<Verifier> verifier;
};

absl::StatusOr<AttestationSetup> MakeAttestationFromConfig(
    const nlohmann::json& section, const std::string& where,
    const std::string& domain, const RuntimeMeasurement& measurement,
    std::shared_ptr<tdx::TsmFs> measurements_fs_for_test = nullptr);

// Everything MakeAttestationFromConfig checks of `section`, offline (for
// `gputravel config check`): the files it names are read and checked, but
// nothing is extended into RTMR3, no quote is taken and the environment is
// not looked at. Returns the backend ("tdx" or "dev").
absl::StatusOr<std::string> CheckAttestationConfig(const nlohmann::json& section,
                                                   const std::string& where,
                                                   const std::string& domain,
                                                   const RuntimeMeasurement& measurement);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_ATTESTATION_CONFIG_H_
