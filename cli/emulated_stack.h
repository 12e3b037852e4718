#ifndef GPUTRAVEL_CLI_EMULATED_STACK_H_
#define GPUTRAVEL_CLI_EMULATED_STACK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/identity.h"
#include "auth/tls_config.h"
#include "cli/dev_pki.h"
#include "nlohmann/json.hpp"
#include "proto/orchestrator.grpc.pb.h"
#include "util/subprocess.h"

namespace gputravel {

// A holder of the emulated campaign.
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

struct StackOptions {
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
  int log_level = 1;
  uint64_t gpu_memory_bytes = 256u << 20;
  double holder_timeout_seconds = 60;
  uint32_t rounds = 1;
  std::string schedule = "round-robin";
  std::string on_holder_failure = "skip";
  bool trainer = true;  // the built-in next-token trainer
  // The name of an external trainer (proto/trainer.proto): non-empty, the
  // campaign's trainer is kind "external" with this identity, a certificate
  // of role trainer is issued for it and the orchestrator serves the
  // Trainer service on trainer_endpoint(). The holders' training_policy
  // must then allow "external" in its trainer_kinds.
  std::string external_trainer;
  std::string bin_dir;  // empty: found next to this program (Bazel runfiles)
  std::string campaign = "demo";
  // Holders served by the caller (tests): added to the campaign and given a
  // device socket, an attestation key and a TLS certificate; their MRTDs
  // and RTMR3 binary and config events (hex) are allowed.
  std::vector<StackHolder> extra_holders;
  std::vector<std::string> extra_holder_mrtd_hex;
  std::vector<std::string> extra_holder_binary_event_hex;
  std::vector<std::string> extra_holder_config_event_hex;
  bool keep = false;  // keep the temporary directory (logs, configs)
  // The network links (orchestrator API, MUX, holder agents) over TCP on
  // 127.0.0.1, on ports the kernel picks, as between real TDs, instead of
  // Unix sockets. The device sockets stay Unix sockets either way: they
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
  // Every daemon but the GPU serves its metrics on 127.0.0.1:0
  // (metrics_listen); metrics_address() says where.
  bool metrics = false;
  // Give the orchestrator an evaluation set (eval_tokens: held-out text of
  // the holders' synthetic language), so trips report a held-out loss.
  bool eval_set = true;
};

// The whole emulated deployment on one machine, as real processes talking
// real gRPC over Unix sockets in a fresh temporary directory (or, with
// tcp_loopback, over TCP on 127.0.0.1 for the network links): the emulated
// GPU, the MUX (emulated backend), one holder_agent per holder and the
// orchestrator. A campaign CA (auth/pki.h) issues a certificate per identity
// and every connection except the emulated PCIe bus is mTLS; development
// attestation is enabled explicitly in each configuration, and the
// orchestrator and the holders pin each other's RTMR3 events
// (keyxfer/runtime_measurement.h). The destructor
// stops every process and removes the directory (unless keep).
class EmulatedStack {
 public:
  static absl::StatusOr<std::unique_ptr<EmulatedStack>> Start(StackOptions options);
  ~EmulatedStack();

  // The campaign specification the options describe (tests may edit it).
  nlohmann::json CampaignSpec() const;
  // Creates the campaign (CampaignSpec() unless `spec` is given), starts it,
  // waits until it is final, or PAUSED (a failure that waits for an operator,
  // who is not there: the caller sees the state and the error), and returns
  // it with its trips.
  absl::StatusOr<v1::Campaign> RunCampaign(const nlohmann::json* spec = nullptr);
  // A client of the orchestrator API with the operator's certificate.
  std::unique_ptr<v1::Orchestrator::Stub> OperatorClient() const;
  // Waits until the campaign is in a final state, or also PAUSED with
  // `paused_ends_wait` (or `seconds` pass: DeadlineExceeded).
  absl::StatusOr<v1::Campaign> WaitForFinal(const std::string& name, double seconds,
                                            bool paused_ends_wait = false) const;
  // Starts a daemon again with its configuration (after Kill, for crash tests).
  absl::Status Restart(const std::string& name);
  // Stops every daemon (SIGTERM, then SIGKILL). Idempotent.
  void Stop();

  const std::string& dir() const { return dir_; }
  const DevPki& pki() const { return pki_; }
  std::string device_socket(const std::string& domain) const;
  // A holder domain's shared memory: the directory its bounce rings go in,
  // and the only one the GPU maps rings from while routed to that domain.
  std::string shared_dir(const std::string& domain) const { return dir_ + "/shm/" + domain; }
  const std::string& mux_endpoint() const { return mux_endpoint_; }
  std::string device_admin_endpoint() const { return "unix:" + dir_ + "/device-admin.sock"; }
  const std::string& orchestrator_endpoint() const { return orchestrator_endpoint_; }
  // The Trainer service's Unix socket (with StackOptions::external_trainer).
  std::string trainer_endpoint() const { return "unix:" + dir_ + "/trainer.sock"; }
  // The campaign PKI directory and the TLS files of one identity (issued for
  // the orchestrator, the MUX, every holder, "operator" and "scheduler").
  std::string tls_dir() const { return dir_ + "/pki/tls"; }
  TlsFiles tls(const Identity& id) const;
  const std::vector<std::string>& holder_names() const { return holder_names_; }
  // Where daemon `name` ("orchestrator", "mux", a holder) serves its
  // metrics (StackOptions::metrics), from its ready file.
  absl::StatusOr<std::string> metrics_address(const std::string& name) const;
  // Every daemon's log file, by daemon name.
  std::map<std::string, std::string> logs() const;
  Subprocess* process(const std::string& name);

  static constexpr char kGpuSerial[] = "EMU-H100-0001";
  static constexpr char kOrchestratorDomain[] = "orchestrator";

 private:
  EmulatedStack() = default;
  absl::Status Launch(const std::string& name, const std::string& binary,
                      const std::string& config);
  absl::Status WaitReady(const std::string& name);
  // The address `name` serves (from its ready file). A daemon asked for
  // 127.0.0.1:0 gets that address written into its configuration, so a
  // restart listens where its peers already look.
  absl::StatusOr<std::string> Served(const std::string& name, nlohmann::json* config);
  // What a daemon listens on: a Unix socket in the directory, or 127.0.0.1:0.
  std::string ListenAddress(const std::string& socket_name) const;

  StackOptions options_;
  std::string dir_, bin_dir_;
  std::string mux_endpoint_, orchestrator_endpoint_;
  DevPki pki_;
  std::vector<std::string> holder_names_;
  std::vector<StackHolder> holders_;  // every holder of the campaign
  std::map<std::string, std::pair<std::string, std::string>> launch_;  // binary, config
  std::vector<std::pair<std::string, std::unique_ptr<Subprocess>>> procs_;
};

// Directory holding the daemons: --bin_dir, else the Bazel runfiles of this
// program, else the directory of this program (installed layout).
absl::StatusOr<std::string> FindDaemonDir(const std::string& override_dir);

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_EMULATED_STACK_H_
