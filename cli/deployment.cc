#include "cli/deployment.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "auth/pki.h"
#include "cli/systemd_units.h"
#include "cli/user_path.h"
#include "holder_agent/dataset.h"
#include "keyxfer/runtime_measurement.h"
#include "orchestrator/eval_set.h"
#include "trainer/synthetic_corpus.h"
#include "util/files.h"
#include "util/hex.h"
#include "util/json_fields.h"
#include "util/status_macros.h"

namespace gputravel {
namespace {

using json = nlohmann::json;

// Daemons: name in runfiles (package/target) and in an installed flat dir.
enum DaemonIndex { kGpuDaemon = 0, kMuxDaemon = 1, kHolderDaemon = 2, kOrchestratorDaemon = 3 };
const char* const kDaemons[][2] = {
    {"device/emulated_gpu_daemon", "emulated_gpu_daemon"},
    {"vfio_mux/vfio_mux", "vfio_mux"},
    {"holder_agent/holder_agent", "holder_agent"},
    {"orchestrator/orchestrator", "orchestrator"},
};

bool HasDaemons(const std::string& dir, bool runfiles_layout) {
  for (const auto& d : kDaemons) {
    if (::access((dir + "/" + d[runfiles_layout ? 0 : 1]).c_str(), X_OK) != 0) return false;
  }
  return true;
}

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "";
}

std::string Daemon(const std::string& bin_dir, int index) {
  std::string runfiles = bin_dir + "/" + kDaemons[index][0];
  if (::access(runfiles.c_str(), X_OK) == 0) return runfiles;
  return bin_dir + "/" + kDaemons[index][1];
}

absl::Status WriteJson(const std::string& path, const json& j) {
  return WriteFile(path, j.dump(2) + "\n", 0600);
}

json TlsJson(const TlsFiles& f) {
  json j{{"ca", f.ca}, {"cert", f.cert}, {"key", f.key}};
  if (!f.crl.empty()) j["crl"] = f.crl;
  return j;
}

// A development attestation section: the domain's own attestation key, the
// development root, and the peers pinned by their binaries' paths (their
// RTMR3 config events are pinned by PinDeployment).
json DevAttestation(const DevPki& pki, const std::string& domain,
                    const std::vector<std::string>& peer_binaries,
                    const std::vector<std::string>& peer_mrtd) {
  json j = {{"backend", "dev"},
            {"allow_insecure_dev_attestation", true},
            {"dev_key", pki.domains.at(domain).key},
            {"dev_cert", pki.domains.at(domain).cert},
            {"dev_root_ca", pki.attestation_root},
            {"dev_peer_binaries", peer_binaries}};
  if (!peer_mrtd.empty()) j["peer_mrtd"] = peer_mrtd;
  return j;
}

// holder-a .. holder-z, then holder-aa, holder-ab, ... (as spreadsheet columns).
std::string HolderName(int i) {
  std::string letters;
  for (int n = i + 1; n > 0; n = (n - 1) / 26) {
    letters.insert(letters.begin(), static_cast<char>('a' + (n - 1) % 26));
  }
  return "holder-" + letters;
}

std::string Placeholder(const std::string& what) { return kPlaceholderPrefix + what; }

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The TDX attestation section of a template: `peer` is whose TD and daemon
// the pins describe ("ORCHESTRATOR" or "HOLDER").
json TdxAttestation(const std::string& peer, bool orchestrator_pins) {
  auto hex96 = [&](const std::string& what) {
    return json::array({Placeholder("96-HEX-DIGITS-OF-THE-" + peer + "-" + what)});
  };
  json pins = {{"binary", hex96("BINARY-EVENT")}, {"config", hex96("CONFIG-EVENT")}};
  if (!orchestrator_pins) pins["peer_pins"] = hex96("PEER-PINS-EVENT");
  return {{"backend", "tdx"},
          {"tdx",
           {{"peer_policy",
             {{"mrtd", hex96("TD-IMAGE-MRTD")},
              {"rtmr0", hex96("TD-FIRMWARE-CONFIG-RTMR0")},
              {"rtmr1", hex96("KERNEL-RTMR1")},
              {"rtmr2", hex96("CMDLINE-AND-INITRD-RTMR2")},
              {"allow_debug", false},
              {"min_tee_tcb_svn", Placeholder("32-HEX-DIGITS-OF-THE-MINIMUM-TEE-TCB-SVN")}}}}},
          {"peer_rtmr3", pins}};
}

// Unix socket paths are at most sizeof(sun_path) - 1 bytes.
absl::Status CheckSocketPath(const std::string& path) {
  constexpr size_t kMax = sizeof(sockaddr_un{}.sun_path) - 1;
  if (path.size() > kMax) {
    return absl::InvalidArgumentError(
        "the deployment directory is too long for its Unix sockets: " + path + " is " +
        std::to_string(path.size()) + " bytes, at most " + std::to_string(kMax) +
        " are allowed; choose a shorter directory");
  }
  return absl::OkStatus();
}

// Makes `dir` the deployment's directory: created 0700, or an existing empty
// directory of this user that nobody else may write (checked on the open
// directory, never through a symbolic link, so that nothing can be put in it
// between the check and the writes). Returns its absolute, canonical path.
absl::StatusOr<std::string> PrepareDirectory(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) return absl::InvalidArgumentError("no deployment directory given");
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno != EEXIST) {
      return absl::UnavailableError("cannot create " + dir + ": " + std::strerror(errno));
    }
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      return absl::AlreadyExistsError(dir + " exists and is not a directory (a symbolic link "
                                            "is not followed): " + std::strerror(errno));
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_uid != ::geteuid()) {
      ::close(fd);
      return absl::PermissionDeniedError(dir + " belongs to another user");
    }
    if ((st.st_mode & 022) != 0) {
      ::close(fd);
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
      return absl::PermissionDeniedError(
          dir + " has mode " + mode + ": others may write it (and put files in the "
          "deployment); give a new directory, or an empty one of mode 0700");
    }
    // Nobody else can add an entry now: the emptiness read is final.
    DIR* d = ::fdopendir(::dup(fd));
    if (d == nullptr) {
      ::close(fd);
      return absl::UnavailableError("cannot read " + dir + ": " + std::strerror(errno));
    }
    bool empty = true;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") empty = false;
    }
    ::closedir(d);
    if (!empty) {
      ::close(fd);
      return absl::AlreadyExistsError(
          dir + " is not empty: a deployment is written to a new or empty directory, never "
                "over another");
    }
    const int changed = ::fchmod(fd, 0700);
    const int err = errno;
    ::close(fd);
    if (changed != 0) {
      return absl::UnavailableError("cannot make " + dir + " mode 0700: " + std::strerror(err));
    }
  }
  char* real = ::realpath(dir.c_str(), nullptr);
  if (real == nullptr) {
    return absl::UnavailableError("cannot resolve " + dir + ": " + std::strerror(errno));
  }
  std::string out = real;
  std::free(real);
  return out;
}

absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::UnavailableError("cannot create " + path + ": " + std::strerror(errno));
  }
  return absl::OkStatus();
}

// Single-quoted for a POSIX shell.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

json CampaignSpecJson(const DeploymentOptions& o, const std::vector<StackHolder>& holders) {
  json hs = json::array();
  for (const auto& h : holders) {
    hs.push_back({{"name", h.name},
                  {"endpoint", h.endpoint},
                  {"domain", h.domain},
                  {"dataset", {{"name", h.dataset}}}});
  }
  json spec = {{"name", o.campaign},
               {"gpu", "gpu0"},
               {"buffer_bytes", o.buffer_bytes},
               {"chunk_bytes", o.chunk_bytes},
               {"rounds", o.rounds},
               {"schedule", o.schedule},
               {"holder_timeout_seconds", o.holder_timeout_seconds},
               {"on_holder_failure", o.on_holder_failure},
               {"holders", hs}};
  if (o.copy_engines != 0) spec["copy_engines"] = o.copy_engines;
  spec["trainer"] = o.trainer ? json{{"kind", "next-token"}, {"batch_tokens", 16384}}
                              : json{{"kind", "none"}};
  if (!o.external_trainer.empty()) {
    spec["trainer"] =
        json{{"kind", "external"}, {"identity", o.external_trainer}, {"batch_tokens", 16384}};
  }
  return spec;
}

json ManifestJson(const Deployment& d) {
  json daemons = json::array();
  for (const auto& dm : d.daemons) {
    daemons.push_back({{"name", dm.name}, {"program", dm.program}, {"config", dm.config}});
  }
  json holders = json::array();
  for (const auto& h : d.holders) {
    holders.push_back(
        {{"name", h.name}, {"endpoint", h.endpoint}, {"domain", h.domain}, {"dataset", h.dataset}});
  }
  json j = {{"kind", d.tdx ? "tdx" : "emulated"},
            {"daemons", daemons},
            {"holders", holders},
            {"orchestrator_endpoint", d.orchestrator_endpoint},
            {"mux_endpoint", d.mux_endpoint}};
  if (!d.external_trainer.empty()) j["external_trainer"] = d.external_trainer;
  return j;
}

