#ifndef GPUTRAVEL_CLI_DEPLOYMENT_H_
#define GPUTRAVEL_CLI_DEPLOYMENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/identity.h"
#include "auth/tls_config.h"
#include "cli/dev_pki.h"
#include "nlohmann/json.hpp"

namespace gputravel {

// A holder of a deployment's campaign.
struct StackHolder {
  std::string name;
  std::string endpoint;
  std::string domain;
  std::string dataset;  // dataset name the agent serves
};

// The seed of holder i's generated dataset (trainer/synthetic_corpus.h
// GenerateCorpus(StackCorpusSeed(i), bytes / 2)): what a benchmark trains on
// when it wants the very window the stack provisions.
inline uint64_t StackCorpusSeed(int holder) { return 1000 + static_cast<uint64_t>(holder); }

// What a deployment holds: its holders and datasets, its campaign, and how
// its daemons are linked. `gputravel init` sets a few of these from its
// flags; the emulated stack's tests set the rest.
// The most holders WriteDeployment writes (`init` and `demo` take at most 16).
inline constexpr int kMaxDeploymentHolders = 256;

struct DeploymentOptions {
  int holders = 3;
  // Payload bytes per holder; empty: 3 MiB + 2.5 MiB * i (all different).
  std::vector<uint64_t> dataset_bytes;
  // Existing dataset files per holder (format "auto"); overrides generation.
  std::vector<std::string> dataset_files;
  uint64_t buffer_bytes = 8u << 20;
  uint32_t chunk_bytes = 1u << 20;
  // The spec's copy_engines; 0: left out (the orchestrator's default).
  uint32_t copy_engines = 0;
  int threads = 2;
  uint64_t gpu_memory_bytes = 256u << 20;
  double holder_timeout_seconds = 60;
  uint32_t rounds = 1;
  std::string schedule = "round-robin";
  std::string on_holder_failure = "skip";
  bool trainer = true;  // the built-in next-token trainer
  // The name of an external trainer (proto/trainer.proto): non-empty, the
  // campaign's trainer is kind "external" with this identity, a certificate
  // of role trainer is issued for it and the orchestrator serves the
  // Trainer service on Deployment::trainer_endpoint(). The holders'
  // training_policy must then allow "external" in its trainer_kinds.
  std::string external_trainer;
  std::string bin_dir;  // empty: found next to this program (Bazel runfiles)
  // The campaign's name (and the campaign CA's).
  std::string campaign = "demo";
  // Days the campaign CA and the certificates it issues are valid (the CA
  // one day longer).
  int valid_days = 30;
  // Holders served by the caller (tests): added to the campaign and given a
  // device socket, an attestation key and a TLS certificate; their MRTDs
  // and RTMR3 binary and config events (hex) are allowed.
  std::vector<StackHolder> extra_holders;
  std::vector<std::string> extra_holder_mrtd_hex;
  std::vector<std::string> extra_holder_binary_event_hex;
  std::vector<std::string> extra_holder_config_event_hex;
  // The network links (orchestrator API, MUX, holder agents) over TCP on
  // 127.0.0.1, on ports the kernel picks at start (the launcher writes them
  // into the configurations and pins again), as between real TDs, instead
  // of Unix sockets. The device sockets stay Unix sockets either way: they
  // stand for the PCIe routing, not for a network.
  bool tcp_loopback = false;
  // The device's CC heartbeat period, told to the GPU and the orchestrator
  // alike (0: off, as by default on the real driver).
  uint32_t heartbeat_period_seconds = 0;
  // Where the orchestrator reaches the GPU; empty: the device's socket for
  // the orchestrator's domain. Tests put a relay of the host's here.
  std::string orchestrator_device_endpoint;
  // Every holder agent's "training_policy" (trainer/training_policy.h). The
  // default is the agent's own, except that a loss is reported for every
  // trip (the demo's table); tests with windows under 1 MiB lower
  // min_window_bytes.
  nlohmann::json holder_training_policy = {{"min_windows_per_loss", 1}};
  // Give the orchestrator an evaluation set (eval_tokens: held-out text of
  // the holders' synthetic language), so trips report a held-out loss.
  bool eval_set = true;
  // Every daemon but the GPU serves its metrics on 127.0.0.1:0
  // (metrics_listen); EmulatedStack::metrics_address() says where.
  bool metrics = false;
  // A template for real hardware (`gputravel init --tdx`): TDX attestation,
  // the MUX's sysfs backend, the paths of the systemd units, no emulated
  // GPU, no generated dataset and no development key; every value only the
  // operator knows is a "REPLACE-WITH-..." placeholder, which `gputravel
  // config check` refuses.
  bool tdx = false;
};

// The emulated GPU's serial, and the orchestrator's domain at the MUX.
inline constexpr char kEmulatedGpuSerial[] = "EMU-H100-0001";
inline constexpr char kOrchestratorDomain[] = "orchestrator";

// The placeholder every value of a --tdx template that the operator must
// supply starts with.
inline constexpr char kPlaceholderPrefix[] = "REPLACE-WITH-";

// One daemon of a deployment: how it is started.
struct DeploymentDaemon {
  std::string name;     // "gpu", "mux", a holder's name, "orchestrator"
  std::string program;  // absolute path of its binary
  std::string config;   // absolute path of its configuration
};

// A deployment written to a directory (docs/operations.md, "Deploy by
// hand", lists every file). DIR/deployment.json records what a launcher
// needs: the daemons in start order, the campaign's holders and the
// orchestrator's endpoint.
struct Deployment {
  std::string dir;                        // absolute
  bool tdx = false;                       // a --tdx template (not startable here)
  std::vector<DeploymentDaemon> daemons;  // in start order
  std::vector<StackHolder> holders;       // every holder of the campaign
  std::string orchestrator_endpoint;
  std::string mux_endpoint;
  std::string external_trainer;           // empty: none
  nlohmann::json campaign_spec;           // DIR/campaign.json

