#ifndef GPUTRAVEL_KEYXFER_RUNTIME_MEASUREMENT_H_
#define GPUTRAVEL_KEYXFER_RUNTIME_MEASUREMENT_H_

#include <array>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// What a daemon trusts, as the three events it extends into RTMR3 before it
// serves (P6). The TD's boot chain (MRTD, RTMR0-2) does not cover the disk the
// daemon's binary and configuration come from, so the daemon measures them
// itself, and peers pin the events (keyxfer/runtime_policy.h).
//
// Events, extended in this order onto an all-zero RTMR3:
//   0 "binary"    SHA-384("gputravel-rtmr3-v1 binary\0" || executable bytes)
//   1 "config"    SHA-384("gputravel-rtmr3-v1 config\0" || canonical JSON of
//                 {"daemon", "config", "trusted_files"}), where "config" is the
//                 parsed configuration without "listen" and without the
//                 orchestrator's attestation.peer_rtmr3 (another daemon's
//                 stays, less its "peer_pins" entry), and "trusted_files" maps the JSON
//                 pointer of each file the daemon trusts (CA certificates:
//                 tls.ca, gpus[i].device_ca, attestation.tdx.root_ca,
//                 attestation.dev_root_ca) to the SHA-384 of its contents.
//                 Private keys are never read here.
//   2 "peer_pins" SHA-384("gputravel-rtmr3-v1 peer_pins\0" || canonical JSON
//                 of attestation.peer_rtmr3, or "null")
// Canonical JSON: nlohmann::json::dump() of the parsed value (object keys
// sorted, no whitespace), so formatting and key order do not matter.
//
// The daemon's pins of its peers are an event of their own so that two
// parties can pin each other: the orchestrator pins a holder's binary and
// config events (which do not depend on the holder's pins of the
// orchestrator), the holder pins all three of the orchestrator's. "listen" is
// left out because where a daemon serves grants nothing (mTLS and attestation
// decide who talks to it) and launchers rewrite a port chosen at start.
inline constexpr size_t kRtmrBytes = 48;
inline constexpr int kRtmr3EventCount = 3;
inline constexpr int kRtmr3BinaryEvent = 0;
inline constexpr int kRtmr3ConfigEvent = 1;
inline constexpr int kRtmr3PeerPinsEvent = 2;

// "binary", "config", "peer_pins".
const char* Rtmr3EventName(int event);

// JSON pointer of a daemon's pins of its peers' events.
inline constexpr char kPeerRtmr3Pointer[] = "/attestation/peer_rtmr3";

// The TDX extend operation: SHA-384(rtmr || digest); both 48 bytes.
std::string ExtendRtmr(absl::string_view rtmr, absl::string_view digest);

// The register that results from extending `digests` in order onto zero.
std::string ReplayRtmr(const std::vector<std::string>& digests);

struct RuntimeMeasurement {
  std::array<std::string, kRtmr3EventCount> events;  // 48 bytes each
  std::string rtmr3;  // ReplayRtmr(events)
  // The exact bytes of each trusted file the config event covers, by JSON
  // pointer ("/gpus/0/device_ca"): a daemon uses these, never the file
  // again, so what it trusts is what it measured (the host can replace a
  // file on the disk it supplies at any time).
  std::map<std::string, std::string> trusted_files;

  // trusted_files[pointer]; FAILED_PRECONDITION naming `field` when that
  // file was not measured.
  absl::StatusOr<std::string> File(const std::string& pointer, const std::string& field) const;

  std::vector<std::string> EventList() const {
    return std::vector<std::string>(events.begin(), events.end());
  }
};

// Measures daemon `daemon` ("orchestrator", "holder_agent") running
// `binary_path` with the parsed configuration `config` read from `where`.
// Errors name `where` and the field (a trusted file that cannot be read).
absl::StatusOr<RuntimeMeasurement> MeasureDaemon(const std::string& daemon,
                                                 const std::string& binary_path,
                                                 const nlohmann::json& config,
                                                 const std::string& where);

// Each event on its own, as MeasureDaemon computes it: a launcher that writes
// peers' pins needs the config and peer_pins events of a configuration it
// has not started, and a development verifier the binary event of a file it
// names (attestation "dev_peer_binaries").
absl::StatusOr<std::string> Rtmr3BinaryEvent(const std::string& binary_path);
absl::StatusOr<std::string> Rtmr3ConfigEvent(const std::string& daemon,
                                             const nlohmann::json& config,
                                             const std::string& where);
absl::StatusOr<std::string> Rtmr3PeerPinsEvent(const nlohmann::json& config);

// The document the config event hashes (for operators to see what is
// covered, and for tests). `contents` (may be null) gets the bytes of each
// trusted file that was hashed, by JSON pointer.
absl::StatusOr<nlohmann::json> CanonicalConfig(
    const std::string& daemon, const nlohmann::json& config, const std::string& where,
    std::map<std::string, std::string>* contents = nullptr);

// SHA-384 of a file's contents, read in pieces.
absl::StatusOr<std::string> Sha384File(const std::string& path);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_RUNTIME_MEASUREMENT_H_
