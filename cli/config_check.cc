#include "cli/config_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>

#include "absl/strings/str_join.h"
#include "auth/identity.h"
#include "cli/deployment.h"
#include "cli/terminal_text.h"
#include "cli/user_path.h"
#include "device/emulated_gpu_config.h"
#include "holder_agent/dataset.h"
#include "holder_agent/holder_config.h"
#include "keyxfer/attestation_config.h"
#include "keyxfer/runtime_measurement.h"
#include "keyxfer/x509.h"
#include "nlohmann/json.hpp"
#include "orchestrator/campaign_spec.h"
#include "orchestrator/daemon_config.h"
#include "util/files.h"
#include "util/flags.h"
#include "util/private_files.h"
#include "vfio_mux/mux_config.h"

namespace gputravel {
namespace {

using json = nlohmann::json;

const char* const kKinds[] = {"orchestrator", "holder_agent", "vfio_mux",
                              "emulated_gpu", "campaign",     "deployment"};

bool HasPlaceholder(const std::string& s) {
  return s.find(kPlaceholderPrefix) != std::string::npos;
}

// Every string value of `j` that is still a placeholder, by JSON pointer.
void FindPlaceholders(const json& j, const std::string& pointer,
                      std::vector<std::pair<std::string, std::string>>* out) {
  if (j.is_string()) {
    if (HasPlaceholder(j.get<std::string>())) out->emplace_back(pointer, j.get<std::string>());
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      FindPlaceholders(it.value(), pointer + "/" + it.key(), out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      FindPlaceholders(j[i], pointer + "/" + std::to_string(i), out);
    }
  }
}

// Which file this is, from the fields only it has.
std::string DetectKind(const json& j) {
  if (!j.is_object()) return "";
  if (j.contains("daemons") && j.contains("kind")) return "deployment";
  if (j.contains("serial") && j.contains("socket_dir")) return "emulated_gpu";
  if (j.contains("state_file") || j.contains("audit_log") || j.contains("callers")) {
    return "vfio_mux";
  }
  if (j.contains("mux_endpoint")) return "orchestrator";
  if (j.contains("orchestrator_names") || (j.contains("dataset") && j.contains("domain"))) {
    return "holder_agent";
  }
  if (j.contains("holders") && j.contains("gpu")) return "campaign";
  return "";
}

std::string Mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// A file the daemon trusts for its control: only its owner may write it.
absl::Status CheckNotWritableByOthers(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(what + ": cannot stat " + path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & 022) != 0) {
    return absl::PermissionDeniedError(what + ": " + path + " may be written by group or others (mode " +
                                       Mode(st.st_mode) + "); chmod go-w " + path);
  }
  return absl::OkStatus();
}

// A private key: its owner alone may read it.
absl::Status CheckKeyMode(const std::string& path, const std::string& field) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(field + ": cannot stat " + path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(field + ": the key " + path +
                                       " may be read by group or others (mode " +
                                       Mode(st.st_mode) + "); chmod 600 " + path);
  }
  return absl::OkStatus();
}

// A directory the daemon makes if missing (state, sockets): when it exists,
// nobody but its owner may write it.
absl::Status CheckPrivateDirIfPresent(const std::string& path, const std::string& field) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return absl::OkStatus();
  return RequirePrivateDirectory(path, field);
}

absl::Status CheckDirectoryExists(const std::string& path, const std::string& field) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(field + ": " + path + " is not an existing directory");
  }
  return absl::OkStatus();
}

absl::Status CheckReadable(const std::string& path, const std::string& field) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return absl::NotFoundError(field + ": " + std::string(bytes.status().message()));
  return absl::OkStatus();
}

// What was parsed, for the checks across files.
struct Parsed {
  std::string path;
  json raw;
  std::optional<OrchestratorConfig> orchestrator;
  std::optional<HolderConfig> holder;
  std::optional<MuxConfig> mux;
  std::optional<EmulatedGpuConfig> gpu;
  std::optional<CampaignSpec> campaign;
};

