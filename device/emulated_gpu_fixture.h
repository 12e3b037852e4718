#ifndef GPUTRAVEL_DEVICE_EMULATED_GPU_FIXTURE_H_
#define GPUTRAVEL_DEVICE_EMULATED_GPU_FIXTURE_H_

// Tests only: an emulated GPU driven directly, as a driver would, with real
// keys, one bounce ring and one device buffer, plus a gRPC front end for the
// streaming doorbell (the holder's domain socket).

#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "device/bounce_buffer.h"
#include "device/d2h_receiver.h"
#include "device/device_service.h"
#include "device/emulated_gpu.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "device/exchange_transcript.h"
#include "keyxfer/device_session.h"
#include "keyxfer/random.h"
#include "keyxfer/x509.h"
#include "util/grpc_status.h"
#include "util/test_dir.h"

namespace gputravel {
namespace testing_fixture {

inline constexpr char kOwner[] = "holder";

class EmulatedGpuFixture : public ::testing::Test {
 protected:
  static constexpr uint32_t kSlots = 4;
  static constexpr uint32_t kSlotSize = 4096;
  static constexpr uint64_t kBufferBytes = 8192;

  void SetUp() override { Start(EmulatedGpuOptions()); }
  void TearDown() override { Stop(); }

  // (Re)starts the device with `o` (serial and memory are filled in).
  void Start(EmulatedGpuOptions o) {
    Stop();
    auto ca = *EcKey::Generate(Curve::kP384);
    ca_der_ = *IssueCertificate(ca, "ca", ca, "", true, 1);
    auto id = *EcKey::Generate(Curve::kP384);
    auto cert = *IssueCertificate(id, "EMU-1", ca, ca_der_, false, 1);
    cert_der_ = cert;
    o.serial = "EMU-1";
    o.memory_bytes = memory_bytes_;
    dir_ = MakeSocketTestDir("gputravel-gpuf-");
    o.shared_dirs[kOwner] = dir_;  // the holder's shared memory: its rings live here
    gpu_ = std::make_unique<EmulatedGpu>(o, std::move(id), cert);
    gpu_->SetOwner(kOwner);
    Establish();
    bounce_ = *BounceBuffer::Create(dir_ + "/bounce", kSlots, slot_size_);
    Attach();
    buffer_ = Alloc(buffer_bytes_);
  }
  void Stop() {
    if (server_ != nullptr) server_->Shutdown();
    server_.reset();
    service_.reset();
    gpu_.reset();
    bounce_.reset();
    if (!dir_.empty()) {
      unlink((dir_ + "/holder.sock").c_str());
      rmdir(dir_.c_str());
      dir_.clear();
    }
  }

  // The holder's domain socket in front of the device.
  std::shared_ptr<grpc::Channel> Serve() {
    service_ = std::make_unique<DeviceServiceImpl>(gpu_.get(), kOwner);
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_ + "/holder.sock", grpc::InsecureServerCredentials());
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    return MakeChannel("unix:" + dir_ + "/holder.sock");
  }

