#ifndef GPUTRAVEL_ORCHESTRATOR_DAEMON_CONFIG_H_
#define GPUTRAVEL_ORCHESTRATOR_DAEMON_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/tls_config.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// One GPU this orchestrator drives.
struct GpuConfig {
  std::string name;             // MUX name ("gpu0"); campaigns name it
  std::string device_endpoint;  // the GPU as seen from the orchestrator TD
  std::string device_ca;        // PEM file of the pinned device CA
  // That file's bytes as measured into RTMR3 at start-up (P6): the engine
  // trusts these and never reads the file again. Empty: read device_ca.
  std::string device_ca_pem;
  // The device's serial, pinned (P5): required unless the configuration is
  // a development one (attestation.allow_insecure_dev_attestation).
  std::string serial;
  // The device's CC heartbeat period (RmConfComputeHeartbeatPeriod, 4-255 s;
  // 0: off, the default). With it the orchestrator sends heartbeats while the
  // GPU is home and idle, sends one right before the GPU leaves, and bounds
  // each trip's time away so the GPU is back and re-keyed before it would
  // miss two periods (a miss costs a reset: session and memory gone).
  uint32_t heartbeat_period_seconds = 0;
};

// The orchestrator daemon's configuration. Campaigns are not configured
// here: schedulers create them through the API (campaign_spec.h).
struct OrchestratorConfig {
  std::string listen;       // scheduler/operator API endpoint (mTLS)
  // The Trainer service's endpoint (proto/trainer.proto; mTLS, role
  // trainer): a Unix socket inside the orchestrator's TD only,
  // "unix:/absolute/path". Empty: not served (no campaign of trainer kind
  // "external" can train).
  std::string trainer_listen;
  std::string domain;       // the orchestrator TD's name at the MUX
  std::string state_dir;    // SQLite database and counter-window files
  // The key the database's model checkpoints are sealed under
  // (orchestrator/checkpoint_seal.h); default <state_dir>/checkpoint.key.
  // Elsewhere when state_dir is on storage others can read.
  std::string checkpoint_key_file;
  std::string mux_endpoint;
  std::string mux_name = "mux";  // name in the MUX's certificate
  std::vector<GpuConfig> gpus;
  nlohmann::json attestation;
  TlsFiles tls;              // this orchestrator's identity (role orchestrator)
  // Where its Prometheus metrics are served (metrics/metrics_exposer.h:
  // "127.0.0.1:PORT" only). Empty: no metrics.
  std::string metrics_listen;
  // The orchestrator's own evaluation set (an llm.c token shard or raw
  // uint16 tokens, inside its TD; its first kMaxEvalTokens tokens are used):
  // the held-out loss is measured on it after each trained window. Empty:
  // no held-out loss.
  std::string eval_tokens;
};

// OK for "unix:/absolute/path"; anything else (a TCP address above all: the
// trainer listener serves plaintext windows, which must not leave the TD over
// a network) InvalidArgument naming `where`.
absl::Status CheckTrainerListen(const std::string& endpoint, const std::string& where);

// Parses and validates; every error names the file and the field
// (e.g. "orch.json: gpus[1]: missing field 'device_ca'"). Checks that the TLS files
// are readable and consistent (auth/tls_config.h).
absl::StatusOr<OrchestratorConfig> ParseOrchestratorConfig(const nlohmann::json& j,
                                                           const std::string& where);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_DAEMON_CONFIG_H_