class Checker {
 public:
  void Add(absl::Status s, ConfigCheckResult* r) {
    if (!s.ok()) r->errors.push_back(std::string(s.message()));
  }
  // `field` names the place; messages read "FILE: field: ...".
  void Add(absl::Status s, ConfigCheckResult* r, const std::string& prefix) {
    if (!s.ok()) r->errors.push_back(prefix + std::string(s.message()));
  }

  void CheckAttestation(const json& config, const json& section, const std::string& daemon,
                        const std::string& domain, ConfigCheckResult* r) {
    const std::string at = r->file + ": attestation";
    if (section.is_object() && section.contains("dev_key") && section["dev_key"].is_string()) {
      Add(CheckKeyMode(section["dev_key"].get<std::string>(), at + ".dev_key"), r);
    }
    auto m = MeasureDaemon(daemon, "/proc/self/exe", config, r->file);
    if (!m.ok()) {
      Add(m.status(), r);
      return;
    }
    auto backend = CheckAttestationConfig(section, at, domain, *m);
    if (!backend.ok()) {
      Add(backend.status(), r);
    } else {
      r->summary += ", attestation " + *backend;
    }
  }

  void Orchestrator(Parsed& p, ConfigCheckResult* r) {
    auto cfg = ParseOrchestratorConfig(p.raw, r->file);
    if (!cfg.ok()) return Add(cfg.status(), r);
    auto me = LocalIdentity(cfg->tls);
    if (me.ok()) r->summary = "orchestrator '" + me->name + "'";
    for (size_t i = 0; i < cfg->gpus.size(); ++i) {
      const GpuConfig& g = cfg->gpus[i];
      const std::string field = r->file + ": gpus[" + std::to_string(i) + "].device_ca";
      if (HasPlaceholder(g.device_ca)) continue;
      auto pem = ReadFile(g.device_ca);
      if (!pem.ok()) {
        Add(pem.status(), r, field + ": ");
      } else if (ParseCertificate(*pem) == nullptr) {
        r->errors.push_back(field + ": " + g.device_ca + " holds no certificate");
      }
    }
    Add(CheckPrivateDirIfPresent(cfg->state_dir, r->file + ": state_dir"), r);
    struct stat st;
    if (::stat(cfg->checkpoint_key_file.c_str(), &st) == 0) {
      Add(CheckKeyMode(cfg->checkpoint_key_file, r->file + ": checkpoint_key_file"), r);
    }
    // The orchestrator checks the key's directory as state_dir's
    // (CheckpointSeal::LoadOrCreate).
    Add(CheckPrivateDirIfPresent(DirectoryOf(cfg->checkpoint_key_file),
                                 r->file + ": the directory of checkpoint_key_file"),
        r);
    if (!cfg->eval_tokens.empty()) {
      auto eval = Dataset::Open(cfg->eval_tokens, "auto");
      if (!eval.ok()) Add(eval.status(), r, r->file + ": eval_tokens: ");
    }
    CheckAttestation(p.raw, cfg->attestation, "orchestrator", cfg->domain, r);
    p.orchestrator = *std::move(cfg);
  }

  void Holder(Parsed& p, ConfigCheckResult* r) {
    auto cfg = ParseHolderConfig(p.raw, r->file);
    if (!cfg.ok()) return Add(cfg.status(), r);
    r->summary = "holder '" + cfg->name + "'";
    if (!HasPlaceholder(cfg->dataset_path)) {
      auto ds = Dataset::Open(cfg->dataset_path, cfg->dataset_format);
      if (!ds.ok()) {
        Add(ds.status(), r, r->file + ": dataset: ");
      } else {
        r->summary += ", dataset " + std::to_string((*ds)->payload_bytes()) + " bytes";
      }
    }
    Add(CheckPrivateDirIfPresent(cfg->state_dir, r->file + ": state_dir"), r);
    Add(CheckDirectoryExists(cfg->writer.bounce_dir, r->file + ": bounce_dir"), r);
    CheckAttestation(p.raw, cfg->attestation, "holder_agent", cfg->domain, r);
    p.holder = *std::move(cfg);
  }