  // Seals `cmd` under the current session as `req`'s prior_command; with
  // `keep`, together with the authorisation to keep device memory for
  // exactly `req`.
  void RideOn(v1::KeyExchangeRequest* req, v1::DeviceCommand cmd, bool keep) {
    if (keep) {
      cmd.mutable_keep_memory()->set_requester_public_key(req->requester_public_key());
      cmd.mutable_keep_memory()->set_requester_nonce(req->requester_nonce());
    }
    v1::SealedMessage* p = req->mutable_prior_command();
    p->set_session_id(session_);
    p->set_ciphertext(
        *control_->Seal(ControlAad(true, session_), cmd.SerializeAsString(), nullptr));
  }
  // A fresh session. With `keep` (the owner's re-key) and a session in
  // force, device memory is kept; without, it is wiped.
  void Establish(bool keep = true) {
    auto eph = *EcKey::Generate(Curve::kP384);
    v1::KeyExchangeRequest req;
    req.set_requester_public_key(eph.PublicPoint());
    req.set_requester_nonce(RandomString(32));
    if (keep && control_ != nullptr) RideOn(&req, v1::DeviceCommand(), true);
    auto resp = gpu_->KeyExchange(kOwner, req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    std::string t = ExchangeTranscript("EMU-1", req, *resp);
    secret_ = *DeviceSessionSecret(*eph.DeriveSharedSecret(resp->device_public_key()), t);
    keys_ = *ExpandDeviceSessionKeys(secret_);
    control_ = *SealedChannel::Create(keys_.gsp_h2d, keys_.gsp_d2h);
    d2h_ = *D2hReceiver::Create(keys_.lce_d2h.Clone());
    session_ = resp->session_id();
  }
  // Replaces the device with one made with `o` (serial, identity and shared
  // memory filled in) in the same directory: a fresh session, the ring
  // attached again and a buffer of `buffer_bytes`.
  void Restart(EmulatedGpuOptions o, uint64_t buffer_bytes) {
    auto ca = *EcKey::Generate(Curve::kP384);
    auto ca_der = *IssueCertificate(ca, "ca", ca, "", true, 1);
    auto id = *EcKey::Generate(Curve::kP384);
    auto cert = *IssueCertificate(id, "EMU-1", ca, ca_der, false, 1);
    o.serial = "EMU-1";
    o.shared_dirs[kOwner] = dir_;
    gpu_ = std::make_unique<EmulatedGpu>(o, std::move(id), cert);
    gpu_->SetOwner(kOwner);
    Establish();
    Attach();
    buffer_ = Alloc(buffer_bytes);
  }
  // A device reply's code, or the call's.
  absl::StatusCode Code(const absl::StatusOr<v1::DeviceReply>& r) {
    if (!r.ok()) return r.status().code();
    return static_cast<absl::StatusCode>(r->code());
  }
  void Attach() {
    v1::AttachBounceRequest ab;
    ab.set_path(bounce_->path());
    ab.set_slots(kSlots);
    ab.set_slot_size(slot_size_);
    bounce_id_ = *gpu_->AttachBounce(kOwner, ab);
  }

  absl::StatusOr<v1::DeviceReply> Command(const v1::DeviceCommand& cmd) {
    v1::SealedMessage req;
    req.set_session_id(session_);
    req.set_ciphertext(
        *control_->Seal(ControlAad(true, session_), cmd.SerializeAsString(), nullptr));
    auto resp = gpu_->Control(kOwner, req);
    if (!resp.ok()) return resp.status();
    auto plain = control_->Open(ControlAad(false, session_), resp->ciphertext());
    if (!plain.ok()) return plain.status();
    v1::DeviceReply r;
    r.ParseFromString(*plain);
    if (r.code() != 0) return r;
    // Read-backs come as the copy engine's D2H copy, opened in order here.
    absl::Status d = d2h_.Open(cmd, session_, resp->d2h_copy(), &r);
    if (!d.ok()) return d;
    return r;
  }
  uint64_t Alloc(uint64_t size) {
    v1::DeviceCommand c;
    c.mutable_alloc()->set_size(size);
    return Command(c)->buffer_id();
  }
  std::string Read(uint64_t off, uint64_t len) {
    v1::DeviceCommand c;
    c.mutable_read()->set_buffer_id(buffer_);
    c.mutable_read()->set_offset(off);
    c.mutable_read()->set_length(len);
    return Command(c)->data();
  }
  absl::Status Scrub() {
    v1::DeviceCommand c;
    c.mutable_scrub()->set_buffer_id(buffer_);
    auto r = Command(c);
    if (!r.ok()) return r.status();
    return r->code() == 0 ? absl::OkStatus()
                          : absl::Status(static_cast<absl::StatusCode>(r->code()), r->message());
  }
  absl::Status Free() {
    v1::DeviceCommand c;
    c.mutable_free()->set_buffer_id(buffer_);
    auto r = Command(c);
    if (!r.ok()) return r.status();
    return r->code() == 0 ? absl::OkStatus()
                          : absl::Status(static_cast<absl::StatusCode>(r->code()), r->message());
  }

  // Grants copy engine `engine`'s H2D slot bytes [offset, +length) of
  // `buffer` at counters up to `last` (GrantH2dCommand); the device's reply.
  absl::StatusOr<v1::DeviceReply> Grant(uint32_t engine, uint64_t buffer, uint64_t offset,
                                        uint64_t length, uint32_t last) {
    v1::DeviceCommand c;
    v1::H2dGrant* g = c.mutable_grant_h2d()->add_grants();
    g->set_copy_engine(engine);
    g->set_buffer_id(buffer);
    g->set_offset(offset);
    g->set_length(length);
    g->set_last_counter(last);
    return Command(c);
  }
  // The session's count of chunks refused under a grant that authenticated
  // (sealed in every reply).
  uint64_t GrantRefusals() {
    v1::DeviceCommand q;
    q.mutable_query();
    auto r = Command(q);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->h2d_grant_refusals() : ~uint64_t{0};
  }

  // Encrypts `data` for (counter, buffer, offset) with `key` into `slot`,
  // for copy engine `engine`; returns the doorbell request.
  v1::SubmitH2DRequest StageAt(const ChannelMaterial& key, uint32_t engine, uint32_t counter,
                               uint32_t slot, uint64_t buffer, uint64_t offset,
                               const std::string& data) {
    v1::SubmitH2DRequest r = StageOn(key, counter, slot, buffer, offset, data);
    r.set_copy_engine(engine);
    return r;
  }

  // Encrypts `data` for (counter, offset) with `key` into `slot`; returns the
  // doorbell request.
  v1::SubmitH2DRequest Stage(const ChannelMaterial& key, uint32_t counter, uint32_t slot,
                             uint64_t offset, const std::string& data) {
    return StageOn(key, counter, slot, buffer_, offset, data);
  }
  v1::SubmitH2DRequest StageOn(const ChannelMaterial& key, uint32_t counter, uint32_t slot,
                               uint64_t buffer, uint64_t offset, const std::string& data) {
    auto c = *ChannelCipher::Create(key);
    std::string aad = ChunkAad(session_, buffer, offset, data.size());
    uint8_t tag[16];
    EXPECT_TRUE(c->Encrypt(counter, reinterpret_cast<const uint8_t*>(aad.data()),
                           aad.size(), reinterpret_cast<const uint8_t*>(data.data()),
                           data.size(), bounce_->slot(slot), tag)
                    .ok());
    v1::SubmitH2DRequest r;
    r.set_bounce_id(bounce_id_);
    r.set_slot(slot);
    r.set_buffer_id(buffer);
    r.set_offset(offset);
    r.set_length(data.size());
    std::memcpy(bounce_->tag(slot), tag, 16);  // where the copy engine reads it
    r.set_tag_offset(bounce_->tag_offset(slot));
    r.set_session_id(session_);
    return r;
  }

  // The geometry Start() uses; a test may change it before calling Start().
  uint32_t slot_size_ = kSlotSize;
  uint64_t buffer_bytes_ = kBufferBytes;
  uint64_t memory_bytes_ = 1 << 20;

  std::string ca_der_, cert_der_, dir_;
  std::unique_ptr<EmulatedGpu> gpu_;
  SecretBytes secret_;  // the session secret: every copy engine's keys
  DeviceSessionKeys keys_;
  std::unique_ptr<SealedChannel> control_;
  D2hReceiver d2h_;
  uint64_t session_ = 0, bounce_id_ = 0, buffer_ = 0;
  std::unique_ptr<BounceBuffer> bounce_;
  std::unique_ptr<DeviceServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace testing_fixture
}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_EMULATED_GPU_FIXTURE_H_
