#include "tests/key_keeping_holder.h"

#include <algorithm>
#include <cstring>

#include "auth/tls_config.h"
#include "device/h2d_writer.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/handoff.h"
#include "keyxfer/report_seal.h"
#include "keyxfer/runtime_measurement.h"
#include "keyxfer/runtime_policy.h"
#include "keyxfer/x509.h"
#include "proto/device.grpc.pb.h"
#include "proto/mux.grpc.pb.h"
#include "trainer/synthetic_corpus.h"
#include "trainer/training_policy.h"
#include "util/files.h"
#include "util/grpc_status.h"
#include "util/hex.h"

namespace gputravel {
namespace {

// What this holder "trusts", measured as a daemon measures itself, so that
// its evidence carries RTMR3 events the orchestrator can pin.
absl::StatusOr<RuntimeMeasurement> Measurement(const std::string& name) {
  return MeasureDaemon("key_keeping_holder", "/proc/self/exe", nlohmann::json{{"name", name}},
                       "key_keeping_holder");
}

}  // namespace

void KeyKeepingHolder::AddTo(StackOptions* o, const std::string& name, const std::string& dir) {
  auto self = MeasureFile("/proc/self/exe");
  o->extra_holders.push_back(
      StackHolder{name, "unix:" + dir + "/" + name + ".sock", "td-" + name, name + "-data"});
  if (self.ok()) o->extra_holder_mrtd_hex.push_back(HexEncode(*self));
  auto m = Measurement(name);
  if (m.ok()) {
    o->extra_holder_binary_event_hex.push_back(HexEncode(m->events[kRtmr3BinaryEvent]));
    o->extra_holder_config_event_hex.push_back(HexEncode(m->events[kRtmr3ConfigEvent]));
  }
}

absl::StatusOr<std::unique_ptr<KeyKeepingHolder>> KeyKeepingHolder::Serve(
    EmulatedStack* stack, const std::string& name, const std::string& dir) {
  std::unique_ptr<KeyKeepingHolder> h(new KeyKeepingHolder());
  h->name_ = name;
  h->domain_ = "td-" + name;
  h->dir_ = dir;
  h->shared_dir_ = stack->shared_dir(h->domain_);
  h->device_endpoint_ = stack->device_socket(h->domain_);
  auto self = MeasureFile("/proc/self/exe");
  if (!self.ok()) return self.status();
  const DevPki& pki = stack->pki();
  auto key_pem = ReadFile(pki.domains.at(h->domain_).key);
  auto cert_pem = ReadFile(pki.domains.at(h->domain_).cert);
  auto root_pem = ReadFile(pki.attestation_root);
  if (!key_pem.ok() || !cert_pem.ok() || !root_pem.ok()) {
    return absl::InternalError("dev attestation files missing");
  }
  auto key = EcKey::FromPrivatePem(*key_pem);
  auto cert = CertificatePemToDer(*cert_pem);
  auto root = CertificatePemToDer(*root_pem);
  if (!key.ok() || !cert.ok() || !root.ok()) return absl::InternalError("bad dev PKI");
  auto measurement = Measurement(name);
  if (!measurement.ok()) return measurement.status();
  auto attester =
      DevAttester::Create(h->domain_, std::move(*key), *cert, *self, measurement->rtmr3);
  if (!attester.ok()) return attester.status();
  h->attester_ = std::make_unique<MeasuredAttester>(std::move(*attester), *measurement);
  h->verifier_ = std::make_unique<DevVerifier>(*root, DevPolicy{});
  auto creds = MakeServerCredentials(stack->tls({kRoleHolder, name}));
  if (!creds.ok()) return creds.status();
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + dir + "/" + name + ".sock", *creds);
  b.RegisterService(h.get());
  h->server_ = b.BuildAndStart();
  if (!h->server_) return absl::UnavailableError("cannot serve the key-keeping holder");
  return h;
}

KeyKeepingHolder::~KeyKeepingHolder() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

grpc::Status KeyKeepingHolder::GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                                       v1::HolderInfo* out) {
  out->set_name(name_);
  out->set_dataset_bytes(1 << 20);
  out->set_dataset_format("raw");
  out->set_dataset_name(name_ + "-data");
  out->set_domain(domain_);
  // Any policy an agent may state; this one allows short windows and a loss
  // per trip, so the other holders' policies decide the campaign's terms.
  v1::TrainingPolicy policy = DefaultTrainingPolicy();
  policy.set_min_window_bytes(4096);
  policy.set_min_windows_per_loss(1);
  *out->mutable_training_policy() = policy;
  return grpc::Status::OK;
}

