#include "bench/device_rig.h"

#include <stdlib.h>
#include <unistd.h>

#include "keyxfer/ec_key.h"
#include "keyxfer/x509.h"
#include "util/grpc_status.h"

namespace gputravel {
namespace bench {
namespace {

constexpr char kSerial[] = "EMU-BENCH-0001";

std::unique_ptr<grpc::Server> ServeOn(const std::string& socket_path,
                                      grpc::Service* service) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceRig>> DeviceRig::Start(
    uint64_t memory_bytes, const std::string& holder_shared_dir,
    const std::string& orch_shared_dir) {
  std::unique_ptr<DeviceRig> rig(new DeviceRig());
  char tmpl[] = "/tmp/gputravel-bench-XXXXXX";  // short: socket paths are limited
  if (::mkdtemp(tmpl) == nullptr) {
    return absl::UnavailableError("cannot create a temporary directory");
  }
  rig->dir_ = tmpl;

  auto ca = EcKey::Generate(Curve::kP384);
  if (!ca.ok()) return ca.status();
  auto ca_der = IssueCertificate(*ca, "bench-device-ca", *ca, "", true, 1);
  if (!ca_der.ok()) return ca_der.status();
  rig->ca_der_ = *ca_der;
  auto identity = EcKey::Generate(Curve::kP384);
  if (!identity.ok()) return identity.status();
  auto cert = IssueCertificate(*identity, kSerial, *ca, rig->ca_der_, false, 1);
  if (!cert.ok()) return cert.status();

  EmulatedGpuOptions options;
  options.serial = kSerial;
  options.memory_bytes = memory_bytes;
  options.shared_dirs["holder"] = holder_shared_dir;
  if (!orch_shared_dir.empty()) options.shared_dirs["orch"] = orch_shared_dir;
  rig->holder_shared_dir_ = holder_shared_dir;
  rig->gpu_ = std::make_unique<EmulatedGpu>(options, std::move(*identity), *cert);
  rig->orch_service_ = std::make_unique<DeviceServiceImpl>(rig->gpu_.get(), "orch");
  rig->holder_service_ = std::make_unique<DeviceServiceImpl>(rig->gpu_.get(), "holder");
  rig->orch_server_ = ServeOn(rig->dir_ + "/orch.sock", rig->orch_service_.get());
  rig->holder_server_ = ServeOn(rig->dir_ + "/holder.sock", rig->holder_service_.get());
  if (rig->orch_server_ == nullptr || rig->holder_server_ == nullptr) {
    return absl::UnavailableError("cannot listen on the rig's Unix sockets in " + rig->dir_);
  }
  rig->gpu_->SetOwner("orch");
  rig->session_ = std::make_unique<GpuSession>(MakeChannel(rig->orch_endpoint()),
                                               rig->ca_der_, kSerial);
  absl::Status s = rig->session_->Establish();
  if (!s.ok()) return s;
  rig->holder_channel_ = MakeChannel(rig->holder_endpoint());
  rig->orch_channel_ = MakeChannel(rig->orch_endpoint());
  return rig;
}

DeviceRig::~DeviceRig() {
  session_.reset();
  holder_channel_.reset();
  orch_channel_.reset();
  for (auto* server : {orch_server_.get(), holder_server_.get()}) {
    if (server != nullptr) server->Shutdown();
  }
  if (gpu_ != nullptr) gpu_->Reset();
  if (!dir_.empty()) {
    ::unlink((dir_ + "/orch.sock").c_str());
    ::unlink((dir_ + "/holder.sock").c_str());
    ::rmdir(dir_.c_str());
  }
}

absl::StatusOr<uint64_t> DeviceRig::ResetAndAlloc(uint64_t bytes) {
  RouteHome();
  gpu_->Reset();
  absl::Status s = session_->Establish();
  if (!s.ok()) return s;
  return session_->AllocBuffer(bytes);
}

absl::StatusOr<RigHandoff> DeviceRig::HandToHolder(uint32_t engines) {
  auto h = KeyForOrchestrator(engines);
  if (h.ok()) gpu_->SetOwner("holder");
  return h;
}

absl::StatusOr<RigHandoff> DeviceRig::KeyForOrchestrator(uint32_t engines) {
  RouteHome();
  absl::Status s = session_->Establish();
  if (!s.ok()) return s;
  auto key = session_->H2dKeysForHandoff(engines);
  if (!key.ok()) return key.status();
  RigHandoff h;
  h.key = (*key)[0].Clone();
  h.keys = std::move(*key);
  h.session_id = session_->session_id();
  h.next_counter = kFirstMessageCounter;  // a hand-off's window starts there
  return h;
}

}  // namespace bench
}  // namespace gputravel