  std::string manifest_path() const { return dir + "/deployment.json"; }
  std::string campaign_spec_path() const { return dir + "/campaign.json"; }
  std::string operator_env_path() const { return dir + "/operator.env"; }
  std::string config_path(const std::string& daemon) const;  // by DeploymentDaemon::name
  // The development PKI (emulated deployments): device CA and identity,
  // attestation root and one attestation key per domain.
  DevPki dev_pki() const;
  std::vector<std::string> domains() const;  // the orchestrator's, then each holder's
  // The campaign PKI directory and the TLS files of one identity.
  std::string tls_dir() const { return dir + "/pki/tls"; }
  TlsFiles tls(const Identity& id) const;
  std::string device_socket(const std::string& domain) const {
    return "unix:" + dir + "/dev/" + domain + ".sock";
  }
  // A holder domain's shared memory: the directory its bounce rings go in,
  // and the only one the GPU maps rings from while routed to that domain.
  std::string shared_dir(const std::string& domain) const { return dir + "/shm/" + domain; }
  std::string device_admin_endpoint() const { return "unix:" + dir + "/device-admin.sock"; }
  std::string trainer_endpoint() const { return "unix:" + dir + "/trainer.sock"; }
  std::string log_path(const std::string& daemon) const { return dir + "/logs/" + daemon + ".log"; }
  std::string ready_path(const std::string& daemon) const {
    return dir + "/run/" + daemon + ".ready";
  }
};

// Writes a whole deployment to `dir` (created 0700 if missing; an existing
// one must be empty and writable by its owner only): the campaign PKI, the
// device identity and device CA, the development attestation identities,
// every daemon's configuration (mode 0600), the holders' datasets, the
// campaign spec, DIR/operator.env and DIR/deployment.json. Every directory
// is 0700 and every key 0600. The orchestrator and the holders pin each
// other's RTMR3 config events (PinDeployment) and each other's binaries by
// path (attestation "dev_peer_binaries", keyxfer/attestation_config.h), so a
// rebuild needs a restart, never an edited file. Nothing is started.
absl::StatusOr<Deployment> WriteDeployment(const std::string& dir,
                                           const DeploymentOptions& options);

// Reads DIR/deployment.json and DIR/campaign.json. Errors name the file.
absl::StatusOr<Deployment> ReadDeployment(const std::string& dir);
// The manifest's part: `m` read from `where` into `d` (all but dir and the
// campaign spec).
absl::Status ParseDeploymentManifest(const nlohmann::json& m, const std::string& where,
                                     Deployment* d);

// Writes the orchestrator's and the holders' pins of each other's RTMR3
// events into their configuration files, from what the files hold now: a
// launcher that rewrote an address the configurations measure (the MUX's,
// chosen at start) pins again with this. `options` adds its extra holders'
// events.
absl::Status PinDeployment(const Deployment& deployment, const DeploymentOptions& options);

// Rewrites DIR/deployment.json, DIR/campaign.json and DIR/operator.env from
// `deployment` (a launcher that learnt the addresses its daemons chose).
absl::Status SaveDeployment(const Deployment& deployment);

// Directory holding the daemons: `override_dir`, else the Bazel runfiles of
// this program, else the directory of this program (installed layout).
absl::StatusOr<std::string> FindDaemonDir(const std::string& override_dir);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_DEPLOYMENT_H_
