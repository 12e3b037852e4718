#ifndef GPUTRAVEL_CLI_DEV_PKI_H_
#define GPUTRAVEL_CLI_DEV_PKI_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gputravel {

// Development key material for the emulated stack, written to `dir` (keys
// mode 0600): the device CA and the emulated GPU's identity (ECDSA P-384, as
// NVIDIA's device certificates), and the development attestation root with
// one attestation key per trust domain (ECDSA P-256). Never used with real
// hardware: a TDX deployment attests with quotes and pins NVIDIA's device CA.
struct DevPki {
  std::string device_ca_cert;     // PEM path
  std::string device_ca_key;      // PEM path (0600): issues other emulated devices (tests)
  std::string device_key;         // PEM path
  std::string device_cert;        // PEM path
  std::string attestation_root;   // PEM path
  struct Pair { std::string key, cert; };
  std::map<std::string, Pair> domains;  // domain -> attestation key/cert
};

// Where CreateDevPki(dir, ..., domains) puts each file.
DevPki DevPkiPaths(const std::string& dir, const std::vector<std::string>& domains);

absl::StatusOr<DevPki> CreateDevPki(const std::string& dir,
                                    const std::string& device_serial,
                                    const std::vector<std::string>& domains);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_DEV_PKI_H_
