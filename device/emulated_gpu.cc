#include "device/emulated_gpu.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "device/exchange_transcript.h"
#include "keyxfer/random.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {
namespace {

constexpr uint64_t kAlignment = 32;

// The copy engine's rule for the buffers it encrypts or decrypts (UVM's
// UVM_CONF_COMPUTING_BUF_ALIGNMENT): 32-byte aligned, unless the whole buffer
// lies in one 32-byte segment.
bool CopyEngineAligned(uint64_t offset, uint64_t length) {
  return length == 0 || offset % kAlignment == 0 ||
         offset / kAlignment == (offset + length - 1) / kAlignment;
}

}  // namespace

EmulatedGpu::EmulatedGpu(EmulatedGpuOptions options, EcKey identity_key,
                         std::string certificate_der)
    : options_(std::move(options)),
      identity_key_(std::move(identity_key)),
      certificate_der_(std::move(certificate_der)) {
  for (const auto& [domain, dir] : options_.shared_dirs) {
    SharedDir& d = shared_dirs_[domain];
    d.fd = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (d.fd < 0) {
      d.error = "domain '" + domain + "' shared memory " + dir +
                " could not be opened when the device started (" + std::strerror(errno) +
                "; it must be an existing directory, not a symbolic link)";
    }
  }
  if (options_.heartbeat_period > absl::ZeroDuration() && !options_.clock) {
    watchdog_ = std::thread([this] { Watchdog(); });
  }
}

void EmulatedGpu::Watchdog() {
  for (;;) {
    {
      absl::MutexLock l(&watchdog_mu_);
      if (watchdog_mu_.AwaitWithTimeout(absl::Condition(&stop_watchdog_),
                                        options_.heartbeat_period / 4)) {
        return;
      }
    }
    absl::MutexLock l(&mu_);
    ApplyHeartbeatRuleLocked();
  }
}

EmulatedGpu::~EmulatedGpu() {
  if (watchdog_.joinable()) {
    {
      absl::MutexLock l(&watchdog_mu_);
      stop_watchdog_ = true;
    }
    watchdog_.join();
  }
  for (auto& [domain, dir] : shared_dirs_) {
    if (dir.fd >= 0) ::close(dir.fd);
  }
  LockAllEngines();
  {
    absl::MutexLock l(&mu_);
    buffers_.clear();  // each page zeroizes itself, as each spare does
    for (CopyEngine& ce : engines_) Zeroize(ce.scratch.data(), ce.scratch.size());
  }
  UnlockAllEngines();
}

void EmulatedGpu::LockAllEngines() {
  for (CopyEngine& ce : engines_) ce.mu.Lock();
}

void EmulatedGpu::UnlockAllEngines() {
  for (auto it = engines_.rbegin(); it != engines_.rend(); ++it) it->mu.Unlock();
}

void EmulatedGpu::EndDataLocked() {
  ++data_epoch_;
  for (CopyEngine& ce : engines_) {
    if (ce.busy) {
      ce.wipe_pending = true;  // the engine owns its scratch right now
    } else {
      Zeroize(ce.scratch.data(), ce.scratch_residue);
      ce.scratch_residue = 0;
      if (ce.spare_residue) ce.spare.Wipe();
      ce.spare_residue = false;
    }
  }
}

absl::Time EmulatedGpu::Now() const {
  return options_.clock ? options_.clock() : absl::Now();
}

void EmulatedGpu::ApplyHeartbeatRuleLocked() {
  if (options_.heartbeat_period > absl::ZeroDuration() && heartbeat_armed_ &&
      Now() - last_heartbeat_ > 2 * options_.heartbeat_period) {
    // As the real GPU: a missed heartbeat ends the CC session for good.
    heartbeat_armed_ = false;
    session_.reset();
    for (auto& b : buffers_) b.second.Wipe();
    EndDataLocked();
    ++memory_wipes_;
    needs_reset_ = true;
  }
}

