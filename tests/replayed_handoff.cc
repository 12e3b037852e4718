#include "tests/replayed_handoff.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "auth/identity.h"
#include "auth/tls_config.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/handoff.h"
#include "keyxfer/handoff_lanes.h"
#include "keyxfer/random.h"
#include "keyxfer/runtime_measurement.h"
#include "keyxfer/runtime_policy.h"
#include "keyxfer/x509.h"
#include "proto/holder.grpc.pb.h"
#include "util/files.h"

namespace gputravel {
namespace {

// The binary and configuration the deployment runs `daemon` from.
const DeploymentDaemon* DaemonOf(const Deployment& d, const std::string& daemon) {
  for (const auto& dm : d.daemons) {
    if (dm.name == daemon) return &dm;
  }
  return nullptr;
}

grpc::Status Internal(const std::string& step, const absl::Status& s) {
  return grpc::Status(grpc::StatusCode::INTERNAL,
                      "replaying orchestrator: " + step + ": " + std::string(s.message()));
}

// The orchestrator's attester, as the orchestrator daemon builds it from its
// configuration (keyxfer/attestation_config.h, development backend), but
// with the orchestrator's binary measured instead of this test's.
absl::StatusOr<std::unique_ptr<Attester>> OrchestratorAttester(const Deployment& d) {
  const DeploymentDaemon* orch = DaemonOf(d, "orchestrator");
  if (orch == nullptr) return absl::NotFoundError("the deployment has no orchestrator");
  auto config = ReadJsonFile(orch->config);
  if (!config.ok()) return config.status();
  auto measurement = MeasureDaemon("orchestrator", orch->program, *config, orch->config);
  if (!measurement.ok()) return measurement.status();
  auto mrtd = MeasureFile(orch->program);
  if (!mrtd.ok()) return mrtd.status();
  const nlohmann::json& att = (*config)["attestation"];
  auto key_pem = ReadFile(att.value("dev_key", ""));
  auto cert_pem = ReadFile(att.value("dev_cert", ""));
  if (!key_pem.ok()) return key_pem.status();
  if (!cert_pem.ok()) return cert_pem.status();
  auto key = EcKey::FromPrivatePem(*key_pem);
  if (!key.ok()) return key.status();
  auto cert = CertificatePemToDer(*cert_pem);
  if (!cert.ok()) return cert.status();
  auto attester =
      DevAttester::Create(kOrchestratorDomain, std::move(*key), *cert, *mrtd, measurement->rtmr3);
  if (!attester.ok()) return attester.status();
  return std::unique_ptr<Attester>(
      std::make_unique<MeasuredAttester>(std::move(*attester), std::move(*measurement)));
}

// What the orchestrator accepts as `holder`'s TD: the development root, and
// the agent's binary.
absl::StatusOr<std::unique_ptr<Verifier>> HolderVerifier(const EmulatedStack& stack,
                                                         const std::string& holder) {
  const DeploymentDaemon* agent = DaemonOf(stack.deployment(), holder);
  if (agent == nullptr) return absl::NotFoundError("the deployment has no agent " + holder);
  auto mrtd = MeasureFile(agent->program);
  if (!mrtd.ok()) return mrtd.status();
  auto root_pem = ReadFile(stack.pki().attestation_root);
  if (!root_pem.ok()) return root_pem.status();
  auto root = CertificatePemToDer(*root_pem);
  if (!root.ok()) return root.status();
  DevPolicy policy;
  policy.allowed_mrtd = {*mrtd};
  return std::unique_ptr<Verifier>(std::make_unique<DevVerifier>(*root, policy));
}

}  // namespace

absl::StatusOr<v1::HandoffBinding> ReplayedBinding(const v1::Trip& trip,
                                                   const v1::HandoffBinding& like) {
  v1::HandoffBinding b;
  b.set_campaign(trip.campaign());
  b.set_trip(trip.id());
  b.set_gpu_serial(kEmulatedGpuSerial);
  b.set_gpu_session(trip.gpu_session());
  b.set_holder(trip.holder());
  b.set_buffer_id(like.buffer_id());
  b.set_window_offset(trip.window_offset());
  b.set_window_length(trip.window_length());
  b.set_chunk_size(like.chunk_size());
  auto lanes =
      PlanLanes(trip.window_length(), like.chunk_size(), static_cast<uint32_t>(like.lanes_size()));
  if (!lanes.ok()) return lanes.status();
  for (const v1::H2dLane& l : *lanes) *b.add_lanes() = l;
  *b.mutable_terms() = like.terms();
  return b;
}

grpc::Status ReplayHandoff(EmulatedStack* stack, const v1::HandoffBinding& binding) {
  const Deployment& d = stack->deployment();
  std::string endpoint;
  for (const auto& h : d.holders) {
    if (h.name == binding.holder()) endpoint = h.endpoint;
  }
  if (endpoint.empty()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "no holder " + binding.holder());
  }
  auto attester = OrchestratorAttester(d);
  if (!attester.ok()) return Internal("its attester", attester.status());
  auto verifier = HolderVerifier(*stack, binding.holder());
  if (!verifier.ok()) return Internal("its verifier", verifier.status());
  auto channel = MakeSecureChannel(endpoint, d.tls({kRoleOrchestrator, "orchestrator"}),
                                   Identity{kRoleHolder, binding.holder()});
  if (!channel.ok()) return Internal("its TLS channel", channel.status());
  auto agent = v1::HolderAgent::NewStub(*channel);
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(30); };

  // A new attested channel, as for every trip.
  auto init = ChannelInitiator::Create();
  if (!init.ok()) return Internal("its channel key", init.status());
  v1::OpenChannelRequest open;
  open.set_orchestrator_public_key(init->public_key());
  open.set_orchestrator_nonce(init->nonce());
  v1::OpenChannelResponse opened;
  grpc::ClientContext open_ctx;
  open_ctx.set_deadline(deadline());
  grpc::Status s = agent->OpenChannel(&open_ctx, open, &opened);
  if (!s.ok()) return s;
  v1::ProvisionRequest req;
  auto keys = init->Complete(opened.holder_public_key(), opened.holder_nonce(), opened.evidence(),
                             **verifier, **attester, req.mutable_orchestrator_evidence());
  if (!keys.ok()) return Internal("attesting the channel", keys.status());

  // Keys of the test's own, one per lane, wrapped for the binding.
  std::vector<ChannelMaterial> lane_keys;
  for (int i = 0; i < binding.lanes_size(); ++i) {
    ChannelMaterial k;
    k.key = SecretBytes::FromString(RandomString(32));
    lane_keys.push_back(std::move(k));
  }
  auto wrapped = WrapHandoff(keys->handoff_key, binding, lane_keys);
  if (!wrapped.ok()) return Internal("wrapping the hand-off", wrapped.status());
  req.set_channel_id(opened.channel_id());
  *req.mutable_binding() = binding;
  req.set_wrapped_handoff(*wrapped);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline());
  auto reader = agent->Provision(&ctx, req);
  v1::ProvisionUpdate u;
  while (reader->Read(&u)) {
  }
  return reader->Finish();
}

}  // namespace gputravel
