#ifndef GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_CONFIG_H_
#define GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gputravel {

struct HolderConfig {
  std::string name;      // unique; bound into every hand-off
  std::string endpoint;  // holder_agent gRPC endpoint
  std::string domain;    // TD the MUX routes the GPU to
};

struct GpuConfig {
  std::string name;             // MUX name ("gpu0")
  std::string device_endpoint;  // the GPU as seen from the orchestrator TD
  std::string device_ca;        // PEM file of the pinned device CA
  std::string serial;           // optional: pin one device serial
};

struct CampaignConfig {
  std::string name;
  uint64_t buffer_bytes = 0;    // device dataset buffer (multiple of 32)
  uint32_t chunk_bytes = 2u << 20;
  uint32_t rounds = 1;
  double trip_timeout_seconds = 120;
  std::vector<HolderConfig> holders;
};

// The orchestrator daemon's configuration.
struct OrchestratorConfig {
  std::string listen;
  std::string domain;       // the orchestrator TD's name at the MUX
  std::string state_dir;    // durable state (trip counter, counter windows)
  std::string mux_endpoint;
  GpuConfig gpu;
  nlohmann::json attestation;
  std::vector<CampaignConfig> campaigns;
};

// Parses and validates; every error names the file and the field
// (e.g. "orch.json: campaigns[0].holders[2].endpoint: missing").
absl::StatusOr<OrchestratorConfig> ParseOrchestratorConfig(const nlohmann::json& j,
                                                           const std::string& where);

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_CONFIG_H_