std::string OperatorEnv(const Deployment& d) {
  const TlsFiles op = d.tls({kRoleOperator, "operator"});
  std::string out =
      "# The operator of the deployment in " + d.dir +
      ": source this file (. operator.env)\n"
      "# and every `gputravel` client command reaches its orchestrator with mTLS.\n";
  const std::pair<const char*, std::string> vars[] = {{"GPUTRAVEL_ENDPOINT", d.orchestrator_endpoint},
                                                      {"GPUTRAVEL_CA", op.ca},
                                                      {"GPUTRAVEL_CERT", op.cert},
                                                      {"GPUTRAVEL_KEY", op.key},
                                                      {"GPUTRAVEL_CRL", op.crl}};
  for (const auto& [name, value] : vars) out += std::string("export ") + name + "=" + ShellQuote(value) + "\n";
  return out;
}

// The campaign CA and a certificate per identity (what `gputravel pki`
// does). A TDX template issues only the identities that live outside the
// TDs: a TD's key is made inside it (`gputravel pki csr`).
absl::Status WriteCampaignPki(const Deployment& d, const DeploymentOptions& o) {
  GT_RETURN_IF_ERROR(InitCampaignCa(d.tls_dir(), o.campaign, o.valid_days + 1));
  std::vector<Identity> ids = {{kRoleMux, "mux"}, {kRoleOperator, "operator"},
                               {kRoleScheduler, "scheduler"}};
  if (!o.tdx) {
    ids.push_back({kRoleOrchestrator, "orchestrator"});
    for (const auto& h : d.holders) ids.push_back({kRoleHolder, h.name});
  }
  if (!o.external_trainer.empty()) ids.push_back({kRoleTrainer, o.external_trainer});
  for (const auto& id : ids) {
    auto issued = IssueIdentity(d.tls_dir(), id, o.valid_days);
    if (!issued.ok()) return issued.status();
  }
  return absl::OkStatus();
}

// Holder i's dataset: generated from one synthetic language (llm.c shards;
// the third is a raw file), unless the options name a file. Returns
// {path, format}.
absl::StatusOr<std::pair<std::string, std::string>> WriteDataset(const Deployment& d,
                                                                 const DeploymentOptions& o,
                                                                 int i) {
  if (i < static_cast<int>(o.dataset_files.size())) return std::make_pair(o.dataset_files[i], std::string("auto"));
  uint64_t bytes = i < static_cast<int>(o.dataset_bytes.size())
                       ? o.dataset_bytes[i]
                       : (3u << 20) + uint64_t(i) * (5u << 19);
  bytes &= ~uint64_t{1};
  const std::string name = d.holders[i].name;
  const bool raw = i == 2;
  const std::string path = d.dir + "/data/" + name + (raw ? ".raw" : ".bin");
  std::vector<uint16_t> tokens = GenerateCorpus(StackCorpusSeed(i), bytes / 2);
  absl::Status s =
      raw ? WriteFile(path, std::string(reinterpret_cast<char*>(tokens.data()), bytes), 0600)
          : WriteLlmcShard(path, tokens.data(), tokens.size());
  if (!s.ok()) return s;
  return std::make_pair(path, std::string(raw ? "raw" : "llmc-tokens"));
}