absl::Status EmulatedGpu::CheckOwnerLocked(const std::string& domain) {
  ApplyHeartbeatRuleLocked();
  if (needs_reset_) {
    // DATA_LOSS, not FAILED_PRECONDITION: nothing the caller can route or
    // re-key brings the session or the memory back; only a reset helps.
    return absl::DataLossError(
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

absl::StatusOr<EcKey> EmulatedGpu::TakeEphemeral() {
  absl::MutexLock l(&eph_mu_);
  // Never wait behind a busy machine for the idle-priority key: make one now
  // and leave that one for the next exchange.
  if (!next_ephemeral_.valid() ||
      next_ephemeral_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    return EcKey::Generate(Curve::kP384);
  }
  absl::StatusOr<EcKey> k = next_ephemeral_.get();  // one key, one exchange
  if (!k.ok()) return EcKey::Generate(Curve::kP384);
  return k;
}

void EmulatedGpu::PrepareEphemeral() {
  absl::MutexLock l(&eph_mu_);
  if (next_ephemeral_.valid()) return;
  next_ephemeral_ = idle_.Run([] { return EcKey::Generate(Curve::kP384); });
}

void EmulatedGpu::DiscardEphemeral() {
  absl::MutexLock l(&eph_mu_);
  // Dropped without waiting: a key still being made is freed (and cleared)
  // as soon as it is made, unused.
  next_ephemeral_ = std::future<absl::StatusOr<EcKey>>();
}

std::string EmulatedGpu::PendingEphemeralForTest() {
  absl::MutexLock l(&eph_mu_);
  if (!next_ephemeral_.valid()) return "";
  absl::StatusOr<EcKey> k = next_ephemeral_.get();
  std::string point = k.ok() ? k->PublicPoint() : "";
  // Put it back, made: the test only looked at it.
  std::promise<absl::StatusOr<EcKey>> ready;
  ready.set_value(std::move(k));
  next_ephemeral_ = ready.get_future();
  return point;
}

absl::StatusOr<v1::KeyExchangeResponse> EmulatedGpu::KeyExchange(
    const std::string& domain, const v1::KeyExchangeRequest& request) {
  if (request.requester_nonce().size() != 32) {
    return absl::InvalidArgumentError("requester nonce must be 32 bytes");
  }
  uint64_t id = 0, resets_before = 0, wipes_before = 0;
  v1::KeyExchangeResponse resp;
  {
    absl::MutexLock l(&mu_);
    absl::Status s = CheckOwnerLocked(domain);
    if (!s.ok()) return s;
    // The command that rides on the exchange, under the session in force
    // (the one this exchange ends), before anything else can happen to it.
    bool keep_memory = false;
    if (request.has_prior_command()) {
      auto opened = OpenCommandLocked(request.prior_command());
      absl::StatusOr<v1::SealedMessage> prior =
          opened.ok() ? ExecuteAndSealLocked(*opened, /*in_exchange=*/true)
                      : absl::StatusOr<v1::SealedMessage>(opened.status());
      if (prior.ok()) {
        *resp.mutable_prior_reply() = std::move(*prior);
        // Only the holder of the session's control key can seal this, and it
        // names this exchange's key and nonce: nobody else's exchange keeps
        // what that session left in memory.
        keep_memory = opened->has_keep_memory() &&
                      AuthorisesExchange(opened->keep_memory(), request);
      } else {
        resp.set_prior_error_code(static_cast<int>(prior.status().code()));
        resp.set_prior_error(std::string(prior.status().message()));
      }
    }
    // The session in force ends here, whatever becomes of this exchange:
    // nothing runs under it after the riding command (a chunk in flight is
    // discarded at its commit), and an exchange that fails below does not
    // leave it alive. Its rings go with it, and its memory unless the
    // session's owner said otherwise: the host decides whom the GPU is
    // routed to, so anyone may exchange keys, but only the owner's own
    // re-key finds its buffers again.
    session_.reset();
    bounces_.clear();
    if (!keep_memory) WipeMemoryLocked();
    resp.set_memory_kept(keep_memory);
    id = ++last_session_id_;  // never reused, even if this exchange fails
    resets_before = resets_;
    wipes_before = memory_wipes_;
  }
  // The responder's ephemeral key does not depend on the request: it was made
  // ahead, after the previous exchange, as a device can, or is made now.
  // Each key serves exactly one exchange. Taken after reading the reset
  // count, so a reset after this point fails the exchange (check below).
  auto eph = TakeEphemeral();
  if (!eph.ok()) return eph.status();
  resp.set_device_public_key(eph->PublicPoint());
  resp.set_device_nonce(RandomString(32));
  resp.set_session_id(id);
  const std::string transcript = ExchangeTranscript(options_.serial, request, resp);
  // The signature covers the transcript, not the secret: sign and ECDH on
  // two cores.
  auto signing = beside_.Run([this, &transcript] { return identity_key_.Sign(transcript); });
  auto secret = eph->DeriveSharedSecret(request.requester_public_key());
  auto sig = signing.get();
  if (!secret.ok()) return secret.status();
  if (!sig.ok()) return sig.status();
  auto session_secret = DeviceSessionSecret(*secret, transcript);
  if (!session_secret.ok()) return session_secret.status();
  auto keys = ExpandDeviceSessionKeys(*session_secret);
  if (!keys.ok()) return keys.status();
  auto session = std::make_shared<Session>();
  session->id = id;
  auto control = SealedChannel::Create(keys->gsp_d2h, keys->gsp_h2d);
  if (!control.ok()) return control.status();
  session->control = std::move(*control);
  auto lce = ChannelCipher::Create(keys->lce_h2d);
  if (!lce.ok()) return lce.status();
  session->h2d[0].cipher = std::move(*lce);
  auto d2h = ChannelCipher::Create(keys->lce_d2h);
  if (!d2h.ok()) return d2h.status();
  session->d2h[0].cipher = std::move(*d2h);
  session->secret = std::move(*session_secret);  // the other engines' slots, on first use

  {
    absl::MutexLock l(&mu_);
    // The route, a reset or another exchange may have changed meanwhile.
    absl::Status s = CheckOwnerLocked(domain);
    if (!s.ok()) return s;
    if (resets_ != resets_before) {
      return absl::AbortedError("GPU " + options_.serial +
                                " was reset during the key exchange; exchange again");
    }
    // Another exchange started meanwhile (it ended this one's view of the
    // session and may have wiped memory): what this exchange would sign,
    // memory_kept included, may no longer be true.
    if (last_session_id_ != id || memory_wipes_ != wipes_before) {
      return absl::AbortedError("another key exchange on GPU " + options_.serial +
                                " started meanwhile; exchange again");
    }
    // The old session, and with it every key a holder was handed, dies here;
    // the bounce rings staged for it are of no further use.
    session_ = std::move(session);
    bounces_.clear();
    last_heartbeat_ = Now();
    heartbeat_armed_ = true;
  }
  // The next exchange's key, made at idle priority: it never competes with
  // the requester's half of this exchange or with anything else on a trip's
  // critical path.
  PrepareEphemeral();
  resp.set_signature_der(*sig);
  return resp;
}

absl::StatusOr<v1::SealedMessage> EmulatedGpu::Control(
    const std::string& domain, const v1::SealedMessage& request) {
  absl::MutexLock l(&mu_);
  absl::Status s = CheckOwnerLocked(domain);
  if (!s.ok()) return s;
  auto cmd = OpenCommandLocked(request);
  if (!cmd.ok()) return cmd.status();
  return ExecuteAndSealLocked(*cmd, /*in_exchange=*/false);
}

void EmulatedGpu::WipeMemoryLocked() {
  buffers_.clear();  // each page zeroizes itself
  EndDataLocked();
  ++memory_wipes_;
}

absl::StatusOr<v1::DeviceCommand> EmulatedGpu::OpenCommandLocked(
    const v1::SealedMessage& request) {
  if (session_ == nullptr || request.session_id() != session_->id) {
    return absl::FailedPreconditionError(
        "no such CC session on GPU " + options_.serial +
        " (it was replaced by a newer key exchange or wiped by a reset)");
  }
  auto plain = session_->control->Open(ControlAad(true, session_->id),
                                       request.ciphertext());
  if (!plain.ok()) {
    if (absl::IsResourceExhausted(plain.status())) {
      return absl::ResourceExhaustedError("control command refused: this session's control "
                                          "channel has used its last counter; re-key");
    }
    return absl::UnauthenticatedError(
        "control command refused: not sealed with this session's control key "
        "at the expected counter");
  }
  v1::DeviceCommand cmd;
  const bool parsed = cmd.ParseFromString(*plain);
  Zeroize(&(*plain)[0], plain->size());
  if (!parsed) return absl::InvalidArgumentError("control command is malformed");
  if (!session_->control->can_send()) {
    // Nothing is run that could not be answered.
    return absl::ResourceExhaustedError("control command refused: this session's reply "
                                        "channel has used its last counter; re-key");
  }
  return cmd;
}

absl::StatusOr<v1::SealedMessage> EmulatedGpu::ExecuteAndSealLocked(const v1::DeviceCommand& cmd,
                                                                    bool in_exchange) {
  std::string d2h_copy;
  v1::DeviceReply reply;
  if (!in_exchange && cmd.has_keep_memory()) {
    reply.set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
    reply.set_message("keep_memory rides only on a key exchange (KeyExchangeRequest."
                      "prior_command), never on Control");
  } else if (in_exchange && cmd.command_case() == v1::DeviceCommand::COMMAND_NOT_SET) {
    // Nothing but the authorisation rode on the exchange.
  } else {
    reply = ExecuteLocked(cmd, &d2h_copy);
  }
  uint64_t refusals = 0, accepted = 0;
  for (const KeySlot& h2d : session_->h2d) {
    refusals += h2d.grant_refusals;
    accepted += h2d.ops;
  }
  reply.set_h2d_grant_refusals(refusals);
  reply.set_h2d_chunks_accepted(accepted);
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
  if (!d2h_copy.empty()) out.set_d2h_copy(std::move(d2h_copy));
  return out;
}

absl::StatusOr<std::shared_ptr<ChannelCipher>> EmulatedGpu::SlotCipher(
    const Session& ses, uint32_t engine, bool h2d, uint64_t channel) {
  auto m = DeriveCopyEngineKey(ses.secret, engine, h2d);
  if (!m.ok()) return m.status();
  m->channel_counter = channel;
  auto c = ChannelCipher::Create(*m);
  if (!c.ok()) return c.status();
  return std::shared_ptr<ChannelCipher>(std::move(*c));
}

absl::StatusOr<EmulatedGpu::KeySlot*> EmulatedGpu::SlotLocked(Session* ses, uint32_t engine,
                                                              bool h2d) {
  if (engine >= kCopyEngines) {
    return absl::InvalidArgumentError("copy engine " + std::to_string(engine) +
                                      " does not exist: the GPU has LCE0..LCE" +
                                      std::to_string(kCopyEngines - 1));
  }
  KeySlot& slot = (h2d ? ses->h2d : ses->d2h)[engine];
  if (slot.cipher == nullptr) {
    auto c = SlotCipher(*ses, engine, h2d, slot.channel);
    if (!c.ok()) return c.status();
    slot.cipher = std::move(*c);
  }
  return &slot;
}

void EmulatedGpu::RotateIvLocked(uint32_t engine, bool h2d, v1::DeviceReply* r) {
  auto fail = [r](const absl::Status& s) {
    r->set_code(static_cast<int>(s.code()));
    r->set_message(std::string(s.message()));
  };
  r->set_copy_engine(engine);
  auto slot_or = SlotLocked(session_.get(), engine, h2d);
  if (!slot_or.ok()) return fail(slot_or.status());
  KeySlot* slot = *slot_or;
  const std::string name = "LCE" + std::to_string(engine) + (h2d ? " H2D" : " D2H");
  if (slot->channel == std::numeric_limits<uint64_t>::max()) {
    return fail(absl::ResourceExhaustedError(
        name + "'s channel counter is at its last value: its IV cannot be rotated again; "
               "a fresh key exchange is required"));
  }
  auto c = SlotCipher(*session_, engine, h2d, slot->channel + 1);
  if (!c.ok()) return fail(c.status());
  // A chunk being decrypted with the old cipher is not committed (CopyChunk
  // checks the slot's cipher is still the one it used).
  slot->cipher = std::move(*c);
  ++slot->channel;
  slot->next = kFirstMessageCounter;
  slot->exhausted = false;
  if (h2d) {
    // A new IV space, granted by its own hand-off.
    slot->last = kLastMessageCounter;
    slot->grant_buffer = slot->grant_offset = slot->grant_length = 0;
  }
  if (h2d) {
    r->set_h2d_channel_counter(slot->channel);
    r->set_h2d_next_counter(slot->next);
  } else {
    r->set_d2h_channel_counter(slot->channel);
    r->set_d2h_next_counter(slot->next);
  }
}

absl::Status EmulatedGpu::PairRotationDueLocked(const Session* ses, uint32_t engine) const {
  // As the driver counts it: per key, its total bytes / 16 plus its number of
  // operations; a key past the threshold puts its pair (H2D and D2H) into
  // rotation, noticed after the operation that crossed it.
  for (const KeySlot* k : {&ses->h2d[engine], &ses->d2h[engine]}) {
    const uint64_t usage = k->bytes / 16 + k->ops;
    if (usage > options_.rotation_threshold) {
      return absl::ResourceExhaustedError(
          "LCE" + std::to_string(engine) + "'s key pair is past its rotation threshold (" +
          std::string(k == &ses->h2d[engine] ? "H2D" : "D2H") + " key at " +
          std::to_string(usage) + " of " + std::to_string(options_.rotation_threshold) +
          " in bytes/16 + operations): both directions stop until a fresh key exchange");
    }
  }
  return absl::OkStatus();
}

void EmulatedGpu::D2hCopyLocked(uint32_t engine, uint64_t buffer_id,
                                const DeviceBuffer& buffer, uint64_t offset, uint64_t length,
                                v1::DeviceReply* r, std::string* d2h_copy) {
  r->set_copy_engine(engine);
  if (length == 0) return;  // nothing to copy, no counter used
  Session* ses = session_.get();
  auto slot_or = SlotLocked(ses, engine, false);
  if (!slot_or.ok()) {
    r->set_code(static_cast<int>(slot_or.status().code()));
    r->set_message(std::string(slot_or.status().message()));
    return;
  }
  KeySlot* slot = *slot_or;
  const std::string lce = "LCE" + std::to_string(engine);
  if (slot->exhausted) {
    r->set_code(static_cast<int>(absl::StatusCode::kResourceExhausted));
    r->set_message(lce + "'s D2H counter is spent: rotate its IV (rotate_iv) or re-key");
    return;
  }
  absl::Status rotation = PairRotationDueLocked(ses, engine);
  if (!rotation.ok()) {
    r->set_code(static_cast<int>(rotation.code()));
    r->set_message(std::string(rotation.message()));
    return;
  }
  std::string plain;
  plain.reserve(length);  // one allocation: no copy of plaintext left behind by a regrowth
  buffer.AppendTo(offset, length, &plain);
  std::string out(length + kGcmTagSize, '\0');
  auto* o = reinterpret_cast<uint8_t*>(&out[0]);
  const std::string aad = D2hCopyAad(ses->id, buffer_id, offset, length);
  absl::Status e = slot->cipher->Encrypt(
      slot->next, reinterpret_cast<const uint8_t*>(aad.data()), aad.size(),
      reinterpret_cast<const uint8_t*>(plain.data()), length, o, o + length);
  Zeroize(&plain[0], plain.size());
  if (!e.ok()) {
    r->set_code(static_cast<int>(e.code()));
    r->set_message(std::string(e.message()));
    return;
  }
  r->set_d2h_counter(slot->next);
  r->set_d2h_length(length);
  ++slot->ops;
  slot->bytes += length;
  if (slot->next == kLastMessageCounter) slot->exhausted = true; else ++slot->next;
  *d2h_copy = std::move(out);
}

void EmulatedGpu::GrantH2dLocked(const v1::GrantH2dCommand& cmd, v1::DeviceReply* r) {
  auto fail = [r](absl::StatusCode code, const std::string& msg) {
    r->set_code(static_cast<int>(code));
    r->set_message(msg);
  };
  // Every grant is checked before any is applied: all or none.
  uint32_t named = 0;  // bit per engine
  std::vector<KeySlot*> slots;
  for (const v1::H2dGrant& g : cmd.grants()) {
    const std::string lce = "LCE" + std::to_string(g.copy_engine());
    auto slot_or = SlotLocked(session_.get(), g.copy_engine(), true);
    if (!slot_or.ok()) {
      return fail(slot_or.status().code(), std::string(slot_or.status().message()));
    }
    if (named & (1u << g.copy_engine())) {
      return fail(absl::StatusCode::kInvalidArgument, lce + " is granted twice in one command");
    }
    named |= 1u << g.copy_engine();
    KeySlot* slot = *slot_or;
    if (g.last_counter() < slot->next - 1) {
      return fail(absl::StatusCode::kInvalidArgument,
                  lce + "'s H2D slot is at counter " + std::to_string(slot->next) +
                      "; a bound of " + std::to_string(g.last_counter()) +
                      " would shorten a window behind its chunks");
    }
    auto it = buffers_.find(g.buffer_id());
    if (it == buffers_.end()) {
      return fail(absl::StatusCode::kNotFound,
                  lce + " cannot be granted buffer " + std::to_string(g.buffer_id()) +
                      ": the device has no such buffer");
    }
    if (g.length() == 0 || g.offset() > it->second.size() ||
        g.length() > it->second.size() - g.offset()) {
      return fail(g.length() == 0 ? absl::StatusCode::kInvalidArgument
                                  : absl::StatusCode::kOutOfRange,
                  lce + "'s grant [" + std::to_string(g.offset()) + ", +" +
                      std::to_string(g.length()) + ") is empty or outside buffer " +
                      std::to_string(g.buffer_id()) + " (" +
                      std::to_string(it->second.size()) + " bytes)");
    }
    slots.push_back(slot);
  }
  for (int i = 0; i < cmd.grants_size(); ++i) {
    const v1::H2dGrant& g = cmd.grants(i);
    slots[i]->last = g.last_counter();
    slots[i]->grant_buffer = g.buffer_id();
    slots[i]->grant_offset = g.offset();
    slots[i]->grant_length = g.length();
  }
}

uint64_t EmulatedGpu::MemoryInUseLocked() const {
  uint64_t used = 0;
  for (const auto& b : buffers_) used += b.second.size();
  return used;
}

v1::DeviceReply EmulatedGpu::ExecuteLocked(const v1::DeviceCommand& cmd,
                                           std::string* d2h_copy) {
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
      if (size > options_.memory_bytes - MemoryInUseLocked()) {  // cannot wrap
        return fail(absl::StatusCode::kResourceExhausted,
                    "device memory exhausted: " + std::to_string(size) +
                        " bytes asked, " +
                        std::to_string(options_.memory_bytes - MemoryInUseLocked()) +
                        " free");
      }
      uint64_t id = next_buffer_id_++;
      buffers_.emplace(id, DeviceBuffer(size));
      r.set_buffer_id(id);
      return r;
    }
    case v1::DeviceCommand::kFree: {
      auto it = buffers_.find(cmd.free().buffer_id());
      if (it == buffers_.end()) {
        return fail(absl::StatusCode::kNotFound, "no such buffer");
      }
      buffers_.erase(it);  // its pages zeroize themselves
      EndDataLocked();
      return r;
    }
    case v1::DeviceCommand::kRead: {
      const auto& rd = cmd.read();
      if (rd.copy_engine() >= kCopyEngines) {
        return fail(absl::StatusCode::kInvalidArgument,
                    "copy engine " + std::to_string(rd.copy_engine()) + " does not exist");
      }
      auto it = buffers_.find(rd.buffer_id());
      if (it == buffers_.end()) {
        return fail(absl::StatusCode::kNotFound, "no such buffer");
      }
      if (rd.offset() > it->second.size() ||
          rd.length() > it->second.size() - rd.offset() || rd.length() > (32u << 20)) {
        return fail(absl::StatusCode::kOutOfRange,
                    "read outside the buffer or larger than 32 MiB");
      }
      if (!CopyEngineAligned(rd.offset(), rd.length())) {  // the D2H copy's source
        return fail(absl::StatusCode::kInvalidArgument,
                    "a read must start at a 32-byte aligned offset unless it lies in one "
                    "32-byte segment (copy engine rule)");
      }
      r.set_buffer_id(rd.buffer_id());
      D2hCopyLocked(rd.copy_engine(), rd.buffer_id(), it->second, rd.offset(), rd.length(),
                    &r, d2h_copy);
      return r;
    }
    case v1::DeviceCommand::kScrub: {
      if (cmd.scrub().copy_engine() >= kCopyEngines) {  // before anything is zeroed
        return fail(absl::StatusCode::kInvalidArgument,
                    "copy engine " + std::to_string(cmd.scrub().copy_engine()) +
                        " does not exist");
      }
      auto it = buffers_.find(cmd.scrub().buffer_id());
      if (it == buffers_.end()) {
        return fail(absl::StatusCode::kNotFound, "no such buffer");
      }
      const uint64_t read_back = cmd.scrub().read_back();
      if (read_back > it->second.size() || read_back > (32u << 20)) {
        return fail(absl::StatusCode::kOutOfRange,
                    "scrub read-back larger than the buffer or than 32 MiB");
      }
      it->second.Zero();
      EndDataLocked();
      r.set_bytes_scrubbed(it->second.size());
      r.set_buffer_id(it->first);
      // Read from device memory after the zeroing, as a Read would be.
      D2hCopyLocked(cmd.scrub().copy_engine(), it->first, it->second, 0, read_back, &r,
                    d2h_copy);
      return r;
    }
    case v1::DeviceCommand::kHeartbeat: {
      last_heartbeat_ = Now();
      ++heartbeats_;
      return r;
    }
    case v1::DeviceCommand::kRotateIv: {
      RotateIvLocked(cmd.rotate_iv().copy_engine(), cmd.rotate_iv().h2d(), &r);
      return r;
    }
    case v1::DeviceCommand::kGrantH2D: {
      GrantH2dLocked(cmd.grant_h2d(), &r);
      return r;
    }
    case v1::DeviceCommand::kQuery: {
      const uint32_t engine = cmd.query().copy_engine();
      if (engine >= kCopyEngines) {
        return fail(absl::StatusCode::kInvalidArgument,
                    "copy engine " + std::to_string(engine) + " does not exist");
      }
      // An engine not used yet reports its untouched slots.
      const KeySlot& h2d = session_->h2d[engine];
      const KeySlot& d2h = session_->d2h[engine];
      r.set_copy_engine(engine);
      r.set_h2d_next_counter(h2d.next);
      r.set_h2d_chunks(h2d.ops);
      r.set_h2d_bytes(h2d.bytes);
      r.set_d2h_next_counter(d2h.next);
      r.set_d2h_copies(d2h.ops);
      r.set_d2h_bytes(d2h.bytes);
      r.set_h2d_channel_counter(h2d.channel);
      r.set_d2h_channel_counter(d2h.channel);
      r.set_h2d_last_counter(h2d.last);
      r.set_h2d_grant_buffer(h2d.grant_buffer);
      r.set_h2d_grant_offset(h2d.grant_offset);
      r.set_h2d_grant_length(h2d.grant_length);
      r.set_heartbeat_period_seconds(
          static_cast<uint32_t>(absl::ToInt64Seconds(options_.heartbeat_period)));
      return r;
    }
    default:
      return fail(absl::StatusCode::kInvalidArgument, "unknown control command");
  }
}

absl::StatusOr<uint64_t> EmulatedGpu::AttachBounce(
    const std::string& domain, const v1::AttachBounceRequest& request) {
  {
    // A domain the GPU is not routed to learns nothing, not even whether the
    // file exists, and makes the device map nothing.
    absl::MutexLock l(&mu_);
    absl::Status s = CheckOwnerLocked(domain);
    if (!s.ok()) return s;
  }
  if (request.path().empty() || request.path()[0] != '/') {
    return absl::InvalidArgumentError("bounce buffer path must be absolute");
  }
  auto shared = shared_dirs_.find(domain);
  if (shared == shared_dirs_.end()) {
    return absl::PermissionDeniedError("domain '" + domain +
                                       "' has no shared memory the device can reach");
  }
  if (shared->second.fd < 0) return absl::FailedPreconditionError(shared->second.error);
  auto b = BounceBuffer::OpenReadOnly(shared->second.fd, options_.shared_dirs.at(domain),
                                      request.path(), request.slots(), request.slot_size());
  if (!b.ok()) return b.status();
  absl::MutexLock l(&mu_);
  absl::Status s = CheckOwnerLocked(domain);  // the route may have changed meanwhile
  if (!s.ok()) return s;
  uint64_t id = next_bounce_id_++;
  bounces_[id] = std::move(*b);
  return id;
}

std::shared_ptr<BounceBuffer> EmulatedGpu::TakeBounceLocked(uint64_t bounce_id) {
  auto it = bounces_.find(bounce_id);
  if (it == bounces_.end()) return nullptr;
  std::shared_ptr<BounceBuffer> ring = std::move(it->second);
  bounces_.erase(it);
  return ring;
}

absl::Status EmulatedGpu::DetachBounce(const std::string& domain, uint64_t bounce_id) {
  std::shared_ptr<BounceBuffer> ring;  // unmapped after the lock is released
  absl::MutexLock l(&mu_);
  absl::Status s = CheckOwnerLocked(domain);
  if (!s.ok()) return s;
  ring = TakeBounceLocked(bounce_id);
  if (ring == nullptr) return absl::NotFoundError("no such bounce buffer");
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> EmulatedGpu::SubmitH2D(
    const std::string& domain, const v1::SubmitH2DRequest& req, uint64_t* attached) {
  if (attached != nullptr) *attached = 0;
  const v1::SubmitH2DRequest* chunk = &req;
  v1::SubmitH2DRequest on_attached;
  if (req.has_attach()) {
    // The doorbell brings its ring: map it as AttachBounce would.
    absl::StatusOr<uint64_t> id = AttachBounce(domain, req.attach());
    if (!id.ok()) return id.status();
    on_attached = req;
    on_attached.clear_attach();
    on_attached.set_bounce_id(*id);
    chunk = &on_attached;
  }
  absl::StatusOr<uint32_t> r = CopyChunk(domain, *chunk);
  // A ring let go of here is unmapped when this goes, after mu_ is released.
  std::shared_ptr<BounceBuffer> released;
  if (chunk->release_bounce()) {
    // The window's last doorbell, whatever became of its chunk.
    absl::MutexLock l(&mu_);
    if (CheckOwnerLocked(domain).ok()) released = TakeBounceLocked(chunk->bounce_id());
  } else if (req.has_attach()) {
    if (r.ok()) {
      if (attached != nullptr) *attached = chunk->bounce_id();
    } else {
      // The caller never learns the id of a ring whose first chunk failed:
      // it is unmapped again rather than left for the next exchange.
      absl::MutexLock l(&mu_);
      released = TakeBounceLocked(chunk->bounce_id());
    }
  }
  return r;
}

absl::StatusOr<uint32_t> EmulatedGpu::CopyChunk(const std::string& domain,
                                                const v1::SubmitH2DRequest& req) {
  if (req.copy_engine() >= kCopyEngines) {
    absl::MutexLock l(&mu_);
    absl::Status s = CheckOwnerLocked(domain);
    if (!s.ok()) return s;
    ++rejected_chunks_;
    return absl::InvalidArgumentError("copy engine " + std::to_string(req.copy_engine()) +
                                      " does not exist: the GPU has LCE0..LCE" +
                                      std::to_string(kCopyEngines - 1));
  }
  // Each copy engine handles one chunk at a time, in arrival order, and holds
  // its own lock for the whole chunk; other engines run beside it. mu_ is
  // held only to check (phase 1) and to commit (phase 3); the decryption
  // (phase 2) runs without it.
  CopyEngine& ce = engines_[req.copy_engine()];
  absl::MutexLock engine_lock(&ce.mu);
  std::shared_ptr<Session> ses;
  KeySlot* slot = nullptr;  // the engine's H2D slot, kept alive by `ses`
  std::shared_ptr<ChannelCipher> cipher;  // the slot's when the chunk was checked
  std::shared_ptr<BounceBuffer> ring;
  uint32_t counter = 0;
  uint64_t epoch = 0;
  // Why the slot's grant refuses the chunk (OK: it does not). Such a chunk
  // is still decrypted, into the engine's own memory only, so that one that
  // authenticates under the granted key is counted; it writes nothing.
  absl::Status outside;
  const std::string lce = "LCE" + std::to_string(req.copy_engine());
  // The slot's grant (GrantH2dCommand) for a chunk at `at`.
  auto grant_allows = [&req, &lce](const KeySlot& k, uint32_t at) -> absl::Status {
    if (at > k.last) {
      return absl::OutOfRangeError(
          lce + "'s H2D counter " + std::to_string(at) +
          " is past the counter window its session's owner handed out (last counter " +
          std::to_string(k.last) + ")");
    }
    if (k.grant_buffer != 0 &&
        (req.buffer_id() != k.grant_buffer || req.offset() < k.grant_offset ||
         req.offset() - k.grant_offset > k.grant_length ||
         req.length() > k.grant_length - (req.offset() - k.grant_offset))) {
      return absl::PermissionDeniedError(
          lce + "'s key is granted bytes [" + std::to_string(k.grant_offset) + ", +" +
          std::to_string(k.grant_length) + ") of buffer " + std::to_string(k.grant_buffer) +
          " only; a chunk of " + std::to_string(req.length()) + " bytes for buffer " +
          std::to_string(req.buffer_id()) + " at offset " + std::to_string(req.offset()) +
          " is outside its window");
    }
    return absl::OkStatus();
  };
  {
    absl::MutexLock l(&mu_);
    absl::Status s = CheckOwnerLocked(domain);
    if (!s.ok()) return s;
    // Called with mu_ held (the analysis does not follow into lambdas).
    auto reject = [this](absl::Status st) {
      mu_.AssertHeld();
      ++rejected_chunks_;
      return st;
    };
    if (session_ == nullptr || req.session_id() != session_->id) {
      return reject(absl::FailedPreconditionError(
          "chunk refused: its session is not the device's current CC session "
          "(keys from before a re-key or reset are dead)"));
    }
    auto bit = bounces_.find(req.bounce_id());
    if (bit == bounces_.end()) {
      return reject(absl::InvalidArgumentError(
          "no bounce buffer " + std::to_string(req.bounce_id()) +
          " is attached (every key exchange drops the rings of the session it ends: "
          "attach again)"));
    }
    if (req.slot() >= bit->second->slots()) {
      return reject(absl::InvalidArgumentError(
          "slot " + std::to_string(req.slot()) + " is outside bounce buffer " +
          std::to_string(req.bounce_id()) + " (" + std::to_string(bit->second->slots()) +
          " slots)"));
    }
    if (req.length() == 0) {
      return reject(absl::InvalidArgumentError("chunk length is 0"));
    }
    if (req.length() > bit->second->slot_size()) {
      return reject(absl::InvalidArgumentError(
          "chunk length " + std::to_string(req.length()) + " exceeds its slot (" +
          std::to_string(bit->second->slot_size()) + " bytes)"));
    }
    // The tag is read from the ring by its address: 16-byte aligned (the
    // copy engine's rule for auth tags), and in the ring's tag area.
    if (req.tag_offset() % kGcmTagSize != 0) {
      return reject(absl::InvalidArgumentError(
          "the authentication tag must be 16-byte aligned (copy engine rule); tag offset " +
          std::to_string(req.tag_offset()) + " is not"));
    }
    if (req.tag_offset() < bit->second->tag_offset(0) ||
        bit->second->bytes_at(req.tag_offset(), kGcmTagSize) == nullptr) {
      return reject(absl::InvalidArgumentError(
          "tag offset " + std::to_string(req.tag_offset()) + " is outside the tag area of " +
          "bounce buffer " + std::to_string(req.bounce_id()) + " (bytes " +
          std::to_string(bit->second->tag_offset(0)) + " to " +
          std::to_string(bit->second->length()) + ", after its slots)"));
    }
    // As the driver's copy engine: 32-byte aligned, unless the chunk lies
    // in one 32-byte segment.
    if (!CopyEngineAligned(req.offset(), req.length())) {
      return reject(absl::InvalidArgumentError(
          "a chunk must land at a 32-byte aligned offset unless it lies in one 32-byte "
          "segment (copy engine rule); " + std::to_string(req.length()) + " bytes at offset " +
          std::to_string(req.offset()) + " do not"));
    }
    auto slot_or = SlotLocked(session_.get(), req.copy_engine(), true);
    if (!slot_or.ok()) return reject(slot_or.status());
    slot = *slot_or;
    if (slot->exhausted) {
      return reject(absl::ResourceExhaustedError(
          lce + "'s H2D IV space is exhausted: rotate its IV (rotate_iv) or make a fresh key "
                "exchange"));
    }
    outside = grant_allows(*slot, slot->next);
    absl::Status rotation = PairRotationDueLocked(session_.get(), req.copy_engine());
    if (!rotation.ok()) return reject(rotation);
    ses = session_;
    ring = bit->second;
    cipher = slot->cipher;
    counter = slot->next;
    epoch = data_epoch_;
    ce.busy = true;  // its scratch and spare are the engine's until phase 3
  }

  // Phase 2, without mu_: decrypt at the copy engine's own counter into the
  // engine's own memory; device memory is changed only after the tag
  // checks, so a bad chunk changes nothing. A chunk shaped like one whole
  // page of device memory goes to the spare page (put in place below, not
  // copied), any other to scratch. Only this engine's thread uses its slot's
  // cipher (its lock), and the shared pointers keep it and the ring alive.
  const size_t n = req.length();
  const bool whole_page = req.offset() % kDevicePageBytes == 0 && n == kDevicePageBytes;
  uint8_t* target;
  if (whole_page) {
    if (ce.spare.size() != kDevicePageBytes) ce.spare = DevicePage(kDevicePageBytes);
    target = ce.spare.data();
  } else {
    if (ce.scratch.size() < ring->slot_size()) {
      Zeroize(ce.scratch.data(), ce.scratch.size());
      ce.scratch = std::vector<uint8_t>(ring->slot_size());
    }
    target = ce.scratch.data();
  }
  std::string aad = ChunkAad(ses->id, req.buffer_id(), req.offset(), n);
  // The slot and the tag are in memory the host can write while the copy
  // engine reads them: each byte is read once, and what is decrypted is what
  // the tag covered (as a real copy engine, which fetches the chunk once).
  // Its owner can also truncate the ring meanwhile: reads past the new end
  // read zeros and mark the ring (checked below), instead of a SIGBUS.
  uint8_t tag[kGcmTagSize];
  absl::Status d;
  {
    TruncationGuard::Scope guard = ring->GuardReads();
    std::memcpy(tag, ring->bytes_at(req.tag_offset(), kGcmTagSize), kGcmTagSize);
    d = cipher->DecryptFromShared(counter, reinterpret_cast<const uint8_t*>(aad.data()),
                                  aad.size(), ring->slot(req.slot()), n, tag, target);
  }
  if (options_.decrypt_hook_for_test) options_.decrypt_hook_for_test(req.copy_engine());
  if (options_.copy_engine_hook_for_test) options_.copy_engine_hook_for_test();

  // Phase 3, under mu_ again: commit only if nothing changed meanwhile.
  absl::MutexLock l(&mu_);
  ce.busy = false;
  if (ring->faulted()) {
    // Its owner truncated the file under the copy engine: what was read
    // past the end read as zeros (a real engine takes an IOMMU fault).
    return DiscardChunkLocked(ce, target, n, absl::FailedPreconditionError(
        "bounce buffer " + std::to_string(req.bounce_id()) +
        " shrank while the copy engine read it (its file was truncated): chunk refused, "
        "nothing was written; attach a ring again"));
  }
  if (!outside.ok()) {
    // Refused by the grant. Counted when it authenticated under the slot's
    // key as it still is: only whoever holds that key could make it.
    if (d.ok() && session_ == ses && slot->cipher == cipher) ++slot->grant_refusals;
    return DiscardChunkLocked(ce, target, n, outside);
  }
  if (!d.ok()) {
    return DiscardChunkLocked(ce, target, n, absl::UnauthenticatedError(
        "chunk refused by copy engine " + lce + ": tag check failed at counter " +
        std::to_string(counter) +
        " (wrong key, replayed or reordered chunk, or tampered data)"));
  }
  absl::Status s = CheckOwnerLocked(domain);
  if (!s.ok()) return DiscardChunkLocked(ce, target, n, s);
  if (session_ != ses || slot->cipher != cipher || slot->next != counter ||
      data_epoch_ != epoch) {
    return DiscardChunkLocked(ce, target, n, absl::FailedPreconditionError(
        "chunk discarded: the CC session, the engine's IV or device memory changed while "
        "the copy engine decrypted it (re-key, IV rotation, reset, scrub or free); nothing "
        "was written"));
  }
  absl::Status granted = grant_allows(*slot, counter);
  if (!granted.ok()) {
    // The session's owner granted the slot while this chunk was decrypted.
    return DiscardChunkLocked(ce, target, n, absl::Status(granted.code(),
        "chunk discarded: a grant made while the copy engine decrypted it refuses it: " +
        std::string(granted.message())));
  }
  // Authenticated; only now is the destination looked at (the AAD bound it).
  auto mit = buffers_.find(req.buffer_id());
  if (mit == buffers_.end() || req.offset() > mit->second.size() ||
      n > mit->second.size() - req.offset()) {
    return DiscardChunkLocked(
        ce, target, n, absl::OutOfRangeError("chunk would write outside any device buffer"));
  }
  if (whole_page && mit->second.IsWholePage(req.offset(), n)) {
    // The decrypted page takes the old one's place; the old page, which
    // held device memory, is the next spare. Wiped when that data's life
    // ends (EndDataLocked), not per chunk.
    ce.spare = mit->second.Exchange(req.offset(), std::move(ce.spare));
    ce.spare_residue = true;
  } else {
    mit->second.Write(req.offset(), target, n);
    // What was decrypted stays behind as a copy of what device memory now
    // holds; wiped likewise.
    if (whole_page) {
      ce.spare_residue = true;
    } else {
      ce.scratch_residue = std::max(ce.scratch_residue, n);
    }
  }
  ++slot->ops;
  slot->bytes += n;
  if (slot->next == kLastMessageCounter) {
    slot->exhausted = true;
  } else {
    ++slot->next;
  }
  return slot->next;
}

absl::Status EmulatedGpu::DiscardChunkLocked(CopyEngine& ce, uint8_t* target, size_t n,
                                             absl::Status why) {
  ++rejected_chunks_;
  if (ce.wipe_pending) {
    Zeroize(ce.scratch.data(), ce.scratch.size());
    ce.scratch_residue = 0;
    ce.spare.Wipe();
    ce.spare_residue = false;
    ce.wipe_pending = false;
  } else if (target == ce.spare.data()) {
    // The chunk covered the whole spare: nothing older is left in it.
    ce.spare.Wipe();
    ce.spare_residue = false;
  } else {
    // What this chunk decrypted (the bytes past n are older, committed data).
    Zeroize(target, n);
  }
  return why;
}

bool EmulatedGpu::ScratchIsClearForTest() {
  LockAllEngines();
  bool clear = true;
  {
    absl::MutexLock l(&mu_);
    for (const CopyEngine& ce : engines_) {
      for (uint8_t b : ce.scratch) clear = clear && b == 0;
      for (size_t i = 0; i < ce.spare.size(); ++i) clear = clear && ce.spare.data()[i] == 0;
    }
  }
  UnlockAllEngines();
  return clear;
}

bool EmulatedGpu::MemoryIsZeroForTest() {
  LockAllEngines();
  bool zero = true;
  {
    absl::MutexLock l(&mu_);
    for (const auto& b : buffers_) {
      std::string bytes;
      b.second.AppendTo(0, b.second.size(), &bytes);
      for (char c : bytes) zero = zero && c == 0;
    }
  }
  UnlockAllEngines();
  return zero;
}

void EmulatedGpu::SetOwner(const std::string& domain) {
  {
    absl::MutexLock l(&mu_);
    // The rings are the routed domain's memory, mapped for it (an IOMMU
    // mapping follows the VM): a route change unmaps them, so no ring is
    // ever used by, or read for, another domain.
    if (domain != owner_) bounces_.clear();
    owner_ = domain;
  }
  // Normally made after the last exchange already; this covers a device that
  // never exchanged yet.
  PrepareEphemeral();
}

void EmulatedGpu::Reset() {
  // A reset wipes every key, the pending ephemeral one included (it was never
  // shown to anyone; no key of the device outlives a reset).
  DiscardEphemeral();
  {
    absl::MutexLock l(&mu_);
    session_.reset();
    bounces_.clear();
    WipeMemoryLocked();
    needs_reset_ = false;
    heartbeat_armed_ = false;
    ++resets_;
  }
  PrepareEphemeral();
}

bool EmulatedGpu::NeedsResetWithoutCheckingForTest() {
  absl::MutexLock l(&mu_);
  return needs_reset_;
}

void EmulatedGpu::SetH2dCounterForTest(uint32_t next, uint32_t engine) {
  absl::MutexLock l(&mu_);
  if (session_ != nullptr && engine < kCopyEngines) session_->h2d[engine].next = next;
}

void EmulatedGpu::SetD2hCounterForTest(uint32_t next, uint32_t engine) {
  absl::MutexLock l(&mu_);
  if (session_ != nullptr && engine < kCopyEngines) session_->d2h[engine].next = next;
}

void EmulatedGpu::SetChannelCounterForTest(uint64_t channel, uint32_t engine, bool h2d) {
  absl::MutexLock l(&mu_);
  if (session_ == nullptr || engine >= kCopyEngines) return;
  auto c = SlotCipher(*session_, engine, h2d, channel);
  if (!c.ok()) return;
  KeySlot& slot = (h2d ? session_->h2d : session_->d2h)[engine];
  slot.cipher = std::move(*c);
  slot.channel = channel;
}

v1::DeviceStatus EmulatedGpu::Status() {
  absl::MutexLock l(&mu_);
  ApplyHeartbeatRuleLocked();  // a miss shows here too, not only at the next call
  v1::DeviceStatus st;
  st.set_serial(options_.serial);
  st.set_owner(owner_);
  st.set_session_id(session_ ? session_->id : 0);
  st.set_h2d_next_counter(session_ ? session_->h2d[0].next : 0);
  st.set_buffers(buffers_.size());
  st.set_resets(resets_);
  st.set_memory_wipes(memory_wipes_);
  st.set_rejected_chunks(rejected_chunks_);
  st.set_needs_reset(needs_reset_);
  st.set_heartbeats(heartbeats_);
  st.set_bounce_buffers(bounces_.size());
  if (session_ != nullptr) {
    for (uint32_t e = 0; e < kCopyEngines; ++e) {
      const KeySlot& h2d = session_->h2d[e];
      const KeySlot& d2h = session_->d2h[e];
      if (e != 0 && h2d.cipher == nullptr && d2h.cipher == nullptr) continue;  // unused
      v1::CopyEngineStatus* ce = st.add_copy_engines();
      ce->set_engine(e);
      ce->set_h2d_next_counter(h2d.next);
      ce->set_d2h_next_counter(d2h.next);
      ce->set_h2d_chunks(h2d.ops);
      ce->set_d2h_copies(d2h.ops);
      ce->set_h2d_channel_counter(h2d.channel);
      ce->set_d2h_channel_counter(d2h.channel);
      ce->set_h2d_grant_refusals(h2d.grant_refusals);
    }
  }
  return st;
}

}  // namespace gputravel