  void Mux(Parsed& p, ConfigCheckResult* r) {
    auto cfg = ParseMuxConfig(p.raw, r->file);
    if (!cfg.ok()) return Add(cfg.status(), r);
    r->summary = "MUX, backend " + cfg->backend.backend + ", " +
                 std::to_string(cfg->callers.size()) + " pinned caller(s)";
    // The MUX refuses to start unless the directories of its route table and
    // journal are private.
    for (const std::string& path : {cfg->state_file, cfg->audit_log}) {
      Add(CheckPrivateDirIfPresent(DirectoryOf(path), r->file + ": the directory of " + path),
          r);
    }
    p.mux = *std::move(cfg);
  }

  void Gpu(Parsed& p, ConfigCheckResult* r) {
    auto cfg = ParseEmulatedGpuConfig(p.raw, r->file);
    if (!cfg.ok()) return Add(cfg.status(), r);
    r->summary = "emulated GPU '" + cfg->options.serial + "'";
    Add(CheckKeyMode(cfg->identity_key, r->file + ": identity_key"), r);
    auto identity = LoadEmulatedGpuIdentity(*cfg, r->file);
    if (!identity.ok()) Add(identity.status(), r);
    Add(CheckPrivateDirIfPresent(cfg->socket_dir, r->file + ": socket_dir"), r);
    p.gpu = *std::move(cfg);
  }

  void Campaign(Parsed& p, ConfigCheckResult* r, const std::vector<Parsed>& all) {
    SpecOptions opts;
    for (const Parsed& o : all) {
      if (!o.orchestrator) continue;
      for (const auto& g : o.orchestrator->gpus) opts.known_gpus.push_back(g.name);
      opts.reserved_domains.push_back(o.orchestrator->domain);
    }
    const bool gpu_checked = !opts.known_gpus.empty();
    if (!gpu_checked && p.raw.contains("gpu") && p.raw["gpu"].is_string()) {
      opts.known_gpus.push_back(p.raw["gpu"].get<std::string>());
    }
    auto spec = ParseCampaignSpec(p.raw, r->file + ": ", opts);
    if (!spec.ok()) return Add(spec.status(), r);
    r->summary = "campaign '" + spec->name + "', " + std::to_string(spec->holders.size()) +
                 " holder(s)" +
                 (gpu_checked ? "" : " (its gpu not checked: no orchestrator configuration given)");
    p.campaign = *std::move(spec);
  }

  void Manifest(Parsed& p, ConfigCheckResult* r) {
    Deployment d;
    absl::Status s = ParseDeploymentManifest(p.raw, r->file, &d);
    if (!s.ok()) return Add(s, r);
    r->summary = std::string(d.tdx ? "TDX template" : "emulated deployment") + ", " +
                 std::to_string(d.daemons.size()) + " daemons";
    if (d.tdx) return;
    for (const auto& dm : d.daemons) {
      if (::access(dm.program.c_str(), X_OK) != 0) {
        r->errors.push_back(r->file + ": daemons[" + dm.name + "].program: " + dm.program +
                            " is not an executable file");
      }
    }
  }

  // Identities and names that must agree between files checked together.
  void Across(std::vector<Parsed>& all, std::vector<ConfigCheckResult>& results) {
    for (size_t i = 0; i < all.size(); ++i) {
      for (size_t j = 0; j < all.size(); ++j) {
        if (i != j) Pair(all[i], all[j], &results[i]);
      }
    }
  }