// The emulated deployment's configurations, in DIR.
absl::Status WriteEmulatedConfigs(Deployment& d, const DeploymentOptions& o,
                                  const std::string& bin_dir) {
  const std::string& dir = d.dir;
  const std::vector<std::string> domains = d.domains();
  json shared_dirs = json::object();
  for (const auto& dom : domains) {
    if (dom == kOrchestratorDomain) continue;
    GT_RETURN_IF_ERROR(MakeDir(d.shared_dir(dom)));
    shared_dirs[dom] = d.shared_dir(dom);
  }
  auto pki = CreateDevPki(dir + "/pki", kEmulatedGpuSerial, domains);
  if (!pki.ok()) return pki.status();
  GT_RETURN_IF_ERROR(WriteCampaignPki(d, o));
  const std::string holder_program = Daemon(bin_dir, kHolderDaemon);
  const std::string orchestrator_program = Daemon(bin_dir, kOrchestratorDaemon);

  // The GPU.
  const json dev = {{"serial", kEmulatedGpuSerial},
                    {"memory_bytes", o.gpu_memory_bytes},
                    {"identity_key", pki->device_key},
                    {"identity_cert", pki->device_cert},
                    {"socket_dir", dir + "/dev"},
                    {"domains", domains},
                    {"shared_dirs", shared_dirs},
                    {"admin_socket", dir + "/device-admin.sock"},
                    {"heartbeat_period_seconds", o.heartbeat_period_seconds}};
  GT_RETURN_IF_ERROR(WriteJson(d.config_path("gpu"), dev));
  d.daemons.push_back({"gpu", Daemon(bin_dir, kGpuDaemon), d.config_path("gpu")});

  // The MUX: it routes only to the deployment's domains and obeys only the
  // pinned orchestrator and operator certificates (the host's side of P8).
  json mux = {
      {"listen", d.mux_endpoint},
      {"backend", "emulated"},
      {"state_file", dir + "/state/mux-routes.json"},
      {"audit_log", dir + "/logs/mux-audit.jsonl"},
      {"tls", TlsJson(d.tls({kRoleMux, "mux"}))},
      {"domains", domains},
      {"callers", json::array({IdentityCertPath(d.tls_dir(), {kRoleOrchestrator, "orchestrator"}),
                               IdentityCertPath(d.tls_dir(), {kRoleOperator, "operator"})})},
      {"gpus", json::array({{{"name", "gpu0"}, {"admin_endpoint", d.device_admin_endpoint()}}})}};
  if (o.metrics) mux["metrics_listen"] = "127.0.0.1:0";
  GT_RETURN_IF_ERROR(WriteJson(d.config_path("mux"), mux));
  d.daemons.push_back({"mux", Daemon(bin_dir, kMuxDaemon), d.config_path("mux")});

  // The holders and their datasets, all drawn from one synthetic language so
  // the trainer's loss falls as the GPU visits them.
  for (int i = 0; i < o.holders; ++i) {
    const StackHolder& h = d.holders[i];
    auto dataset = WriteDataset(d, o, i);
    if (!dataset.ok()) return dataset.status();
    json hc = {
        {"name", h.name},
        {"domain", h.domain},
        {"listen", h.endpoint},
        {"dataset", {{"name", h.dataset}, {"path", dataset->first}, {"format", dataset->second}}},
        {"tls", TlsJson(d.tls({kRoleHolder, h.name}))},
        // Explicit, as in every deployment: the one orchestrator answered.
        {"orchestrator_names", json::array({"orchestrator"})},
        {"device_endpoint", d.device_socket(h.domain)},
        {"threads", o.threads},
        {"bounce_dir", d.shared_dir(h.domain)},
        {"state_dir", dir + "/state-" + h.name},
        {"training_policy", o.holder_training_policy},
        {"attestation",
         DevAttestation(*pki, h.domain, {orchestrator_program}, /*peer_mrtd=*/{})}};
    if (o.metrics) hc["metrics_listen"] = "127.0.0.1:0";
    GT_RETURN_IF_ERROR(WriteJson(d.config_path(h.name), hc));
    d.daemons.push_back({h.name, holder_program, d.config_path(h.name)});
  }

  // The orchestrator.
  json orch = {
      {"listen", d.orchestrator_endpoint},
      {"domain", kOrchestratorDomain},
      {"state_dir", dir + "/state"},
      {"mux_endpoint", d.mux_endpoint},
      {"gpus", json::array({{{"name", "gpu0"},
                             {"device_endpoint", o.orchestrator_device_endpoint.empty()
                                                     ? d.device_socket(kOrchestratorDomain)
                                                     : o.orchestrator_device_endpoint},
                             {"device_ca", pki->device_ca_cert},
                             {"serial", kEmulatedGpuSerial},
                             {"heartbeat_period_seconds", o.heartbeat_period_seconds}}})},
      {"attestation", DevAttestation(*pki, kOrchestratorDomain, {holder_program},
                                     o.extra_holder_mrtd_hex)},
      {"tls", TlsJson(d.tls({kRoleOrchestrator, "orchestrator"}))}};
  if (!o.external_trainer.empty()) orch["trainer_listen"] = d.trainer_endpoint();
  if (o.metrics) orch["metrics_listen"] = "127.0.0.1:0";
  if (o.eval_set) {
    // Held-out text of the same synthetic language, drawn with a seed no
    // holder uses: the orchestrator's own, inside its TD.
    const std::string eval_path = dir + "/data/orchestrator-eval.bin";
    std::vector<uint16_t> eval = GenerateCorpus(424242, kMaxEvalTokens);
    GT_RETURN_IF_ERROR(WriteLlmcShard(eval_path, eval.data(), eval.size()));
    orch["eval_tokens"] = eval_path;
  }
  GT_RETURN_IF_ERROR(WriteJson(d.config_path("orchestrator"), orch));
  d.daemons.push_back({"orchestrator", orchestrator_program, d.config_path("orchestrator")});
  return PinDeployment(d, o);
}

