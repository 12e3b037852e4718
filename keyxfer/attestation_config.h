#ifndef GPUTRAVEL_KEYXFER_ATTESTATION_CONFIG_H_
#define GPUTRAVEL_KEYXFER_ATTESTATION_CONFIG_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "keyxfer/attester.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// Builds this process's Attester and its Verifier for peers from the
// "attestation" section of a daemon's configuration:
//
//   {"backend": "tdx", "tdx": {"configfs_root": DIR (default the kernel's),
//    "root_ca": PEM (default the compiled-in Intel SGX Root CA),
//    "peer_policy": {"mrtd": .., "rtmr0".., "allow_debug": false,
//                    "min_tee_tcb_svn": ..}}}                (production)
//   {"backend": "dev", "allow_insecure_dev_attestation": true,
//    "dev_key": PEM, "dev_cert": PEM, "dev_root_ca": PEM,
//    "peer_mrtd": [hex, ...], "allow_debug": false}         (development)
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
    const std::string& domain);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_ATTESTATION_CONFIG_H_