  void Pair(const Parsed& a, const Parsed& b, ConfigCheckResult* r) {
    // The device's certificate chains to the orchestrator's device CA of the
    // GPU with its serial.
    if (a.gpu && b.orchestrator) {
      bool pinned = false;
      for (const auto& g : b.orchestrator->gpus) pinned = pinned || g.serial == a.gpu->options.serial;
      if (!pinned) {
        r->errors.push_back(r->file + ": serial: '" + a.gpu->options.serial +
                            "' is not pinned by any gpus[].serial of " + b.path +
                            ": the orchestrator would refuse this GPU");
      }
      for (const auto& g : b.orchestrator->gpus) {
        if (!g.serial.empty() && g.serial != a.gpu->options.serial) continue;
        auto ca = ReadFile(g.device_ca);
        auto cert = ReadFile(a.gpu->identity_cert);
        if (!ca.ok() || !cert.ok()) continue;  // reported with each file
        X509Ptr ca_x = ParseCertificate(*ca);
        X509Ptr cert_x = ParseCertificate(*cert);
        absl::Status chained = ca_x && cert_x ? VerifyChainsTo(cert_x.get(), ca_x.get())
                                              : absl::InvalidArgumentError("unparsable");
        if (!chained.ok()) {
          r->errors.push_back(r->file + ": identity_cert " + a.gpu->identity_cert +
                              " does not chain to the device CA " + g.device_ca + " of " +
                              b.path + " (gpus '" + g.name + "'): " +
                              std::string(chained.message()));
        }
      }
      const std::string& d = b.orchestrator->domain;
      if (std::find(a.gpu->domains.begin(), a.gpu->domains.end(), d) == a.gpu->domains.end()) {
        r->errors.push_back(r->file + ": domains: lacks '" + d + "', the domain of " + b.path);
      }
    }
    if (a.gpu && b.holder) {
      const auto& domains = a.gpu->domains;
      if (std::find(domains.begin(), domains.end(), b.holder->domain) == domains.end()) {
        r->errors.push_back(r->file + ": domains: lacks '" + b.holder->domain +
                            "', the domain of " + b.path);
      } else {
        auto it = a.gpu->options.shared_dirs.find(b.holder->domain);
        if (it == a.gpu->options.shared_dirs.end() || it->second != b.holder->writer.bounce_dir) {
          r->errors.push_back(r->file + ": shared_dirs['" + b.holder->domain + "'] is not " +
                              b.holder->writer.bounce_dir + ", the bounce_dir of " + b.path +
                              ": the device would map no ring of that holder");
        }
      }
    }
    // The MUX routes to the orchestrator's and each holder's domain, and
    // obeys the orchestrator's certificate.
    if (a.mux && b.orchestrator) {
      if (a.mux->domains.count(b.orchestrator->domain) == 0) {
        r->errors.push_back(r->file + ": domains: lacks '" + b.orchestrator->domain +
                            "', the domain of " + b.path);
      }
      auto cert = ReadFile(b.orchestrator->tls.cert);
      bool pinned = false;
      if (cert.ok() && a.raw.contains("callers") && a.raw["callers"].is_array()) {
        for (const auto& c : a.raw["callers"]) {
          pinned = pinned || (c.is_string() && ReadFile(c.get<std::string>()).value_or("") == *cert);
        }
      }
      if (cert.ok() && !pinned) {
        r->errors.push_back(r->file + ": callers: none is " + b.orchestrator->tls.cert +
                            ", the certificate of " + b.path +
                            ": the MUX would refuse that orchestrator");
      }
    }
    if (a.mux && b.holder && a.mux->domains.count(b.holder->domain) == 0) {
      r->errors.push_back(r->file + ": domains: lacks '" + b.holder->domain +
                          "', the domain of " + b.path);
    }
    // A holder answers the orchestrator's name and trusts its CA.
    if (a.holder && b.orchestrator) {
      auto me = LocalIdentity(b.orchestrator->tls);
      if (me.ok() && a.holder->orchestrator_names.count(me->name) == 0) {
        r->errors.push_back(r->file + ": orchestrator_names: lacks '" + me->name +
                            "', the orchestrator of " + b.path +
                            ": this holder would refuse it");
      }
      if (ReadFile(a.holder->tls.ca).value_or("a") != ReadFile(b.orchestrator->tls.ca).value_or("b")) {
        r->errors.push_back(r->file + ": tls.ca: " + a.holder->tls.ca + " is not the CA of " +
                            b.path + " (" + b.orchestrator->tls.ca + ")");
      }
    }
    // The campaign names each holder as its configuration does.
    if (a.campaign && b.holder) {
      for (size_t i = 0; i < a.campaign->holders.size(); ++i) {
        const HolderSpec& h = a.campaign->holders[i];
        if (h.name != b.holder->name) continue;
        const std::string at = r->file + ": holders[" + std::to_string(i) + "]";
        if (h.domain != b.holder->domain) {
          r->errors.push_back(at + ".domain: '" + h.domain + "', but " + b.path + " says '" +
                              b.holder->domain + "'");
        }
        if (h.dataset.name != b.holder->dataset_name) {
          r->errors.push_back(at + ".dataset.name: '" + h.dataset.name + "', but " + b.path +
                              " serves '" + b.holder->dataset_name + "'");
        }
      }
    }
  }
};