// The template for real hardware: the layout of the systemd units
// (deploy/systemd), TDX attestation and the MUX's sysfs backend, with every
// value only the operator knows marked.
absl::Status WriteTdxConfigs(Deployment& d, const DeploymentOptions& o) {
  const std::string etc = "/etc/gputravel";
  const std::string pki = etc + "/pki";
  auto tls = [&](const std::string& role, const std::string& name) {
    return json{{"ca", pki + "/ca.pem"},
                {"cert", pki + "/" + role + "-" + name + ".pem"},
                {"key", pki + "/" + role + "-" + name + ".key"},
                {"crl", pki + "/crl.pem"}};
  };
  GT_RETURN_IF_ERROR(WriteCampaignPki(d, o));
  const std::vector<std::string> domains = d.domains();
  const json mux = {
      {"listen", "0.0.0.0:7100"},
      {"backend", "sysfs"},
      {"state_file", "/var/lib/gputravel/mux-routes.json"},
      {"audit_log", "/var/log/gputravel/mux-audit.jsonl"},
      {"domains", domains},
      {"sysfs", {{"gpus", json::array({{{"name", "gpu0"},
                                        {"bdf", Placeholder("GPU-PCI-ADDRESS-0000:BB:DD.F")}}})}}},
      {"tls", tls(kRoleMux, "mux")},
      {"callers", json::array({etc + "/mux-callers/orchestrator-orchestrator.pem"})}};
  GT_RETURN_IF_ERROR(WriteJson(d.config_path("mux"), mux));
  d.daemons.push_back({"mux", "/usr/local/bin/vfio_mux", etc + "/mux.json"});
  for (int i = 0; i < o.holders; ++i) {
    const StackHolder& h = d.holders[i];
    const std::string upper = Upper(h.name);
    const json hc = {
        {"name", h.name},
        {"domain", h.domain},
        {"listen", "0.0.0.0:7001"},
        {"dataset",
         {{"name", h.dataset},
          {"path", Placeholder("PATH-OF-" + upper + "-DATASET-FILE")},
          {"format", "llmc-tokens"}}},
        {"device_endpoint", Placeholder("GPU-ENDPOINT-IN-" + upper + "-TD")},
        {"threads", o.threads},
        {"bounce_dir", "/run/gputravel/shm/" + h.name},
        {"state_dir", "/var/lib/gputravel/holder-" + h.name},
        {"attestation", TdxAttestation("ORCHESTRATOR", /*orchestrator_pins=*/false)},
        {"tls", tls(kRoleHolder, h.name)},
        {"orchestrator_names", json::array({"orchestrator"})}};
    GT_RETURN_IF_ERROR(WriteJson(d.config_path(h.name), hc));
    d.daemons.push_back(
        {h.name, "/usr/local/bin/holder_agent", etc + "/holder-" + h.name + ".json"});
    // deploy/systemd/gputravel.tmpfiles.conf with this holder's line filled
    // in: its bounce ring's directory, made at boot in its TD.
    GT_RETURN_IF_ERROR(WriteFile(
        d.dir + "/" + h.name + ".tmpfiles.conf",
        "# Install in holder " + h.name + "'s TD as /etc/tmpfiles.d/gputravel.conf, then\n"
        "# `systemd-tmpfiles --create /etc/tmpfiles.d/gputravel.conf` (deploy/systemd).\n"
        "d /run/gputravel 0755 root root -\n"
        "d /run/gputravel/shm 0755 root root -\n"
        "d /run/gputravel/shm/" + h.name + " 0700 gputravel gputravel -\n",
        0644));
  }
  // The units whose paths these configurations use, as deploy/systemd has
  // them, to install in each TD and on the host (docs/operations.md).
  GT_RETURN_IF_ERROR(MakeDir(d.dir + "/systemd"));
  for (const SystemdUnitFile& unit : SystemdUnits()) {
    const std::string path = d.dir + "/systemd/" + unit.path;
    const size_t slash = path.rfind('/');
    GT_RETURN_IF_ERROR(MakeDir(path.substr(0, slash)));
    GT_RETURN_IF_ERROR(WriteFile(path, unit.text, 0644));
  }
  const json orch = {
      {"listen", "0.0.0.0:7000"},
      {"domain", kOrchestratorDomain},
      {"state_dir", "/var/lib/gputravel/orchestrator"},
      {"mux_endpoint", d.mux_endpoint},
      {"mux_name", "mux"},
      {"gpus", json::array({{{"name", "gpu0"},
                             {"device_endpoint", Placeholder("GPU-ENDPOINT-IN-ORCHESTRATOR-TD")},
                             {"device_ca", etc + "/" + Placeholder("NVIDIA-DEVICE-CA.pem")},
                             {"serial", Placeholder("GPU-SERIAL")}}})},
      {"attestation", TdxAttestation("HOLDER", /*orchestrator_pins=*/true)},
      {"tls", tls(kRoleOrchestrator, "orchestrator")}};
  GT_RETURN_IF_ERROR(WriteJson(d.config_path("orchestrator"), orch));
  d.daemons.push_back({"orchestrator", "/usr/local/bin/orchestrator", etc + "/orchestrator.json"});
  return absl::OkStatus();
}

