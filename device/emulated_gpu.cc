#include "device/emulated_gpu.h"

#include <cstring>

#include "keyxfer/random.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {
namespace {

constexpr uint64_t kAlignment = 32;

}  // namespace

EmulatedGpu::EmulatedGpu(EmulatedGpuOptions options, EcKey identity_key,
                         std::string certificate_der)
    : options_(std::move(options)),
      identity_key_(std::move(identity_key)),
      certificate_der_(std::move(certificate_der)) {}

absl::Time EmulatedGpu::Now() const {
  return options_.clock ? options_.clock() : absl::Now();
}

absl::Status EmulatedGpu::CheckOwnerLocked(const std::string& domain) {
  if (options_.heartbeat_period > absl::ZeroDuration() && session_ != nullptr &&
      Now() - last_heartbeat_ > 2 * options_.heartbeat_period) {
    // As the real GPU: a missed heartbeat ends the CC session for good.
    session_.reset();
    for (auto& b : buffers_) Zeroize(b.second.data(), b.second.size());
    needs_reset_ = true;
  }
  if (needs_reset_) {
    return absl::FailedPreconditionError(
        "GPU " + options_.serial + " missed its CC heartbeat and needs a reset "
        "(ask the MUX to reset it); its session and memory are gone");
  }
  if (domain.empty() || domain != owner_) {
    return absl::FailedPreconditionError(
        "GPU " + options_.serial + " is not routed to domain '" + domain +
        "'; ask the MUX to route it first");
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::DeviceIdentity> EmulatedGpu::GetIdentity(
    const std::string& domain) {
  absl::MutexLock l(&mu_);
  absl::Status s = CheckOwnerLocked(domain);
  if (!s.ok()) return s;
  v1::DeviceIdentity id;
  id.set_serial(options_.serial);
  id.set_certificate_der(certificate_der_);
  id.set_memory_bytes(options_.memory_bytes);
  return id;
}

absl::StatusOr<v1::KeyExchangeResponse> EmulatedGpu::KeyExchange(
    const std::string& domain, const v1::KeyExchangeRequest& request) {
  if (request.requester_nonce().size() != 32) {
    return absl::InvalidArgumentError("requester nonce must be 32 bytes");
  }
  auto eph = EcKey::Generate(Curve::kP384);
  if (!eph.ok()) return eph.status();
  auto secret = eph->DeriveSharedSecret(request.requester_public_key());
  if (!secret.ok()) return secret.status();
  std::string nonce = RandomString(32);
  absl::MutexLock l(&mu_);
  absl::Status s = CheckOwnerLocked(domain);
  if (!s.ok()) return s;
  uint64_t id = ++last_session_id_;
  std::string transcript = DeviceSessionTranscript(
      options_.serial, request.requester_public_key(), request.requester_nonce(),
      eph->PublicPoint(), nonce, id);
  auto keys = DeriveDeviceSessionKeys(*secret, transcript);
  if (!keys.ok()) return keys.status();
  auto sig = identity_key_.Sign(transcript);
  if (!sig.ok()) return sig.status();
  auto session = std::make_unique<Session>();
  session->id = id;
  auto control = SealedChannel::Create(keys->gsp_d2h, keys->gsp_h2d);
  if (!control.ok()) return control.status();
  session->control = std::move(*control);
  auto lce = ChannelCipher::Create(keys->lce_h2d);
  if (!lce.ok()) return lce.status();
  session->lce_h2d = std::move(*lce);
  // The old session, and with it every key a holder was handed, dies here;
  // the bounce rings staged for it are of no further use.
  session_ = std::move(session);
  bounces_.clear();
  last_heartbeat_ = Now();
  v1::KeyExchangeResponse resp;
  resp.set_device_public_key(eph->PublicPoint());
  resp.set_device_nonce(nonce);
  resp.set_signature_der(*sig);
  resp.set_session_id(id);
  return resp;
}

absl::StatusOr<v1::SealedMessage> EmulatedGpu::Control(
    const std::string& domain, const v1::SealedMessage& request) {
  absl::MutexLock l(&mu_);
  absl::Status s = CheckOwnerLocked(domain);
  if (!s.ok()) return s;
  if (session_ == nullptr || request.session_id() != session_->id) {
    return absl::FailedPreconditionError(
        "no such CC session on GPU " + options_.serial +
        " (it was replaced by a newer key exchange or wiped by a reset)");
  }
  auto plain = session_->control->Open(ControlAad(true, session_->id),
                                       request.ciphertext());
  if (!plain.ok()) {
    return absl::UnauthenticatedError(
        "control command refused: not sealed with this session's control key "
        "at the expected counter");
  }
  v1::DeviceCommand cmd;
  if (!cmd.ParseFromString(*plain)) {
    return absl::InvalidArgumentError("control command is malformed");
  }
  v1::DeviceReply reply = ExecuteLocked(cmd);
  std::string reply_bytes = reply.SerializeAsString();
  uint32_t counter = 0;
  auto sealed = session_->control->Seal(ControlAad(false, session_->id),
                                        reply_bytes, &counter);
  Zeroize(&reply_bytes[0], reply_bytes.size());
  if (!sealed.ok()) return sealed.status();
  v1::SealedMessage out;
  out.set_session_id(session_->id);
  out.set_counter(counter);
  out.set_ciphertext(std::move(*sealed));
  return out;
}

uint64_t EmulatedGpu::MemoryInUseLocked() const {
  uint64_t used = 0;
  for (const auto& b : buffers_) used += b.second.size();
  return used;
}

v1::DeviceReply EmulatedGpu::ExecuteLocked(const v1::DeviceCommand& cmd) {
  v1::DeviceReply r;
  auto fail = [&r](absl::StatusCode code, const std::string& msg) {
    r.set_code(static_cast<int>(code));
    r.set_message(msg);
    return r;
  };
  switch (cmd.command_case()) {
    case v1::DeviceCommand::kAlloc: {
      uint64_t size = cmd.alloc().size();
      if (size == 0 || size % kAlignment != 0) {
        return fail(absl::StatusCode::kInvalidArgument,
                    "buffer size must be a non-zero multiple of 32 bytes");
      }
      if (MemoryInUseLocked() + size > options_.memory_bytes) {
        return fail(absl::StatusCode::kResourceExhausted,
                    "device memory exhausted: " + std::to_string(size) +
                        " bytes asked, " +
                        std::to_string(options_.memory_bytes - MemoryInUseLocked()) +
                        " free");
      }
      uint64_t id = next_buffer_id_++;
      buffers_[id].assign(size, 0);
      r.set_buffer_id(id);
      return r;
    }
    case v1::DeviceCommand::kFree: {
      auto it = buffers_.find(cmd.free().buffer_id());
      if (it == buffers_.end()) {
        return fail(absl::StatusCode::kNotFound, "no such buffer");
      }
      Zeroize(it->second.data(), it->second.size());
      buffers_.erase(it);
      return r;
    }
    case v1::DeviceCommand::kRead: {
      const auto& rd = cmd.read();
      auto it = buffers_.find(rd.buffer_id());
      if (it == buffers_.end()) {
        return fail(absl::StatusCode::kNotFound, "no such buffer");
      }
      if (rd.offset() > it->second.size() ||
          rd.length() > it->second.size() - rd.offset() || rd.length() > (32u << 20)) {
        return fail(absl::StatusCode::kOutOfRange,
                    "read outside the buffer or larger than 32 MiB");
      }
      r.set_data(reinterpret_cast<const char*>(it->second.data() + rd.offset()),
                 rd.length());
      r.set_buffer_id(rd.buffer_id());
      return r;
    }
    case v1::DeviceCommand::kScrub: {
      auto it = buffers_.find(cmd.scrub().buffer_id());
      if (it == buffers_.end()) {
        return fail(absl::StatusCode::kNotFound, "no such buffer");
      }
      std::memset(it->second.data(), 0, it->second.size());
      r.set_bytes_scrubbed(it->second.size());
      r.set_buffer_id(it->first);
      return r;
    }
    case v1::DeviceCommand::kHeartbeat: {
      last_heartbeat_ = Now();
      return r;
    }
    case v1::DeviceCommand::kQuery: {
      r.set_h2d_next_counter(session_->h2d_next);
      r.set_h2d_chunks(session_->h2d_chunks);
      r.set_h2d_bytes(session_->h2d_bytes);
      return r;
    }
    default:
      return fail(absl::StatusCode::kInvalidArgument, "unknown control command");
  }
}

absl::StatusOr<uint64_t> EmulatedGpu::AttachBounce(
    const std::string& domain, const v1::AttachBounceRequest& request) {
  if (request.path().empty() || request.path()[0] != '/') {
    return absl::InvalidArgumentError("bounce buffer path must be absolute");
  }
  auto b = BounceBuffer::OpenReadOnly(request.path(), request.slots(),
                                      request.slot_size());
  if (!b.ok()) return b.status();
  absl::MutexLock l(&mu_);
  absl::Status s = CheckOwnerLocked(domain);
  if (!s.ok()) return s;
  uint64_t id = next_bounce_id_++;
  bounces_[id] = std::move(*b);
  return id;
}

absl::Status EmulatedGpu::DetachBounce(const std::string& domain, uint64_t bounce_id) {
  absl::MutexLock l(&mu_);
  absl::Status s = CheckOwnerLocked(domain);
  if (!s.ok()) return s;
  if (bounces_.erase(bounce_id) == 0) return absl::NotFoundError("no such bounce buffer");
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> EmulatedGpu::SubmitH2D(
    const std::string& domain, const v1::SubmitH2DRequest& req) {
  absl::MutexLock l(&mu_);
  absl::Status s = CheckOwnerLocked(domain);
  if (!s.ok()) return s;
  auto reject = [this](absl::Status st) {
    ++rejected_chunks_;
    return st;
  };
  if (session_ == nullptr || req.session_id() != session_->id) {
    return reject(absl::FailedPreconditionError(
        "chunk refused: its session is not the device's current CC session "
        "(keys from before a re-key or reset are dead)"));
  }
  auto bit = bounces_.find(req.bounce_id());
  if (bit == bounces_.end() || req.slot() >= bit->second->slots()) {
    return reject(absl::InvalidArgumentError("no such bounce buffer or slot"));
  }
  if (req.length() == 0 || req.length() > bit->second->slot_size()) {
    return reject(absl::InvalidArgumentError("chunk length exceeds its slot"));
  }
  if (req.tag().size() != kGcmTagSize) {
    return reject(absl::InvalidArgumentError("authentication tag must be 16 bytes"));
  }
  if (req.offset() % kAlignment != 0) {
    return reject(absl::InvalidArgumentError(
        "destination offset must be 32-byte aligned (copy engine rule)"));
  }
  Session& ses = *session_;
  if (ses.h2d_exhausted) {
    return reject(absl::ResourceExhaustedError(
        "copy-engine IV space exhausted: a fresh key exchange is required"));
  }
  uint64_t usage = req.length() / 16 + 1;
  if (ses.rotation_usage + usage > options_.rotation_threshold) {
    return reject(absl::ResourceExhaustedError(
        "key rotation threshold reached on the LCE H2D key: re-key before "
        "sending more"));
  }
  if (scratch_.size() < req.length()) scratch_.resize(bit->second->slot_size());
  std::string aad = ChunkAad(ses.id, req.buffer_id(), req.offset(), req.length());
  // Decrypt at the copy engine's own counter into scratch; device memory is
  // written only after the tag checks, so a bad chunk changes nothing.
  absl::Status d = ses.lce_h2d->Decrypt(
      ses.h2d_next, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
      bit->second->slot(req.slot()), req.length(),
      reinterpret_cast<const uint8_t*>(req.tag().data()), scratch_.data());
  if (!d.ok()) {
    return reject(absl::UnauthenticatedError(
        "chunk refused by the copy engine: tag check failed at counter " +
        std::to_string(ses.h2d_next) +
        " (wrong key, replayed or reordered chunk, or tampered data)"));
  }
  // Authenticated; only now is the destination looked at (the AAD bound it).
  auto mit = buffers_.find(req.buffer_id());
  if (mit == buffers_.end() || req.offset() > mit->second.size() ||
      req.length() > mit->second.size() - req.offset()) {
    Zeroize(scratch_.data(), req.length());
    return reject(absl::OutOfRangeError("chunk would write outside any device buffer"));
  }
  std::memcpy(mit->second.data() + req.offset(), scratch_.data(), req.length());
  Zeroize(scratch_.data(), req.length());
  ses.rotation_usage += usage;
  ++ses.h2d_chunks;
  ses.h2d_bytes += req.length();
  if (ses.h2d_next == kLastMessageCounter) {
    ses.h2d_exhausted = true;
  } else {
    ++ses.h2d_next;
  }
  return ses.h2d_next;
}

void EmulatedGpu::SetOwner(const std::string& domain) {
  absl::MutexLock l(&mu_);
  owner_ = domain;
}

void EmulatedGpu::Reset() {
  absl::MutexLock l(&mu_);
  session_.reset();
  for (auto& b : buffers_) Zeroize(b.second.data(), b.second.size());
  buffers_.clear();
  bounces_.clear();
  needs_reset_ = false;
  ++resets_;
}

void EmulatedGpu::SetH2dCounterForTest(uint32_t next) {
  absl::MutexLock l(&mu_);
  if (session_ != nullptr) session_->h2d_next = next;
}

v1::DeviceStatus EmulatedGpu::Status() {
  absl::MutexLock l(&mu_);
  v1::DeviceStatus st;
  st.set_serial(options_.serial);
  st.set_owner(owner_);
  st.set_session_id(session_ ? session_->id : 0);
  st.set_h2d_next_counter(session_ ? session_->h2d_next : 0);
  st.set_buffers(buffers_.size());
  st.set_resets(resets_);
  st.set_rejected_chunks(rejected_chunks_);
  st.set_needs_reset(needs_reset_);
  st.set_bounce_buffers(bounces_.size());
  return st;
}

}  // namespace gputravel
