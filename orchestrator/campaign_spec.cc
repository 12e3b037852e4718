#include "orchestrator/campaign_spec.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "auth/identity.h"
#include "trainer/next_token_model.h"
#include "util/json_fields.h"
#include "util/json_text.h"

namespace gputravel {
namespace {

using nlohmann::json;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;
constexpr size_t kMaxHolders = 256;
constexpr size_t kMaxUnixPath = 107;  // sun_path is 108 bytes, NUL included
constexpr size_t kMaxDatasetName = 256;

const std::set<std::string> kTopFields = {
    "name",   "gpu",   "buffer_bytes", "chunk_bytes", "copy_engines", "rounds", "schedule", "holder_timeout_seconds",
    "on_holder_failure", "holders", "trainer"};
const std::set<std::string> kHolderFields = {"name", "endpoint", "domain", "dataset"};
const std::set<std::string> kDatasetFields = {"name", "format"};
const std::set<std::string> kTrainerFields = {
    "kind", "vocab", "dim", "learning_rate", "batch_tokens", "seed",
    "identity", "timeout_seconds", "release_timeout_seconds", "on_failure"};
// Fields that shape the built-in model, and those of an external trainer.
const std::vector<std::string> kBuiltinOnlyFields = {"dim", "learning_rate", "seed"};
const std::vector<std::string> kExternalOnlyFields = {"identity", "timeout_seconds",
                                                      "release_timeout_seconds", "on_failure"};
const std::vector<std::string> kTrainerFailurePolicies = {"pause", "fail"};
const std::vector<std::string> kFormats = {"auto", "llmc-tokens", "raw"};
const std::vector<std::string> kSchedules = {"round-robin", "proportional"};
const std::vector<std::string> kFailurePolicies = {"skip", "pause"};
const std::vector<std::string> kTrainerKinds = {"next-token", "none", "external"};

// Path of a member inside the object at `path` ("" is the top level).
std::string Sub(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string Index(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// `where` already ends with its own separator ("campaign.json: ").
absl::Status Err(const std::string& where, const std::string& path, const std::string& msg) {
  return absl::InvalidArgumentError(where + (path.empty() ? "" : path + ": ") + msg);
}

// `where` + `path` as util/json_fields and util/json_text name a location
// (no trailing separator).
std::string Location(const std::string& where, const std::string& path) {
  if (!path.empty()) return where + path;
  std::string w = where;
  if (w.size() >= 2 && w.compare(w.size() - 2, 2, ": ") == 0) w.resize(w.size() - 2);
  return w;
}

std::string Quote(const std::string& s) { return json(s).dump(); }

// A short description of a JSON value for "(got ...)": the value itself for
// scalars (strings quoted, so "8" is visibly not 8), the kind for containers.
std::string Describe(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_binary()) return "binary";
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 64) s = s.substr(0, 61) + "...";
  return s;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

// Unknown fields are errors: a misspelt optional field would otherwise be
// silently replaced by its default. util/json_fields words the error (with
// a hint for a near miss) as for every other configuration file.
absl::Status CheckFields(const json& obj, const std::string& where, const std::string& path,
                         const std::set<std::string>& allowed) {
  return RefuseUnknownFields(obj, allowed, Location(where, path));
}

// Typed accessors. Each returns true in *present when the field exists, and
// only fails on a present field of the wrong type/range, or on a missing
// required one.
absl::Status GetString(const json& obj, const std::string& where, const std::string& path,
                       const std::string& key, bool required, std::string* out,
                       bool* present = nullptr) {
  auto it = obj.find(key);
  if (present) *present = it != obj.end();
  if (it == obj.end()) {
    return required ? Err(where, Sub(path, key), "missing (required)") : absl::OkStatus();
  }
  if (!it->is_string()) {
    return Err(where, Sub(path, key), "must be a string (got " + Describe(*it) + ")");
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status GetUint(const json& obj, const std::string& where, const std::string& path,
                     const std::string& key, bool required, uint64_t min, uint64_t max,
                     uint64_t* out) {
  auto it = obj.find(key);
  const std::string p = Sub(path, key);
  if (it == obj.end()) {
    return required ? Err(where, p, "missing (required)") : absl::OkStatus();
  }
  uint64_t v = 0;
  if (it->is_number_unsigned()) {
    v = it->get<uint64_t>();
  } else if (it->is_number_integer()) {
    // Parsed text puts only negatives here, but a json built in code may hold
    // a non-negative value as a signed integer.
    int64_t s = it->get<int64_t>();
    if (s < 0) {
      return Err(where, p, "must be a non-negative integer (got " + Describe(*it) + ")");
    }
    v = static_cast<uint64_t>(s);
  } else {
    return Err(where, p, "must be an integer (got " + Describe(*it) + ")");
  }
  if (v < min || v > max) {
    return Err(where, p,
               "must be in " + std::to_string(min) + ".." + std::to_string(max) + " (got " +
                   std::to_string(v) + ")");
  }
  *out = v;
  return absl::OkStatus();
}

// A number (integer or not) in (0, max].
absl::Status GetPositiveNumber(const json& obj, const std::string& where,
                               const std::string& path, const std::string& key, double max,
                               const char* max_text, double* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return absl::OkStatus();  // all such fields are optional
  const std::string p = Sub(path, key);
  if (!it->is_number()) {
    return Err(where, p, "must be a number (got " + Describe(*it) + ")");
  }
  double v = it->get<double>();
  if (!(v > 0 && v <= max)) {
    return Err(where, p, "must be > 0 and <= " + std::string(max_text) + " (got " + Describe(*it) +
                             ")");
  }
  *out = v;
  return absl::OkStatus();
}

// A string from a fixed set.
absl::Status GetEnum(const json& obj, const std::string& where, const std::string& path,
                     const std::string& key, const std::vector<std::string>& allowed,
                     std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return absl::OkStatus();  // all enums are optional
  const std::string p = Sub(path, key);
  if (!it->is_string() ||
      std::find(allowed.begin(), allowed.end(), it->get<std::string>()) == allowed.end()) {
    return Err(where, p, "must be one of " + Join(allowed) + " (got " + Describe(*it) + ")");
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status CheckName(const std::string& v, const std::string& where, const std::string& p) {
  if (ValidName(v)) return absl::OkStatus();
  return Err(where, p, "must match [a-z0-9][a-z0-9._-]{0,62} (got " + Quote(v) + ")");
}

bool HasSpaceOrControl(const std::string& s) {
  for (unsigned char c : s) {
    if (std::isspace(c) || std::iscntrl(c)) return true;
  }
  return false;
}


absl::Status ParseDataset(const json& d, const std::string& where, const std::string& path,
                          DatasetSpec* out) {
  if (!d.is_object()) return Err(where, path, "must be an object (got " + Describe(d) + ")");
  absl::Status s = CheckFields(d, where, path, kDatasetFields);
  if (!s.ok()) return s;
  s = GetString(d, where, path, "name", true, &out->name);
  if (!s.ok()) return s;
  if (out->name.empty() || out->name.size() > kMaxDatasetName || HasSpaceOrControl(out->name)) {
    return Err(where, Sub(path, "name"),
               "must be 1.." + std::to_string(kMaxDatasetName) +
                   " bytes without whitespace (got " + Quote(out->name) + ")");
  }
  out->format = "auto";
  return GetEnum(d, where, path, "format", kFormats, &out->format);
}

absl::Status ParseHolder(const json& h, const std::string& where, const std::string& path,
                         const SpecOptions& opts, HolderSpec* out) {
  if (!h.is_object()) return Err(where, path, "must be an object (got " + Describe(h) + ")");
  absl::Status s = CheckFields(h, where, path, kHolderFields);
  if (!s.ok()) return s;

  s = GetString(h, where, path, "name", true, &out->name);
  if (!s.ok()) return s;
  s = CheckName(out->name, where, Sub(path, "name"));
  if (!s.ok()) return s;

  s = GetString(h, where, path, "endpoint", true, &out->endpoint);
  if (!s.ok()) return s;
  std::string problem = EndpointProblem(out->endpoint);
  if (!problem.empty()) {
    return Err(where, Sub(path, "endpoint"), problem + " (got " + Quote(out->endpoint) + ")");
  }

  s = GetString(h, where, path, "domain", true, &out->domain);
  if (!s.ok()) return s;
  if (out->domain.empty() || HasSpaceOrControl(out->domain)) {
    return Err(where, Sub(path, "domain"),
               "must be a non-empty TD name without whitespace (got " + Quote(out->domain) + ")");
  }
  // The GPU must never be routed to the orchestrator's or the MUX's own TD
  // under the guise of a holder.
  for (const auto& r : opts.reserved_domains) {
    if (out->domain == r) {
      return Err(where, Sub(path, "domain"),
                 Quote(r) + " is reserved (the orchestrator's own domain)");
    }
  }

  auto it = h.find("dataset");
  if (it == h.end()) return Err(where, Sub(path, "dataset"), "missing (required)");
  return ParseDataset(*it, where, Sub(path, "dataset"), &out->dataset);
}

absl::Status ParseTrainer(const json& t, const std::string& where, const std::string& path,
                          TrainerSpec* out) {
  if (!t.is_object()) return Err(where, path, "must be an object (got " + Describe(t) + ")");
  absl::Status s = CheckFields(t, where, path, kTrainerFields);
  if (!s.ok()) return s;
  s = GetEnum(t, where, path, "kind", kTrainerKinds, &out->kind);
  if (!s.ok()) return s;
  const bool external = out->kind == "external";
  for (const std::string& f : external ? kBuiltinOnlyFields : kExternalOnlyFields) {
    if (!t.contains(f)) continue;
    return Err(where, Sub(path, f),
               external ? "shapes the built-in model only; an external trainer's model is "
                          "its own (leave it out with kind \"external\")"
                        : "applies to kind \"external\" only (kind is \"" + out->kind + "\")");
  }
  if (external) {
    s = GetString(t, where, path, "identity", true, &out->identity);
    if (!s.ok()) return s;
    absl::Status name = ValidateName(out->identity);
    if (!name.ok()) return Err(where, Sub(path, "identity"), std::string(name.message()));
    s = GetPositiveNumber(t, where, path, "timeout_seconds", 86400, "86400",
                          &out->timeout_seconds);
    if (!s.ok()) return s;
    s = GetPositiveNumber(t, where, path, "release_timeout_seconds", 3600, "3600",
                          &out->release_timeout_seconds);
    if (!s.ok()) return s;
    s = GetEnum(t, where, path, "on_failure", kTrainerFailurePolicies, &out->on_failure);
    if (!s.ok()) return s;
  }
  uint64_t v = out->vocab;
  s = GetUint(t, where, path, "vocab", false, 2, 65536, &v);
  if (!s.ok()) return s;
  out->vocab = static_cast<uint32_t>(v);
  v = out->dim;
  s = GetUint(t, where, path, "dim", false, 1, 1024, &v);
  if (!s.ok()) return s;
  out->dim = static_cast<uint32_t>(v);
  if (out->kind == "next-token") {
    // Every trained window stores the model's checkpoint: one that cannot
    // be stored would fail every trip, and resuming would repeat it.
    const uint64_t bytes = NextTokenModel::CheckpointBytes(out->vocab, out->dim);
    if (bytes > kMaxCheckpointBytes) {
      return Err(where, path,
                 "a model of vocab " + std::to_string(out->vocab) + " and dim " +
                     std::to_string(out->dim) + " has a checkpoint of " +
                     std::to_string(bytes) + " bytes, more than the " +
                     std::to_string(kMaxCheckpointBytes) +
                     " the orchestrator's database stores in one value (24 x vocab x dim "
                     "+ 12 x vocab bytes): use a smaller vocab or dim");
    }
  }
  s = GetPositiveNumber(t, where, path, "learning_rate", 100, "100", &out->learning_rate);
  if (!s.ok()) return s;
  s = GetUint(t, where, path, "batch_tokens", false, 2, 16u << 20, &out->batch_tokens);
  if (!s.ok()) return s;
  return GetUint(t, where, path, "seed", false, 0, UINT64_MAX, &out->seed);
}

}  // namespace

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(s[0])) return false;
  for (char c : s) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

std::string EndpointProblem(const std::string& e) {
  const std::string kForms = "must be \"unix:/abs/path\" or \"host:port\"";
  if (e.empty()) return kForms;
  if (HasSpaceOrControl(e)) return "must not contain whitespace or control characters";
  if (e.rfind("unix:", 0) == 0) {
    std::string path = e.substr(5);
    if (path.empty() || path[0] != '/') return "unix endpoint needs an absolute path (unix:/abs/path)";
    if (path.size() < 2 || path.back() == '/') return "unix endpoint must name a socket file";
    if (path.size() > kMaxUnixPath) {
      return "unix socket path is longer than " + std::to_string(kMaxUnixPath) + " bytes";
    }
    return "";
  }
  if (e.find('/') != std::string::npos) return kForms;  // some other URI scheme
  std::string host, port;
  if (e[0] == '[') {
    size_t close = e.find(']');
    if (close == std::string::npos) return "IPv6 address has no closing ']'";
    host = e.substr(1, close - 1);
    if (host.empty() || host.find(':') == std::string::npos ||
        host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
      return "invalid IPv6 address in brackets";
    }
    if (close + 1 >= e.size() || e[close + 1] != ':') return "missing :port after ]";
    port = e.substr(close + 2);
  } else {
    size_t colon = e.rfind(':');
    if (colon == std::string::npos) return kForms;
    host = e.substr(0, colon);
    port = e.substr(colon + 1);
    if (host.find(':') != std::string::npos) {
      return "IPv6 addresses must be in brackets ([::1]:port)";
    }
    if (host.empty()) return "missing host before :port";
    for (unsigned char c : host) {
      if (!std::isalnum(c) && c != '.' && c != '-' && c != '_') {
        return "host has invalid characters";
      }
    }
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) < 1 || std::stoul(port) > 65535) {
    return "port must be 1..65535";
  }
  return "";
}

bool operator==(const DatasetSpec& a, const DatasetSpec& b) {
  return a.name == b.name && a.format == b.format;
}
bool operator==(const HolderSpec& a, const HolderSpec& b) {
  return a.name == b.name && a.endpoint == b.endpoint && a.domain == b.domain &&
         a.dataset == b.dataset;
}
bool operator==(const TrainerSpec& a, const TrainerSpec& b) {
  return a.kind == b.kind && a.vocab == b.vocab && a.dim == b.dim &&
         a.learning_rate == b.learning_rate && a.batch_tokens == b.batch_tokens &&
         a.seed == b.seed && a.identity == b.identity &&
         a.timeout_seconds == b.timeout_seconds &&
         a.release_timeout_seconds == b.release_timeout_seconds &&
         a.on_failure == b.on_failure;
}
uint32_t DefaultCopyEngines() {
  const unsigned cores = std::thread::hardware_concurrency();
  return std::clamp<uint32_t>(cores == 0 ? 1 : cores, 1, 8);
}

uint32_t CopyEnginesFor(const CampaignSpec& spec) {
  return spec.copy_engines != 0 ? spec.copy_engines : DefaultCopyEngines();
}

bool operator==(const CampaignSpec& a, const CampaignSpec& b) {
  return a.name == b.name && a.gpu == b.gpu && a.buffer_bytes == b.buffer_bytes &&
         a.chunk_bytes == b.chunk_bytes && a.copy_engines == b.copy_engines &&
         a.rounds == b.rounds && a.schedule == b.schedule &&
         a.holder_timeout_seconds == b.holder_timeout_seconds &&
         a.on_holder_failure == b.on_holder_failure && a.holders == b.holders &&
         a.trainer == b.trainer;
}

const char* SchedulePolicyName(SchedulePolicy p) {
  switch (p) {
    case SchedulePolicy::kRoundRobin:
      return "round-robin";
    case SchedulePolicy::kProportional:
      return "proportional";
  }
  return "unknown";
}

const char* HolderFailurePolicyName(HolderFailurePolicy p) {
  switch (p) {
    case HolderFailurePolicy::kSkip:
      return "skip";
    case HolderFailurePolicy::kPause:
      return "pause";
  }
  return "unknown";
}

absl::StatusOr<CampaignSpec> ParseCampaignSpec(const json& j, const std::string& where,
                                               const SpecOptions& opts) {
  if (!j.is_object()) {
    return Err(where, "", "the spec must be a JSON object (got " + Describe(j) + ")");
  }
  absl::Status s = CheckFields(j, where, "", kTopFields);
  if (!s.ok()) return s;
  CampaignSpec spec;

  s = GetString(j, where, "", "name", true, &spec.name);
  if (!s.ok()) return s;
  s = CheckName(spec.name, where, "name");
  if (!s.ok()) return s;

  s = GetString(j, where, "", "gpu", true, &spec.gpu);
  if (!s.ok()) return s;
  if (std::find(opts.known_gpus.begin(), opts.known_gpus.end(), spec.gpu) ==
      opts.known_gpus.end()) {
    return Err(where, "gpu",
               "unknown GPU " + Quote(spec.gpu) +
                   (opts.known_gpus.empty() ? " (no GPUs are configured)"
                                            : " (known: " + Join(opts.known_gpus) + ")"));
  }

  // Sizes: the device buffer and H2D chunks are written in 32-byte units.
  s = GetUint(j, where, "", "buffer_bytes", true, 32, 64 * kGiB, &spec.buffer_bytes);
  if (!s.ok()) return s;
  if (spec.buffer_bytes % 32 != 0) {
    return Err(where, "buffer_bytes",
               "must be a multiple of 32 (got " + std::to_string(spec.buffer_bytes) + ")");
  }
  uint64_t v = spec.chunk_bytes;
  s = GetUint(j, where, "", "chunk_bytes", false, 32, 64 * kMiB, &v);
  if (!s.ok()) return s;
  if (v % 32 != 0) {
    return Err(where, "chunk_bytes", "must be a multiple of 32 (got " + std::to_string(v) + ")");
  }
  spec.chunk_bytes = static_cast<uint32_t>(v);
  if (j.contains("copy_engines")) {
    v = 0;
    s = GetUint(j, where, "", "copy_engines", false, 1, 8, &v);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          std::string(s.message()) +
          " (the GPU has eight copy engines, LCE0..LCE7; leave the field out to use one per "
          "core of the orchestrator's machine, at most 8)");
    }
    spec.copy_engines = static_cast<uint32_t>(v);
  }
  v = spec.rounds;
  s = GetUint(j, where, "", "rounds", false, 1, 1000000, &v);
  if (!s.ok()) return s;
  spec.rounds = static_cast<uint32_t>(v);

  std::string e = SchedulePolicyName(spec.schedule);
  s = GetEnum(j, where, "", "schedule", kSchedules, &e);
  if (!s.ok()) return s;
  spec.schedule = e == "proportional" ? SchedulePolicy::kProportional : SchedulePolicy::kRoundRobin;

  s = GetPositiveNumber(j, where, "", "holder_timeout_seconds", 86400, "86400",
                        &spec.holder_timeout_seconds);
  if (!s.ok()) return s;

  e = HolderFailurePolicyName(spec.on_holder_failure);
  s = GetEnum(j, where, "", "on_holder_failure", kFailurePolicies, &e);
  if (!s.ok()) return s;
  spec.on_holder_failure = e == "pause" ? HolderFailurePolicy::kPause : HolderFailurePolicy::kSkip;

  auto hs = j.find("holders");
  if (hs == j.end()) return Err(where, "holders", "missing (required)");
  if (!hs->is_array()) {
    return Err(where, "holders", "must be an array (got " + Describe(*hs) + ")");
  }
  if (hs->empty() || hs->size() > kMaxHolders) {
    return Err(where, "holders",
               "must have 1.." + std::to_string(kMaxHolders) + " entries (got " +
                   std::to_string(hs->size()) + ")");
  }
  // Each of these identifies a holder somewhere (hand-offs, MUX routing, the
  // connection), so two holders may not share one.
  std::map<std::string, size_t> names, endpoints, domains;
  auto unique = [&](std::map<std::string, size_t>& seen, const std::string& value, size_t i,
                    const std::string& field) -> absl::Status {
    auto [it, fresh] = seen.emplace(value, i);
    if (fresh) return absl::OkStatus();
    return Err(where, Index("holders", i) + "." + field,
               Quote(value) + " is already used by " + Index("holders", it->second));
  };
  for (size_t i = 0; i < hs->size(); ++i) {
    HolderSpec h;
    s = ParseHolder((*hs)[i], where, Index("holders", i), opts, &h);
    if (!s.ok()) return s;
    if (!(s = unique(names, h.name, i, "name")).ok()) return s;
    if (!(s = unique(endpoints, h.endpoint, i, "endpoint")).ok()) return s;
    if (!(s = unique(domains, h.domain, i, "domain")).ok()) return s;
    spec.holders.push_back(std::move(h));
  }

  auto t = j.find("trainer");
  if (t != j.end()) {
    s = ParseTrainer(*t, where, "trainer", &spec.trainer);
    if (!s.ok()) return s;
  }
  return spec;
}

absl::StatusOr<CampaignSpec> ParseCampaignSpecText(const std::string& text,
                                                   const std::string& where,
                                                   const SpecOptions& opts) {
  absl::StatusOr<json> j = ParseJsonText(text, Location(where, ""));
  if (!j.ok()) return j.status();
  return ParseCampaignSpec(*j, where, opts);
}

namespace {

// Only the fields of the trainer's kind: the parser refuses the others.
json TrainerToJson(const TrainerSpec& t) {
  if (t.kind == "external") {
    return {{"kind", t.kind},
            {"vocab", t.vocab},
            {"batch_tokens", t.batch_tokens},
            {"identity", t.identity},
            {"timeout_seconds", t.timeout_seconds},
            {"release_timeout_seconds", t.release_timeout_seconds},
            {"on_failure", t.on_failure}};
  }
  return {{"kind", t.kind},
          {"vocab", t.vocab},
          {"dim", t.dim},
          {"learning_rate", t.learning_rate},
          {"batch_tokens", t.batch_tokens},
          {"seed", t.seed}};
}

}  // namespace

json CampaignSpecToJson(const CampaignSpec& spec) {
  json holders = json::array();
  for (const auto& h : spec.holders) {
    holders.push_back({{"name", h.name},
                       {"endpoint", h.endpoint},
                       {"domain", h.domain},
                       {"dataset", {{"name", h.dataset.name}, {"format", h.dataset.format}}}});
  }
  json out = {{"name", spec.name},
              {"gpu", spec.gpu},
              {"buffer_bytes", spec.buffer_bytes},
              {"chunk_bytes", spec.chunk_bytes},
              {"rounds", spec.rounds},
              {"schedule", SchedulePolicyName(spec.schedule)},
              {"holder_timeout_seconds", spec.holder_timeout_seconds},
              {"on_holder_failure", HolderFailurePolicyName(spec.on_holder_failure)},
              {"holders", std::move(holders)},
              {"trainer", TrainerToJson(spec.trainer)}};
  if (spec.copy_engines != 0) out["copy_engines"] = spec.copy_engines;
  return out;
}

std::string CanonicalSpecJson(const CampaignSpec& spec) {
  // nlohmann::json objects are std::maps: keys come out sorted, so equal
  // specs give byte-equal strings.
  return CampaignSpecToJson(spec).dump();
}

}  // namespace gputravel