absl::StatusOr<json> ReadConfigJson(const std::string& path) {
  auto j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  if (!j->is_object()) return absl::InvalidArgumentError(path + ": must be a JSON object");
  return j;
}

// Writes into `dir` (prepared: absolute, empty, 0700).
absl::StatusOr<Deployment> WriteDeploymentFiles(const std::string& dir,
                                                const DeploymentOptions& options,
                                                const std::string& bin_dir);

}  // namespace

std::string Deployment::config_path(const std::string& daemon) const {
  return dir + "/" + (daemon == "gpu" ? std::string("device") : daemon) + ".json";
}

DevPki Deployment::dev_pki() const { return DevPkiPaths(dir + "/pki", domains()); }

std::vector<std::string> Deployment::domains() const {
  std::vector<std::string> out = {kOrchestratorDomain};
  for (const auto& h : holders) out.push_back(h.domain);
  return out;
}

TlsFiles Deployment::tls(const Identity& id) const {
  return TlsFiles{CaCertPath(tls_dir()), IdentityCertPath(tls_dir(), id),
                  IdentityKeyPath(tls_dir(), id), CrlPath(tls_dir())};
}

absl::StatusOr<Deployment> WriteDeployment(const std::string& dir,
                                           const DeploymentOptions& options) {
  if (options.holders < 1 || options.holders > kMaxDeploymentHolders) {
    return absl::InvalidArgumentError("a deployment has 1 to " +
                                      std::to_string(kMaxDeploymentHolders) + " holders, not " +
                                      std::to_string(options.holders));
  }
  GT_RETURN_IF_ERROR(ValidateName(options.campaign));
  std::string bin_dir;
  if (!options.tdx) {
    auto found = FindDaemonDir(options.bin_dir);
    if (!found.ok()) return found.status();
    bin_dir = *found;
    if (bin_dir[0] != '/') bin_dir = UserPath(bin_dir);
  }
  struct stat before;
  const bool existed = ::lstat(dir.c_str(), &before) == 0;
  auto prepared = PrepareDirectory(dir);
  if (!prepared.ok()) return prepared.status();
  auto d = WriteDeploymentFiles(*prepared, options, bin_dir);
  if (!d.ok()) {
    // Half a deployment is none: what was written goes, and the directory
    // too if this call made it, so the same command can run again.
    std::error_code ec;
    if (existed) {
      for (const auto& e : std::filesystem::directory_iterator(*prepared, ec)) {
        std::filesystem::remove_all(e.path(), ec);
      }
    } else {
      std::filesystem::remove_all(*prepared, ec);
    }
  }
  return d;
}

