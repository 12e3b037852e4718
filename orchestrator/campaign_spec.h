#ifndef GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_SPEC_H_
#define GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_SPEC_H_

// The campaign spec: the JSON document a scheduler or operator submits to
// create a campaign (a file, or CreateCampaign.spec_json). It is parsed and
// validated here, in one place, so that every entry point rejects the same
// things with the same messages. Every error names the field path inside the
// spec, prefixed by the caller's `where`, e.g.
//   campaign.json: holders[2].dataset.format: must be one of auto, llmc-tokens, raw (got "csv")
// Unknown fields are errors too, so a typo ("endpiont") is not silently ignored.
//
// Schema (defaults in parentheses):
//   name                    required, [a-z0-9][a-z0-9._-]{0,62}
//   gpu                     required, one of SpecOptions::known_gpus
//   buffer_bytes            required, multiple of 32 in 32..64 GiB
//   chunk_bytes             (2 MiB) multiple of 32 in 32..64 MiB
//   copy_engines            (DefaultCopyEngines()) 1..8: copy engines a
//                           window is written through side by side
//   rounds                  (1) 1..1000000 passes over every dataset
//   schedule                ("round-robin") "round-robin" | "proportional"
//   holder_timeout_seconds  (120) number, > 0 and <= 86400
//   on_holder_failure       ("skip") "skip" | "pause"
//   holders                 required, 1..256 entries; names, domains and
//                           endpoints unique
//     name                  required, same charset as the campaign name
//     endpoint              required, "unix:/abs/path" or "host:port"
//                           (port 1..65535, IPv6 hosts in [brackets])
//     domain                required, TD name at the MUX: non-empty, no
//                           whitespace, not one of SpecOptions::reserved_domains
//     dataset               required object
//       name                required: the dataset the holder agent serves
//                           (non-empty, at most 256 bytes, no whitespace)
//       format              ("auto") "auto" | "llmc-tokens" | "raw"
//   trainer                 ({"kind": "next-token"})
//     kind                  ("next-token") "next-token" | "none" | "external"
//     vocab                 (512) 2..65536
//     dim                   (32) 1..1024; built-in model only
//     learning_rate         (0.05) number, > 0 and <= 100; built-in model only
//     batch_tokens          (65536) 2..16777216
//     seed                  (1) any uint64; built-in model only
//   With kind "external" (a training process attached to the Trainer service,
//   proto/trainer.proto), dim, learning_rate and seed are refused (they shape
//   the built-in model only) and these apply:
//     identity              required: the name in the certificate (role
//                           trainer) of the only process that may attach
//     timeout_seconds       (600) number, > 0 and <= 86400: the longest a
//                           window waits for the trainer to attach, train and
//                           report it
//     release_timeout_seconds  (30) number, > 0 and <= 3600: the longest the
//                           GPU waits for the trainer to release its lease
//     on_failure            ("pause") "pause" | "fail": what a trainer that
//                           misses timeout_seconds does to the campaign
// Integer fields must be JSON integers: 1.5, 8.0, "8" and negative numbers
// are rejected. JSON null is not "absent": it is a wrong type.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gputravel {

struct DatasetSpec {
  std::string name;            // the dataset the holder agent serves
  std::string format = "auto";  // "auto" | "llmc-tokens" | "raw"
};

// Campaign and holder names: [a-z0-9][a-z0-9._-]{0,62}. They end up in file
// names, logs and hand-offs, so the charset is deliberately narrow.
bool ValidName(const std::string& s);

// "" when `e` is a valid endpoint, else why not. Accepted forms:
//   unix:/abs/path          (gRPC's unix: scheme, absolute path)
//   host:port               (DNS name or IPv4 address)
//   [ipv6]:port
std::string EndpointProblem(const std::string& e);

struct HolderSpec {
  std::string name;      // unique within the campaign; bound into hand-offs
  std::string endpoint;  // holder agent gRPC endpoint
  std::string domain;    // TD the MUX routes the GPU to
  DatasetSpec dataset;
};

// The largest checkpoint a campaign's trainer may have: the state store
// keeps it, sealed, in one SQLite value, which the library caps at 10^9
// bytes (SQLITE_MAX_LENGTH); the rest is headroom for the seal and the
// statement. A spec whose model exceeds it is refused at create.
inline constexpr uint64_t kMaxCheckpointBytes = 900'000'000;

