#ifndef GPUTRAVEL_DEVICE_EMULATED_GPU_CONFIG_H_
#define GPUTRAVEL_DEVICE_EMULATED_GPU_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "device/emulated_gpu.h"
#include "keyxfer/ec_key.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// The emulated GPU daemon's configuration (docs/operations.md,
// "emulated_gpu"), parsed and checked.
struct EmulatedGpuConfig {
  EmulatedGpuOptions options;  // serial, memory, thresholds, shared_dirs
  std::string identity_key;    // PEM path (0600)
  std::string identity_cert;   // PEM path: CN = serial, from the device CA
  std::string socket_dir;      // DIR/DOMAIN.sock per domain
  std::string admin_socket;    // the MUX's
  std::vector<std::string> domains;
};

// Parses `j` (read from `where`): every field known, the required ones
// present, each domain a plain name, each shared directory existing, not a
// link and a domain's own. Errors name `where` and the field.
absl::StatusOr<EmulatedGpuConfig> ParseEmulatedGpuConfig(const nlohmann::json& j,
                                                         const std::string& where);

// The device's identity: the key (read once, the file's bytes wiped from
// memory) and its certificate (DER). The key must be the certificate's, and
// the certificate's common name the configured serial (what the
// orchestrator pins). Errors name `where` and the field.
struct EmulatedGpuIdentity {
  EcKey key;
  std::string cert_der;
};
absl::StatusOr<EmulatedGpuIdentity> LoadEmulatedGpuIdentity(const EmulatedGpuConfig& config,
                                                            const std::string& where);

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_EMULATED_GPU_CONFIG_H_