namespace {

absl::StatusOr<Deployment> WriteDeploymentFiles(const std::string& dir,
                                                const DeploymentOptions& options,
                                                const std::string& bin_dir) {
  Deployment d;
  d.dir = dir;
  d.tdx = options.tdx;
  d.external_trainer = options.external_trainer;
  // What a daemon listens on: a Unix socket in the directory, or
  // 127.0.0.1:0 (the launcher learns the port); a template's addresses are
  // the operator's.
  auto listen = [&](const std::string& name) {
    return options.tcp_loopback ? std::string("127.0.0.1:0")
                                : "unix:" + d.dir + "/" + name + ".sock";
  };
  for (int i = 0; i < options.holders; ++i) {
    StackHolder h;
    h.name = HolderName(i);
    h.domain = "td-" + h.name;
    h.endpoint = options.tdx ? Placeholder(Upper(h.name) + "-TD-ADDRESS") + ":7001"
                             : listen(h.name);
    h.dataset = h.name + "-tokens";
    d.holders.push_back(h);
  }
  for (const auto& h : options.extra_holders) d.holders.push_back(h);
  d.orchestrator_endpoint =
      options.tdx ? Placeholder("ORCHESTRATOR-TD-ADDRESS") + ":7000" : listen("orchestrator");
  d.mux_endpoint = options.tdx ? Placeholder("HOST-ADDRESS") + ":7100" : listen("mux");
  if (!options.tdx) {
    for (const std::string& socket :
         {d.dir + "/device-admin.sock", d.dir + "/orchestrator.sock", d.dir + "/mux.sock",
          d.dir + "/trainer.sock"}) {
      GT_RETURN_IF_ERROR(CheckSocketPath(socket));
    }
    for (const auto& dom : d.domains()) {
      GT_RETURN_IF_ERROR(CheckSocketPath(d.dir + "/dev/" + dom + ".sock"));
    }
    for (const auto& h : d.holders) GT_RETURN_IF_ERROR(CheckSocketPath(d.dir + "/" + h.name + ".sock"));
  }
  for (const char* sub : {"/pki", "/dev", "/logs", "/run", "/data", "/state", "/shm"}) {
    if (options.tdx && std::string(sub) != "/pki") continue;
    GT_RETURN_IF_ERROR(MakeDir(d.dir + sub));
  }
  if (options.tdx) {
    GT_RETURN_IF_ERROR(WriteTdxConfigs(d, options));
  } else {
    GT_RETURN_IF_ERROR(WriteEmulatedConfigs(d, options, bin_dir));
  }
  d.campaign_spec = CampaignSpecJson(options, d.holders);
  GT_RETURN_IF_ERROR(SaveDeployment(d));
  return d;
}

}  // namespace

absl::Status SaveDeployment(const Deployment& d) {
  GT_RETURN_IF_ERROR(WriteJson(d.campaign_spec_path(), d.campaign_spec));
  GT_RETURN_IF_ERROR(WriteFile(d.operator_env_path(), OperatorEnv(d), 0600));
  return WriteJson(d.manifest_path(), ManifestJson(d));
}

absl::Status ParseDeploymentManifest(const json& m, const std::string& where, Deployment* d) {
  if (!m.is_object()) return absl::InvalidArgumentError(where + ": must be a JSON object");
  GT_RETURN_IF_ERROR(RefuseUnknownFields(
      m, {"kind", "daemons", "holders", "orchestrator_endpoint", "mux_endpoint",
          "external_trainer"},
      where));
  std::string kind;
  GT_ASSIGN_OR_RETURN(kind, JsonString(m, where, "kind"));
  if (kind != "emulated" && kind != "tdx") {
    return absl::InvalidArgumentError(where + ": kind: '" + kind + "' is not emulated or tdx");
  }
  d->tdx = kind == "tdx";
  GT_ASSIGN_OR_RETURN(d->orchestrator_endpoint, JsonString(m, where, "orchestrator_endpoint"));
  GT_ASSIGN_OR_RETURN(d->mux_endpoint, JsonString(m, where, "mux_endpoint"));
  if (m.contains("external_trainer")) {
    GT_ASSIGN_OR_RETURN(d->external_trainer, JsonString(m, where, "external_trainer"));
  }
  for (const char* list : {"daemons", "holders"}) {
    if (!m.contains(list) || !m[list].is_array() || m[list].empty()) {
      return absl::InvalidArgumentError(where + ": " + list + ": must be a non-empty array");
    }
  }
  for (size_t i = 0; i < m["daemons"].size(); ++i) {
    const json& e = m["daemons"][i];
    const std::string at = where + ": daemons[" + std::to_string(i) + "]";
    GT_RETURN_IF_ERROR(RefuseUnknownFields(e, {"name", "program", "config"}, at));
    DeploymentDaemon dm;
    GT_ASSIGN_OR_RETURN(dm.name, JsonString(e, at, "name"));
    GT_ASSIGN_OR_RETURN(dm.program, JsonString(e, at, "program"));
    GT_ASSIGN_OR_RETURN(dm.config, JsonString(e, at, "config"));
    d->daemons.push_back(dm);
  }
  for (size_t i = 0; i < m["holders"].size(); ++i) {
    const json& e = m["holders"][i];
    const std::string at = where + ": holders[" + std::to_string(i) + "]";
    GT_RETURN_IF_ERROR(RefuseUnknownFields(e, {"name", "endpoint", "domain", "dataset"}, at));
    StackHolder h;
    GT_ASSIGN_OR_RETURN(h.name, JsonString(e, at, "name"));
    GT_ASSIGN_OR_RETURN(h.endpoint, JsonString(e, at, "endpoint"));
    GT_ASSIGN_OR_RETURN(h.domain, JsonString(e, at, "domain"));
    GT_ASSIGN_OR_RETURN(h.dataset, JsonString(e, at, "dataset"));
    d->holders.push_back(h);
  }
  return absl::OkStatus();
}