// The files a path stands for: a deployment directory's configurations, or
// the file itself.
std::vector<std::string> Expand(const std::string& path, std::vector<std::string>* errors) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {path};
  Deployment d;
  d.dir = path;
  auto m = ReadJsonFile(d.manifest_path());
  absl::Status s = m.ok() ? ParseDeploymentManifest(*m, d.manifest_path(), &d) : m.status();
  if (!s.ok()) {
    errors->push_back(path + ": a directory is checked as a deployment `gputravel init` "
                             "wrote: " + std::string(s.message()));
    return {};
  }
  std::vector<std::string> out = {d.manifest_path()};
  for (const auto& dm : d.daemons) out.push_back(d.config_path(dm.name));
  out.push_back(d.campaign_spec_path());
  return out;
}

}  // namespace

std::vector<ConfigCheckResult> CheckConfigs(const std::vector<std::string>& paths,
                                            const std::string& kind) {
  std::vector<ConfigCheckResult> results;
  std::vector<Parsed> parsed;
  Checker c;
  for (const std::string& arg : paths) {
    std::vector<std::string> errors;
    std::vector<std::string> files = Expand(arg, &errors);
    if (!errors.empty()) {
      results.push_back({arg, "", errors, ""});
      parsed.push_back({arg, json()});
    }
    for (const std::string& file : files) {
      ConfigCheckResult r;
      r.file = file;
      Parsed p;
      p.path = file;
      auto j = ReadJsonFile(file);
      if (!j.ok()) {
        r.errors.push_back(std::string(j.status().message()));
      } else {
        p.raw = *j;
        r.kind = kind.empty() ? DetectKind(p.raw) : kind;
        c.Add(CheckNotWritableByOthers(file, file), &r);
        // A template's manifest repeats the campaign's endpoints for the
        // record; only the configurations and the campaign are used.
        std::vector<std::pair<std::string, std::string>> placeholders;
        if (r.kind != "deployment") FindPlaceholders(p.raw, "", &placeholders);
        for (const auto& [pointer, value] : placeholders) {
          r.errors.push_back(file + ": " + pointer + ": still the placeholder '" + value +
                             "': put the real value there");
        }
        if (r.kind == "orchestrator") {
          c.Orchestrator(p, &r);
        } else if (r.kind == "holder_agent") {
          c.Holder(p, &r);
        } else if (r.kind == "vfio_mux") {
          c.Mux(p, &r);
        } else if (r.kind == "emulated_gpu") {
          c.Gpu(p, &r);
        } else if (r.kind == "deployment") {
          c.Manifest(p, &r);
        } else if (r.kind != "campaign") {
          r.errors.push_back(file + ": cannot tell which daemon's configuration this is "
                                    "(pass --kind " + absl::StrJoin(kKinds, "|") + ")");
        }
      }
      results.push_back(r);
      parsed.push_back(std::move(p));
    }
  }
  // Campaigns last: their GPU names come from the orchestrators checked.
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].kind == "campaign") c.Campaign(parsed[i], &results[i], parsed);
  }
  c.Across(parsed, results);
  return results;
}