grpc::Status KeyKeepingHolder::OpenChannel(grpc::ServerContext*,
                                           const v1::OpenChannelRequest* req,
                                           v1::OpenChannelResponse* out) {
  auto r = ChannelResponder::Respond(req->orchestrator_public_key(),
                                     req->orchestrator_nonce(), *attester_);
  if (!r.ok()) return ToGrpc(r.status());
  out->set_channel_id("c");
  out->set_holder_public_key(r->public_key());
  out->set_holder_nonce(r->nonce());
  *out->mutable_evidence() = r->evidence();
  absl::MutexLock l(&mu_);
  responder_ = std::make_unique<ChannelResponder>(std::move(*r));
  return grpc::Status::OK;
}

grpc::Status KeyKeepingHolder::Provision(grpc::ServerContext*, const v1::ProvisionRequest* req,
                                         grpc::ServerWriter<v1::ProvisionUpdate>* out) {
  absl::MutexLock l(&mu_);
  if (!responder_) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no channel");
  auto ch = responder_->Confirm(req->orchestrator_evidence(), *verifier_);
  if (!ch.ok()) return ToGrpc(ch.status());
  auto keys = UnwrapHandoff(ch->handoff_key, req->binding(), req->wrapped_handoff());
  if (!keys.ok()) return ToGrpc(keys.status());
  const v1::HandoffBinding& b = req->binding();
  Kept kept;
  for (const ChannelMaterial& k : *keys) kept.keys.push_back(k.Clone());
  kept.binding = b;
  kept_.push_back(std::move(kept));
  if (before_write_) before_write_(b);
  // Real-looking text, so a campaign's model is not thrown off by it.
  std::vector<uint16_t> tokens = GenerateCorpus(b.trip(), b.window_length() / 2 + 1);
  std::string data(reinterpret_cast<const char*>(tokens.data()), b.window_length());
  for (Aim aim : aims_) {
    if (aim != Aim::kPastWindow) TryAim(aim, b, *keys, data);
  }
  H2dWriterOptions wo;
  wo.chunk_size = b.chunk_size();
  wo.bounce_dir = shared_dir_;
  H2dWriter w(MakeChannel(device_endpoint_), wo);
  const std::vector<H2dLaneWrite> lanes = LaneWrites({b.lanes().begin(), b.lanes().end()}, *keys);
  CopyingSource src([&data](uint64_t off, uint8_t* dst, size_t n) {
    std::memcpy(dst, data.data() + off, n);
    return absl::OkStatus();
  });
  auto stats = w.Write(lanes, b.gpu_session(), b.buffer_id(), 0, data.size(), src);
  if (!stats.ok()) return ToGrpc(stats.status());
  for (Aim aim : aims_) {
    if (aim == Aim::kPastWindow) TryAim(aim, b, *keys, data);
  }
  if (after_write_) after_write_(req->binding());
  v1::ProvisionReport rep;
  rep.set_bytes(stats->bytes);
  rep.set_chunks(stats->chunks);
  rep.set_digest(stats->digest);
  rep.set_seconds(stats->total_seconds);
  auto sealed = SealReport(ch->report_key, req->binding(), rep);
  if (!sealed.ok()) return ToGrpc(sealed.status());
  if (report_) report_(req->binding(), rep, &*sealed);
  v1::ProvisionUpdate u;
  u.set_sealed_report(*sealed);
  out->Write(u);
  return grpc::Status::OK;
}