struct TrainerSpec {
  // "next-token" (built-in) | "none" | "external" (proto/trainer.proto)
  std::string kind = "next-token";
  uint32_t vocab = 512;
  uint32_t dim = 32;
  // The built-in model's own default (NextTokenModelConfig): at 0.5 its Adam
  // steps stall the loss at 1.87 nats and then blow it up to 41.6.
  double learning_rate = 0.05;
  uint64_t batch_tokens = 65536;
  uint64_t seed = 1;
  // Kind "external" only (defaults elsewhere).
  std::string identity;
  double timeout_seconds = 600;
  double release_timeout_seconds = 30;
  std::string on_failure = "pause";  // "pause" | "fail"
};

// Which holder goes next (see orchestrator/schedule.h).
enum class SchedulePolicy { kRoundRobin, kProportional };
// What a holder failure does to the campaign.
enum class HolderFailurePolicy {
  kSkip,   // the failed holder is dropped, the campaign goes on
  kPause,  // the campaign pauses for an operator
};

struct CampaignSpec {
  std::string name;
  std::string gpu;
  uint64_t buffer_bytes = 0;
  uint32_t chunk_bytes = 2u << 20;
  // 1..8; 0: not given, DefaultCopyEngines() of the machine that plans the
  // trip (CopyEnginesFor).
  uint32_t copy_engines = 0;
  uint32_t rounds = 1;
  SchedulePolicy schedule = SchedulePolicy::kRoundRobin;
  double holder_timeout_seconds = 120;
  HolderFailurePolicy on_holder_failure = HolderFailurePolicy::kSkip;
  std::vector<HolderSpec> holders;
  TrainerSpec trainer;
};

// The copy engines a window goes through when the spec does not say: one
// per core of this machine (the holder encrypts and, emulated, the device
// decrypts on the CPU; more engines than cores only contend), at most the
// GPU's eight.
uint32_t DefaultCopyEngines();
// The spec's copy_engines, or DefaultCopyEngines() when not given.
uint32_t CopyEnginesFor(const CampaignSpec& spec);

// Field-by-field equality (doubles compared exactly: the JSON round trip is
// exact).
bool operator==(const DatasetSpec& a, const DatasetSpec& b);
bool operator==(const HolderSpec& a, const HolderSpec& b);
bool operator==(const TrainerSpec& a, const TrainerSpec& b);
bool operator==(const CampaignSpec& a, const CampaignSpec& b);
inline bool operator!=(const CampaignSpec& a, const CampaignSpec& b) { return !(a == b); }

// What the parser checks the spec against, from the daemon's configuration.
struct SpecOptions {
  std::vector<std::string> known_gpus;        // valid values of "gpu"
  std::vector<std::string> reserved_domains;  // e.g. the orchestrator's and the MUX's TD
};

// Parses and validates a spec. Errors are InvalidArgument, with messages
// `where` + field path + ": " + what is wrong, `where` being e.g.
// "campaign.json: " or "CreateCampaign.spec_json: ". Never throws.
absl::StatusOr<CampaignSpec> ParseCampaignSpec(const nlohmann::json& j,
                                               const std::string& where,
                                               const SpecOptions& opts);
// The same from text. JSON syntax errors give the byte position; a key that
// appears twice in one object (which a JSON object would silently collapse to
// the last value) is an error naming its path.
absl::StatusOr<CampaignSpec> ParseCampaignSpecText(const std::string& text,
                                                   const std::string& where,
                                                   const SpecOptions& opts);

// The canonical form with every default filled in;
// ParseCampaignSpec(CampaignSpecToJson(s)) == s for every valid s.
nlohmann::json CampaignSpecToJson(const CampaignSpec& spec);
// dump() of the canonical form (keys sorted): two submissions describe the
// same campaign iff their canonical strings are equal (idempotent creates).
std::string CanonicalSpecJson(const CampaignSpec& spec);

const char* SchedulePolicyName(SchedulePolicy p);            // "round-robin" | "proportional"
const char* HolderFailurePolicyName(HolderFailurePolicy p);  // "skip" | "pause"

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_CAMPAIGN_SPEC_H_