absl::StatusOr<Deployment> ReadDeployment(const std::string& dir) {
  Deployment d;
  d.dir = dir;
  const std::string where = d.manifest_path();
  auto m = ReadJsonFile(where);
  if (!m.ok()) {
    return absl::Status(m.status().code(),
                        std::string(m.status().message()) +
                            " (a deployment directory is written by `gputravel init`)");
  }
  GT_RETURN_IF_ERROR(ParseDeploymentManifest(*m, where, &d));
  GT_ASSIGN_OR_RETURN(d.campaign_spec, ReadConfigJson(d.campaign_spec_path()));
  return d;
}

absl::Status PinDeployment(const Deployment& d, const DeploymentOptions& options) {
  // The orchestrator's config event leaves out its pins of the holders, and
  // a holder's leaves out its pin of the orchestrator's peer_pins event: so
  // the orchestrator's config event is pinned by every holder, each holder's
  // config event (which includes that pin) by the orchestrator, and the
  // orchestrator's peer_pins event (its pins of the holders) by every holder
  // last (keyxfer/runtime_measurement.h).
  const std::string orch_path = d.config_path("orchestrator");
  json orch;
  GT_ASSIGN_OR_RETURN(orch, ReadConfigJson(orch_path));
  std::string orch_config;
  GT_ASSIGN_OR_RETURN(orch_config, Rtmr3ConfigEvent("orchestrator", orch, orch_path));
  std::vector<std::pair<std::string, json>> holders;  // path, config
  json holder_config_events = json::array();
  for (const auto& dm : d.daemons) {
    if (dm.name == "gpu" || dm.name == "mux" || dm.name == "orchestrator") continue;
    const std::string path = d.config_path(dm.name);
    json hc;
    GT_ASSIGN_OR_RETURN(hc, ReadConfigJson(path));
    hc["attestation"]["peer_rtmr3"] = {{"config", HexEncode(orch_config)}};
    std::string event;
    GT_ASSIGN_OR_RETURN(event, Rtmr3ConfigEvent("holder_agent", hc, path));
    holder_config_events.push_back(HexEncode(event));
    holders.emplace_back(path, std::move(hc));
  }
  for (const auto& hex : options.extra_holder_config_event_hex) holder_config_events.push_back(hex);
  json pins = {{"config", holder_config_events}};
  if (!options.extra_holder_binary_event_hex.empty()) {
    pins["binary"] = options.extra_holder_binary_event_hex;
  }
  orch["attestation"]["peer_rtmr3"] = pins;
  std::string orch_pins;
  GT_ASSIGN_OR_RETURN(orch_pins, Rtmr3PeerPinsEvent(orch));
  for (auto& [path, hc] : holders) {
    hc["attestation"]["peer_rtmr3"]["peer_pins"] = HexEncode(orch_pins);
    GT_RETURN_IF_ERROR(WriteJson(path, hc));
  }
  return WriteJson(orch_path, orch);
}

absl::StatusOr<std::string> FindDaemonDir(const std::string& override_dir) {
  if (!override_dir.empty()) {
    // A directory the user named is the only place to look: falling back to
    // other daemons would run what they did not choose.
    if (HasDaemons(override_dir, true) || HasDaemons(override_dir, false)) return override_dir;
    return absl::NotFoundError(
        "the daemon directory " + override_dir +
        " does not hold all of emulated_gpu_daemon, vfio_mux, holder_agent and orchestrator "
        "(side by side, or in Bazel's runfiles layout)");
  }
  std::vector<std::pair<std::string, bool>> candidates;
  if (const char* r = getenv("RUNFILES_DIR")) candidates.push_back({std::string(r) + "/gputravel", true});
  if (const char* r = getenv("TEST_SRCDIR")) candidates.push_back({std::string(r) + "/gputravel", true});
  std::string self = SelfExe();
  if (!self.empty()) {
    candidates.push_back({self + ".runfiles/gputravel", true});
    candidates.push_back({self.substr(0, self.find_last_of('/')), false});
  }
  for (const auto& c : candidates) {
    if (HasDaemons(c.first, c.second)) return c.first;
  }
  return absl::NotFoundError(
      "cannot find the daemons (emulated_gpu_daemon, vfio_mux, holder_agent, "
      "orchestrator) in this program's Bazel runfiles: start it with `bazel run`, or pass "
      "--bin_dir");
}

}  // namespace gputravel
