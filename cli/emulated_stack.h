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
#include "cli/deployment.h"
#include "cli/dev_pki.h"
#include "nlohmann/json.hpp"
#include "proto/orchestrator.grpc.pb.h"
#include "util/subprocess.h"

namespace gputravel {

// The deployment the stack writes (cli/deployment.h), and how it runs it.
struct StackOptions : DeploymentOptions {
  int log_level = 1;  // the daemons' --v
  bool keep = false;  // keep the temporary directory (logs, configs)
};

// The whole emulated deployment on one machine, as real processes talking
// real gRPC over Unix sockets (or, with tcp_loopback, over TCP on 127.0.0.1
// for the network links): the emulated GPU, the MUX (emulated backend), one
// holder_agent per holder and the orchestrator, started from the files
// WriteDeployment (cli/deployment.h) wrote, as `gputravel init` writes them.
// A campaign CA (auth/pki.h) issues a certificate per identity and every
// connection except the emulated PCIe bus is mTLS; development attestation
// is enabled explicitly in each configuration, and the orchestrator and the
// holders pin each other's RTMR3 events (keyxfer/runtime_measurement.h). The
// destructor stops every process and removes a temporary directory (unless
// keep).
class EmulatedStack {
 public:
  // Writes a deployment to a fresh temporary directory and starts it.
  static absl::StatusOr<std::unique_ptr<EmulatedStack>> Start(StackOptions options);
  // Starts the daemons of the deployment in `dir` (`gputravel init`), in
  // order, each once the one before serves; the directory is never removed.
  static absl::StatusOr<std::unique_ptr<EmulatedStack>> StartDeployment(const std::string& dir,
                                                                        int log_level);
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

  const std::string& dir() const { return deployment_.dir; }
  const Deployment& deployment() const { return deployment_; }
  const DevPki& pki() const { return pki_; }
  std::string device_socket(const std::string& domain) const {
    return deployment_.device_socket(domain);
  }
  // A holder domain's shared memory: the directory its bounce rings go in,
  // and the only one the GPU maps rings from while routed to that domain.
  std::string shared_dir(const std::string& domain) const {
    return deployment_.shared_dir(domain);
  }
  const std::string& mux_endpoint() const { return deployment_.mux_endpoint; }
  std::string device_admin_endpoint() const { return deployment_.device_admin_endpoint(); }
  const std::string& orchestrator_endpoint() const { return deployment_.orchestrator_endpoint; }
  // The Trainer service's Unix socket (with StackOptions::external_trainer).
  std::string trainer_endpoint() const { return deployment_.trainer_endpoint(); }
  // The campaign PKI directory and the TLS files of one identity (issued for
  // the orchestrator, the MUX, every holder, "operator" and "scheduler").
  std::string tls_dir() const { return deployment_.tls_dir(); }
  TlsFiles tls(const Identity& id) const { return deployment_.tls(id); }
  const std::vector<std::string>& holder_names() const { return holder_names_; }
  // Where daemon `name` ("orchestrator", "mux", a holder) serves its
  // metrics (StackOptions::metrics), from its ready file.
  absl::StatusOr<std::string> metrics_address(const std::string& name) const;
  // Every daemon's log file, by daemon name.
  std::map<std::string, std::string> logs() const;
  Subprocess* process(const std::string& name);

  static constexpr const char* kGpuSerial = kEmulatedGpuSerial;
  static constexpr const char* kOrchestratorDomain = gputravel::kOrchestratorDomain;

 private:
  EmulatedStack() = default;
  // Starts every daemon of deployment_ in order, learning the addresses
  // they chose (tcp_loopback).
  absl::Status LaunchAll();
  absl::Status Launch(const std::string& name, const std::string& binary,
                      const std::string& config);
  absl::Status WaitReady(const std::string& name);
  // The address `name` serves (from its ready file). A daemon asked for
  // 127.0.0.1:0 gets that address written into its configuration, so a
  // restart listens where its peers already look.
  absl::StatusOr<std::string> Served(const std::string& name);

  StackOptions options_;
  bool owns_dir_ = false;  // a temporary directory, removed unless keep
  Deployment deployment_;
  DevPki pki_;
  std::vector<std::string> holder_names_;
  std::map<std::string, std::pair<std::string, std::string>> launch_;  // binary, config
  std::vector<std::pair<std::string, std::unique_ptr<Subprocess>>> procs_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_CLI_EMULATED_STACK_H_