int ConfigCommand(int argc, char** argv) {
  const std::string sub = argc >= 3 ? argv[2] : "";
  Flags flags("gputravel config check FILE|DIR...",
              "Checks daemon configurations offline, each with the daemon's own parser:\n"
              "fields and values; placeholders left in (REPLACE-WITH-...); the TLS files\n"
              "(readable, the key the certificate's and 0600, the certificate chaining\n"
              "to the CA, valid now, of the daemon's role and name); the attestation\n"
              "section (its keys, roots and pins); the dataset; the modes of the file,\n"
              "its keys and its directories; and, across the files given together,\n"
              "that identities match: the device certificate chains to the\n"
              "orchestrator's device CA, the MUX routes to every domain and obeys the\n"
              "orchestrator's certificate, the holders answer the orchestrator's name\n"
              "and trust its CA, the campaign names what the holders serve. Each\n"
              "file's daemon is told by its fields (or --kind). A DIR is a deployment\n"
              "`gputravel init` wrote: every file its deployment.json lists, and its\n"
              "campaign.json. Nothing is started, extended into RTMR3 or contacted.\n"
              "Exit status: 0 every file passes, 1 any error (on stderr, each naming\n"
              "its file and field), 2 on bad usage.");
  flags.String("kind", "",
               "Every file's kind instead of telling it from its fields: orchestrator, "
               "holder_agent, vfio_mux, emulated_gpu, campaign or deployment.");
  absl::Status ps = sub == "check" ? flags.Parse(argc, argv, 3)
                                   : (sub == "--help" || sub == "-h" || sub == "help"
                                          ? absl::OkStatus()
                                          : absl::InvalidArgumentError(
                                                sub.empty() ? "missing the subcommand check"
                                                            : "unknown subcommand '" + sub +
                                                                  "' (the only one is check)"));
  if (flags.help_requested() || sub == "--help" || sub == "-h" || sub == "help") {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (ps.ok() && flags.positional().empty()) {
    ps = absl::InvalidArgumentError("no file to check");
  }
  const std::string kind = flags.Get("kind");
  if (ps.ok() && !kind.empty() &&
      std::find(std::begin(kKinds), std::end(kKinds), kind) == std::end(kKinds)) {
    ps = absl::InvalidArgumentError("--kind is one of " + absl::StrJoin(kKinds, ", ") +
                                    ", not '" + kind + "'");
  }
  if (!ps.ok()) {
    std::fprintf(stderr, "gputravel config: %s (see gputravel config check --help)\n",
                 TerminalSafe(ps.message()).c_str());
    return 2;
  }
  std::vector<std::string> files;
  for (const auto& f : flags.positional()) files.push_back(UserPath(f));
  bool ok = true;
  for (const ConfigCheckResult& r : CheckConfigs(files, kind)) {
    if (r.errors.empty()) {
      std::printf("%s: ok (%s)\n", TerminalSafe(r.file).c_str(), TerminalSafe(r.summary).c_str());
      // In file order with the errors on stderr, whatever stdout is.
      std::fflush(stdout);
      continue;
    }
    ok = false;
    for (const std::string& e : r.errors) {
      std::fprintf(stderr, "%s\n", TerminalSafe(e).c_str());
    }
  }
  return ok ? 0 : 1;
}

}  // namespace gputravel