void KeyKeepingHolder::TryAim(Aim aim, const v1::HandoffBinding& b,
                              const std::vector<ChannelMaterial>& keys, const std::string& data) {
  H2dWriterOptions wo;
  wo.chunk_size = b.chunk_size();
  wo.bounce_dir = shared_dir_;
  H2dWriter w(MakeChannel(device_endpoint_), wo);
  for (int i = 0; i < b.lanes_size(); ++i) {
    const v1::H2dLane& l = b.lanes(i);
    uint64_t buffer = b.buffer_id();
    uint64_t at = l.offset();
    uint32_t counter = l.first_counter();
    const uint64_t n = std::min<uint64_t>(l.length(), wo.chunk_size);
    if (aim == Aim::kPastWindow) {
      counter += l.counter_count();
    } else if (aim == Aim::kOtherBuffer) {
      buffer += 1000;  // a buffer it was not handed (another holder's, or none)
      at = 0;
    } else {
      // Another lane's first bytes, or (one lane) just past the window.
      at = b.lanes_size() > 1 ? b.lanes((i + 1) % b.lanes_size()).offset()
                              : (b.window_length() + 31) / 32 * 32;
    }
    std::vector<H2dLaneWrite> one{
        H2dLaneWrite{l.copy_engine(), &keys[i], CounterWindow{counter, 1}, 0, n}};
    CopyingSource src([&data, &l](uint64_t off, uint8_t* dst, size_t len) {
      std::memcpy(dst, data.data() + l.offset() + off, len);
      return absl::OkStatus();
    });
    aimed_.push_back(w.Write(one, b.gpu_session(), buffer, at, n, src).status());
  }
}

std::vector<KeyKeepingHolder::Kept> KeyKeepingHolder::kept() {
  absl::MutexLock l(&mu_);
  std::vector<Kept> out;
  for (const auto& k : kept_) {
    Kept c;
    for (const ChannelMaterial& key : k.keys) c.keys.push_back(key.Clone());
    c.binding = k.binding;
    out.push_back(std::move(c));
  }
  return out;
}

absl::StatusOr<KeyKeepingHolder::Attempts> KeyKeepingHolder::TryKeptKeys(EmulatedStack* stack) {
  // The host controls the MUX; the test borrows the orchestrator's
  // credentials to play the malicious host.
  auto channel = MakeSecureChannel(stack->mux_endpoint(),
                                   stack->tls({kRoleOrchestrator, "orchestrator"}),
                                   Identity{kRoleMux, "mux"});
  if (!channel.ok()) return channel.status();
  auto mux = v1::Mux::NewStub(*channel);
  v1::RouteRequest rr;
  rr.set_gpu("gpu0");
  rr.set_domain(domain_);
  // Far ahead of the orchestrator's tokens, within the MUX's bound (2^32 above
  // the last accepted).
  rr.set_fencing_token(1ull << 31);
  v1::RouteResponse rresp;
  grpc::ClientContext rctx;
  absl::Status s = FromGrpc(mux->Route(&rctx, rr, &rresp), "MUX Route");
  if (!s.ok()) return s;
  auto admin = v1::DeviceAdmin::NewStub(MakeChannel(stack->device_admin_endpoint()));
  v1::DeviceStatus status;
  grpc::ClientContext sctx;
  s = FromGrpc(admin->GetStatus(&sctx, {}, &status), "device GetStatus");
  if (!s.ok()) return s;
  Attempts a;
  auto fill = [](uint64_t, uint8_t* dst, size_t n) {
    std::memset(dst, 0x5A, n);
    return absl::OkStatus();
  };
  for (const Kept& k : kept()) {
    H2dWriterOptions wo;
    wo.chunk_size = k.binding.chunk_size();
    wo.bounce_dir = shared_dir_;
    H2dWriter w(MakeChannel(device_endpoint_), wo);
    for (int i = 0; i < k.binding.lanes_size(); ++i) {
      const v1::H2dLane& l = k.binding.lanes(i);
      const uint32_t next = l.first_counter() + l.counter_count();
      // At its own session, and claiming the current one, at guessed counters.
      for (uint64_t session : {k.binding.gpu_session(), status.session_id()}) {
        for (uint32_t counter : {1u, 2u, next}) {
          std::vector<H2dLaneWrite> one{H2dLaneWrite{l.copy_engine(), &k.keys[i],
                                                     CounterWindow{counter, 1}, 0,
                                                     std::min<uint64_t>(wo.chunk_size,
                                                                        l.length())}};
          CopyingSource src(fill);
          auto st = w.Write(one, session, k.binding.buffer_id(), l.offset(), one[0].length, src);
          if (st.ok()) {
            ++a.accepted;
          } else if (absl::IsFailedPrecondition(st.status())) {
            ++a.old_session_refused;
          } else if (absl::IsUnauthenticated(st.status())) {
            ++a.tag_refused;
          } else {
            ++a.other;
          }
        }
      }
    }
  }
  return a;
}

}  // namespace gputravel
