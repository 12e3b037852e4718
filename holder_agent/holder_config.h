#ifndef GPUTRAVEL_HOLDER_AGENT_HOLDER_CONFIG_H_
#define GPUTRAVEL_HOLDER_AGENT_HOLDER_CONFIG_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "auth/tls_config.h"
#include "device/h2d_writer.h"
#include "nlohmann/json.hpp"
#include "proto/training.pb.h"

namespace gputravel {

// The holder agent's configuration (docs/operations.md, "holder_agent"), as
// parsed and checked before the agent opens its dataset or measures itself.
struct HolderConfig {
  std::string name;             // the holder; its certificate is holder/<name>
  std::string domain;           // its TD's name at the MUX
  std::string listen;           // unix:PATH or HOST:PORT
  std::string device_endpoint;  // the GPU as seen from this TD
  std::string state_dir;        // private: the trip freshness record
  std::set<std::string> orchestrator_names;  // the only orchestrators answered
  H2dWriterOptions writer;      // threads, bounce_slots, bounce_dir
  std::string dataset_name;
  std::string dataset_path;
  std::string dataset_format = "auto";  // auto|llmc-tokens|raw (Dataset::Open checks)
  v1::TrainingPolicy training_policy;   // the default unless configured
  nlohmann::json attestation;           // keyxfer/attestation_config.h
  TlsFiles tls;                         // checked (auth/tls_config.h)
  // Prometheus metrics over HTTP on 127.0.0.1:PORT (metrics/); empty: off.
  std::string metrics_listen;
};

// Parses `j` (read from `where`): every field known, the required ones
// present, numbers in range, the TLS files checked (ParseTlsConfig) and the
// certificate holder/<name>. Errors name `where` and the field. The dataset
// file and the attestation section are checked by their own readers
// (Dataset::Open, MakeAttestationFromConfig).
absl::StatusOr<HolderConfig> ParseHolderConfig(const nlohmann::json& j, const std::string& where);

}  // namespace gputravel

#endif  // GPUTRAVEL_HOLDER_AGENT_HOLDER_CONFIG_H_
