#include "device/gpu_session.h"

#include <limits>
#include <utility>

#include "device/exchange_transcript.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/random.h"
#include "keyxfer/x509.h"
#include "util/grpc_status.h"

namespace gputravel {

GpuSession::GpuSession(std::shared_ptr<grpc::Channel> channel,
                       std::string device_ca_der, std::string expected_serial)
    : stub_(v1::Device::NewStub(channel)),
      device_certificates_(std::move(device_ca_der), kCertificateRecheck),
      expected_serial_(std::move(expected_serial)) {}

// A key still being made ahead is finished by idle_'s destructor and dropped.
GpuSession::~GpuSession() = default;

void GpuSession::PrepareNextEphemeral() {
  if (next_ephemeral_.valid()) return;
  next_ephemeral_ = idle_.Run([] { return EcKey::Generate(Curve::kP384); });
}

absl::StatusOr<EcKey> GpuSession::TakeEphemeral() {
  // Never wait behind a busy machine for the idle-priority key: make one now
  // and leave that one for the next exchange.
  if (!next_ephemeral_.valid() ||
      next_ephemeral_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    return EcKey::Generate(Curve::kP384);
  }
  absl::StatusOr<EcKey> k = next_ephemeral_.get();  // leaves the future empty
  if (!k.ok()) return EcKey::Generate(Curve::kP384);
  return k;
}

absl::StatusOr<GpuSession::KnownDevice> GpuSession::FetchIdentity() {
  v1::DeviceIdentity id;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    absl::Status s = FromGrpc(stub_->GetIdentity(&ctx, {}, &id), "GPU GetIdentity");
    if (!s.ok()) return s;
  }
  auto cert = device_certificates_.Verify(id.certificate_der());
  if (!cert.ok()) {
    return absl::UnauthenticatedError("GPU identity refused: " +
                                      std::string(cert.status().message()));
  }
  if ((*cert)->common_name != id.serial()) {
    return absl::UnauthenticatedError("GPU certificate is for '" + (*cert)->common_name +
                                      "' but the device claims '" + id.serial() + "'");
  }
  if (!expected_serial_.empty() && id.serial() != expected_serial_) {
    return absl::PermissionDeniedError(
        "a different GPU was routed here: expected " + expected_serial_ + ", got " +
        id.serial() + " (the host may be redirecting the device)");
  }
  device_memory_bytes_ = id.memory_bytes();
  return KnownDevice{id.serial(), *cert, absl::Now()};
}

absl::Status GpuSession::Establish() { return EstablishWith(nullptr, nullptr); }

namespace {

// This driver reads back on LCE0, the only engine whose D2H key it derives:
// a command naming another is refused before the device runs it (and uses
// that engine's counter or scrubs anything). H2D IVs are rotated, and H2D
// slots granted, on any engine (RotateIv, GrantH2d), never on a command that
// rides on an exchange.
absl::Status CheckCopyEngine(const v1::DeviceCommand& cmd) {
  uint32_t engine = 0;
  if (cmd.has_read()) engine = cmd.read().copy_engine();
  if (cmd.has_scrub()) engine = cmd.scrub().copy_engine();
  if (cmd.has_query()) engine = cmd.query().copy_engine();
  if (cmd.has_rotate_iv() && !cmd.rotate_iv().h2d()) engine = cmd.rotate_iv().copy_engine();
  if (engine != 0) {
    return absl::InvalidArgumentError("the driver reads back, queries and rotates IVs on "
                                      "copy engine 0 only; the command names LCE" +
                                      std::to_string(engine));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status GpuSession::EstablishAfter(const v1::DeviceCommand& prior,
                                        PriorOutcome* outcome) {
  absl::Status e = CheckCopyEngine(prior);
  if (!e.ok()) return e;
  if (prior.has_rotate_iv() || prior.has_grant_h2d()) {
    return absl::InvalidArgumentError(
        "an IV rotation or an H2D grant riding on a key exchange would end with its session");
  }
  return EstablishWith(&prior, outcome);
}

namespace {

// The reply to a command that rode on a key exchange, opened under the
// session it was sealed in.
void OpenPrior(SealedChannel* sent_in, D2hReceiver* d2h, uint64_t session_id,
               const v1::DeviceCommand& cmd, const v1::KeyExchangeResponse& resp,
               GpuSession::PriorOutcome* out) {
  auto fail = [out](absl::Status s) {
    out->session = s;
    out->reply = std::move(s);
  };
  if (resp.prior_error_code() != 0) {
    return fail(absl::Status(static_cast<absl::StatusCode>(resp.prior_error_code()),
                             "GPU Control: " + resp.prior_error()));
  }
  if (!resp.has_prior_reply()) {
    return fail(absl::DataLossError(
        "the GPU did not answer the command sent with the key exchange"));
  }
  auto opened = sent_in->Open(ControlAad(false, session_id), resp.prior_reply().ciphertext());
  if (!opened.ok()) {
    return fail(absl::UnauthenticatedError(
        "GPU reply does not authenticate under this session: the device is not "
        "the one this session was established with"));
  }
  v1::DeviceReply reply;
  const bool parsed = reply.ParseFromString(*opened);
  Zeroize(&(*opened)[0], opened->size());
  out->session = absl::OkStatus();
  if (parsed) {
    out->h2d_grant_refusals = reply.h2d_grant_refusals();
    out->h2d_chunks_accepted = reply.h2d_chunks_accepted();
  }
  if (!parsed) {
    out->reply = absl::DataLossError("GPU reply is malformed");
  } else if (reply.code() != 0) {
    out->reply = absl::Status(static_cast<absl::StatusCode>(reply.code()),
                              "GPU: " + reply.message());
  } else {
    absl::Status copied = d2h->Open(cmd, session_id, resp.prior_reply().d2h_copy(), &reply);
    if (copied.ok()) {
      out->reply = std::move(reply);
    } else {
      out->reply = copied;
    }
  }
}

}  // namespace

namespace {

// A key exchange request for the ephemeral key `eph`, with a fresh nonce.
v1::KeyExchangeRequest RequestFor(const EcKey& eph) {
  v1::KeyExchangeRequest req;
  req.set_requester_public_key(eph.PublicPoint());
  req.set_requester_nonce(RandomString(32));
  return req;
}

}  // namespace

absl::Status GpuSession::EstablishWith(const v1::DeviceCommand* prior,
                                       PriorOutcome* outcome) {
  // The session in force ends here whatever happens; what rides on the
  // exchange is sealed under it first.
  std::unique_ptr<SealedChannel> old = std::move(control_);
  D2hReceiver old_d2h = std::move(d2h_);
  d2h_ = D2hReceiver();
  const uint64_t old_id = session_id_;
  for (ChannelMaterial& k : h2d_) k = ChannelMaterial();
  session_secret_.Clear();
  memory_kept_ = false;
  if (prior != nullptr) *outcome = PriorOutcome();
  // The identity learned by the last exchange, while its certificate check
  // is fresh, like an SPDM requester that keeps the responder's certificate
  // chain: the exchange's signature still has to verify with that
  // certificate's key over a transcript naming that serial, so another device
  // cannot answer for it. If it does not verify, the identity is fetched and
  // checked again to say exactly what is wrong, or to succeed if it changed.
  const bool reused = known_.has_value() && absl::Now() - known_->fetched < kCertificateRecheck;
  if (!reused) {
    known_.reset();
    auto fetched = FetchIdentity();
    if (!fetched.ok()) return fetched.status();
    known_ = std::move(*fetched);
  }
  // The ephemeral key was generated ahead (one-shot: used for this exchange
  // only); the next one starts once this exchange is done.
  auto eph = TakeEphemeral();
  if (!eph.ok()) return eph.status();
  v1::KeyExchangeRequest req = RequestFor(*eph);
  // Under the session in force: the authorisation for this exchange, and
  // only this one, to keep device memory (any other exchange wipes it), and
  // the command riding on it.
  absl::Status unsent = absl::FailedPreconditionError(
      "no CC session with the GPU to send the command in");
  if (old != nullptr) {
    v1::DeviceCommand cmd;
    if (prior != nullptr) cmd = *prior;
    cmd.mutable_keep_memory()->set_requester_public_key(req.requester_public_key());
    cmd.mutable_keep_memory()->set_requester_nonce(req.requester_nonce());
    std::string plain = cmd.SerializeAsString();
    uint32_t counter = 0;
    auto ct = old->Seal(ControlAad(true, old_id), plain, &counter);
    Zeroize(&plain[0], plain.size());
    if (ct.ok()) {
      v1::SealedMessage* sealed = req.mutable_prior_command();
      sealed->set_session_id(old_id);
      sealed->set_counter(counter);
      sealed->set_ciphertext(std::move(*ct));
    } else {
      unsent = ct.status();
    }
  }
  if (prior != nullptr && !req.has_prior_command()) {
    outcome->session = unsent;
    outcome->reply = unsent;
  }
  v1::KeyExchangeResponse answer;
  absl::Status s = Exchange(*known_, std::move(*eph), req, &answer);
  // The command was executed (or refused) with the first exchange only.
  if (prior != nullptr && req.has_prior_command()) {
    OpenPrior(old.get(), &old_d2h, old_id, *prior, answer, outcome);
  }
  if (s.ok() || !reused || !absl::IsUnauthenticated(s)) return s;
  if (prior != nullptr) outcome->retried = true;
  known_.reset();
  auto fetched = FetchIdentity();
  if (!fetched.ok()) return fetched.status();
  known_ = std::move(*fetched);
  // The session the authorisation was sealed in ended with the first
  // exchange: this one starts from wiped memory.
  auto eph2 = TakeEphemeral();
  if (!eph2.ok()) return eph2.status();
  const v1::KeyExchangeRequest again = RequestFor(*eph2);
  v1::KeyExchangeResponse answer2;
  return Exchange(*known_, std::move(*eph2), again, &answer2);
}

absl::Status GpuSession::Exchange(const KnownDevice& device, EcKey eph,
                                  const v1::KeyExchangeRequest& req,
                                  v1::KeyExchangeResponse* resp) {
  const absl::Time sent = absl::Now();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    absl::Status s = FromGrpc(stub_->KeyExchange(&ctx, req, resp), "GPU KeyExchange");
    if (!s.ok()) {
      PrepareNextEphemeral();
      // No answer: the command may or may not have run.
      resp->Clear();
      resp->set_prior_error_code(static_cast<int>(s.code()));
      resp->set_prior_error("no answer to the key exchange it rode on: " +
                            std::string(s.message()));
      return s;
    }
  }
  // Everything the device answered, what rode on the exchange and whether
  // memory survived included, is covered by the signature.
  const std::string transcript = ExchangeTranscript(device.serial, req, *resp);
  // The signature check and the ECDH are independent: run them on two cores.
  // Nothing derived from the secret is used unless the signature verified.
  const EcKey& identity = device.certificate->public_key;
  const std::string& signature = resp->signature_der();
  auto sig_check = beside_.Run([&identity, &transcript, &signature] {
    return identity.Verify(transcript, signature);
  });
  auto secret = eph.DeriveSharedSecret(resp->device_public_key());
  absl::Status sig = sig_check.get();
  PrepareNextEphemeral();
  if (!sig.ok()) {
    return absl::UnauthenticatedError(
        "GPU key exchange signature does not verify with the certified identity "
        "key: refusing the session");
  }
  if (!secret.ok()) return secret.status();
  auto session_secret = DeviceSessionSecret(*secret, transcript);
  if (!session_secret.ok()) return session_secret.status();
  auto keys = ExpandDeviceSessionKeys(*session_secret);
  if (!keys.ok()) return keys.status();
  auto control = SealedChannel::Create(keys->gsp_h2d, keys->gsp_d2h);
  if (!control.ok()) return control.status();
  auto d2h = D2hReceiver::Create(std::move(keys->lce_d2h));
  if (!d2h.ok()) return d2h.status();
  control_ = std::move(*control);
  d2h_ = std::move(*d2h);
  h2d_[0] = std::move(keys->lce_h2d);
  h2d_handed_.fill(false);
  session_secret_ = std::move(*session_secret);  // the other engines' keys, when handed out
  serial_ = device.serial;
  if (expected_serial_.empty()) expected_serial_ = serial_;  // this process's GPU from now on
  session_id_ = resp->session_id();
  memory_kept_ = resp->memory_kept();
  last_heartbeat_ = sent;  // the device counts an exchange as a heartbeat
  return absl::OkStatus();
}

absl::StatusOr<v1::DeviceReply> GpuSession::Command(const v1::DeviceCommand& cmd) {
  auto reply = SealedCommand(cmd);
  if (!reply.ok()) return reply.status();
  if (reply->code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(reply->code()),
                        "GPU: " + reply->message());
  }
  return reply;
}

absl::StatusOr<v1::DeviceReply> GpuSession::SealedCommand(const v1::DeviceCommand& cmd) {
  if (control_ == nullptr) {
    return absl::FailedPreconditionError("no CC session with the GPU: establish first");
  }
  absl::Status e = CheckCopyEngine(cmd);
  if (!e.ok()) return e;
  // As the driver: a channel with at most the threshold of message counters
  // left has its IV rotated before it carries another copy.
  const bool d2h_copy = (cmd.has_read() && cmd.read().length() > 0) ||
                        (cmd.has_scrub() && cmd.scrub().read_back() > 0);
  if (d2h_copy && d2h_.remaining() <= iv_rotation_threshold_) {
    absl::Status r = RotateIv(false);
    if (!r.ok()) return r;
  }
  std::string plain = cmd.SerializeAsString();
  uint32_t counter = 0;
  auto sealed = control_->Seal(ControlAad(true, session_id_), plain, &counter);
  if (!sealed.ok()) return sealed.status();
  v1::SealedMessage req, resp;
  req.set_session_id(session_id_);
  req.set_counter(counter);
  req.set_ciphertext(std::move(*sealed));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::Status t = stub_->Control(&ctx, req, &resp);
  if (!t.ok()) {
    // The device did not consume the command; our send counter moved on, so
    // this session can no longer talk in order: force a fresh exchange.
    control_.reset();
    // Whoever relays the device's socket can answer with any code: a
    // transport failure is UNAVAILABLE, never a word of the device's (only
    // a sealed reply says, e.g., that a buffer is gone).
    absl::Status s = FromGrpc(t, "GPU Control");
    return absl::UnavailableError("no sealed reply from the GPU (transport: " +
                                  std::string(absl::StatusCodeToString(s.code())) + ": " +
                                  std::string(s.message()) + ")");
  }
  auto opened = control_->Open(ControlAad(false, session_id_), resp.ciphertext());
  if (!opened.ok()) {
    control_.reset();
    return absl::UnauthenticatedError(
        "GPU reply does not authenticate under this session: the device is not "
        "the one this session was established with");
  }
  v1::DeviceReply reply;
  bool parsed = reply.ParseFromString(*opened);
  Zeroize(&(*opened)[0], opened->size());
  if (!parsed) return absl::DataLossError("GPU reply is malformed");
  if (reply.code() != 0) return reply;  // the device's own, authenticated refusal
  absl::Status copied = d2h_.Open(cmd, session_id_, resp.d2h_copy(), &reply);
  if (!copied.ok()) {
    // The D2H channel is out of step with the device: no later read-back
    // could be trusted to be in order. A fresh exchange is needed.
    control_.reset();
    return copied;
  }
  return reply;
}

absl::Status GpuSession::VerifyStillSameSession() {
  v1::DeviceCommand cmd;
  cmd.mutable_query();
  return Command(cmd).status();
}

absl::StatusOr<uint64_t> GpuSession::AllocBuffer(uint64_t size) {
  v1::DeviceCommand cmd;
  cmd.mutable_alloc()->set_size(size);
  auto r = Command(cmd);
  if (!r.ok()) return r.status();
  return r->buffer_id();
}

absl::Status GpuSession::FreeBuffer(uint64_t buffer_id) {
  v1::DeviceCommand cmd;
  cmd.mutable_free()->set_buffer_id(buffer_id);
  return Command(cmd).status();
}

absl::StatusOr<std::string> GpuSession::Read(uint64_t buffer_id, uint64_t offset,
                                             uint64_t length) {
  v1::DeviceCommand cmd;
  cmd.mutable_read()->set_buffer_id(buffer_id);
  cmd.mutable_read()->set_offset(offset);
  cmd.mutable_read()->set_length(length);
  auto r = Command(cmd);
  if (!r.ok()) return r.status();
  return std::move(*r->mutable_data());
}

absl::Status GpuSession::ScrubAndVerify(uint64_t buffer_id, uint64_t size) {
  auto r = ScrubUnlessGone(buffer_id, size);
  if (!r.ok()) return r.status();
  if (*r == ScrubResult::kGone) {
    return absl::NotFoundError("GPU: no such buffer " + std::to_string(buffer_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<GpuSession::ScrubResult> GpuSession::ScrubUnlessGone(uint64_t buffer_id,
                                                                    uint64_t size) {
  constexpr uint64_t kPiece = 8u << 20;
  auto all_zero = [&](const std::string& data, uint64_t n) {
    if (data.size() != n) return absl::DataLossError("short read during scrub check");
    for (char c : data) {
      if (c != 0) {
        return absl::DataLossError("scrub verification failed: non-zero byte in buffer " +
                                   std::to_string(buffer_id));
      }
    }
    return absl::OkStatus();
  };
  // The first piece is read back by the scrub command itself (one round
  // trip for a buffer of up to 8 MiB); the rest with Reads.
  const uint64_t first = std::min(kPiece, size);
  v1::DeviceCommand cmd;
  cmd.mutable_scrub()->set_buffer_id(buffer_id);
  cmd.mutable_scrub()->set_read_back(first);
  auto r = SealedCommand(cmd);
  if (!r.ok()) return r.status();  // the transport's word is never "gone"
  if (r->code() == static_cast<int>(absl::StatusCode::kNotFound)) {
    // Said by the device, sealed under this session: the buffer is not in
    // its memory (a reset or an unauthorised key exchange wiped it all).
    return ScrubResult::kGone;
  }
  if (r->code() != 0) {
    return absl::Status(static_cast<absl::StatusCode>(r->code()), "GPU: " + r->message());
  }
  if (r->bytes_scrubbed() != size) {
    return absl::DataLossError("GPU scrubbed " + std::to_string(r->bytes_scrubbed()) +
                               " bytes of a " + std::to_string(size) + "-byte buffer");
  }
  absl::Status z = all_zero(r->data(), first);
  if (!z.ok()) return z;
  for (uint64_t off = first; off < size; off += kPiece) {
    uint64_t n = std::min(kPiece, size - off);
    auto data = Read(buffer_id, off, n);
    if (!data.ok()) return data.status();
    z = all_zero(*data, n);
    if (!z.ok()) return z;
  }
  return ScrubResult::kScrubbed;
}

absl::Status GpuSession::Heartbeat() {
  v1::DeviceCommand cmd;
  cmd.mutable_heartbeat();
  const absl::Time sent = absl::Now();
  absl::Status s = Command(cmd).status();
  if (s.ok()) last_heartbeat_ = sent;
  return s;
}

absl::Status GpuSession::RotateIv(bool h2d, uint32_t engine) {
  if (engine >= kCopyEngines || (!h2d && engine != 0)) {
    return absl::InvalidArgumentError("the driver rotates D2H IVs of LCE0 and H2D IVs of "
                                      "LCE0..LCE7 only; asked for LCE" +
                                      std::to_string(engine));
  }
  if (h2d && h2d_[engine].key.empty()) {
    absl::Status d = DeriveH2d(engine);
    if (!d.ok()) return d;
  }
  v1::DeviceCommand cmd;
  cmd.mutable_rotate_iv()->set_copy_engine(engine);
  cmd.mutable_rotate_iv()->set_h2d(h2d);
  auto r = Command(cmd);
  absl::Status s;
  const std::string lce = "LCE" + std::to_string(engine);
  if (!r.ok()) {
    // Whether or not the device rotated (a reply that did not parse), this
    // end cannot know where the slot's IV is: fail closed.
    s = r.status();
  } else if (!h2d) {
    s = r->d2h_next_counter() == kFirstMessageCounter
            ? d2h_.Rotate(r->d2h_channel_counter())
            : absl::DataLossError("the GPU rotated LCE0's D2H IV but its next message "
                                  "counter is " + std::to_string(r->d2h_next_counter()) +
                                  ", not the first");
  } else if (h2d_[engine].channel_counter == std::numeric_limits<uint64_t>::max() ||
             r->h2d_channel_counter() != h2d_[engine].channel_counter + 1 ||
             r->h2d_next_counter() != kFirstMessageCounter) {
    s = absl::DataLossError("the GPU rotated " + lce + "'s H2D IV to channel counter " +
                            std::to_string(r->h2d_channel_counter()) + ", message counter " +
                            std::to_string(r->h2d_next_counter()) +
                            "; this end expected the next channel counter and the first "
                            "message counter");
  } else {
    h2d_[engine].channel_counter = r->h2d_channel_counter();
    h2d_handed_[engine] = false;  // a fresh IV space nobody has used
  }
  // Out of step with the device, or it may be: nothing more can be trusted
  // to be in order, and a fresh exchange is what a spent channel counter
  // needs anyway.
  if (!s.ok()) control_.reset();
  return s;
}

absl::Status GpuSession::DeriveH2d(uint32_t engine) {
  auto k = DeriveCopyEngineKey(session_secret_, engine, true);
  if (!k.ok()) return k.status();
  h2d_[engine] = std::move(*k);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChannelMaterial>> GpuSession::H2dKeysForHandoff(uint32_t engines) {
  if (!established()) {
    return absl::FailedPreconditionError("no CC session with the GPU: establish first");
  }
  if (engines == 0 || engines > kCopyEngines) {
    return absl::InvalidArgumentError("a hand-off takes 1 to " + std::to_string(kCopyEngines) +
                                      " copy engines' keys, not " + std::to_string(engines));
  }
  std::vector<ChannelMaterial> out;
  for (uint32_t e = 0; e < engines; ++e) {
    if (h2d_[e].key.empty()) {
      absl::Status d = DeriveH2d(e);
      if (!d.ok()) return d;
    }
    if (h2d_handed_[e]) {
      absl::Status s = RotateIv(true, e);
      if (!s.ok()) return s;
    }
    h2d_handed_[e] = true;
    out.push_back(h2d_[e].Clone());
  }
  return out;
}

absl::Status GpuSession::GrantH2d(const std::vector<v1::H2dGrant>& grants) {
  v1::DeviceCommand cmd;
  for (const v1::H2dGrant& g : grants) *cmd.mutable_grant_h2d()->add_grants() = g;
  return Command(cmd).status();
}

absl::StatusOr<v1::DeviceReply> GpuSession::QueryChannel() {
  v1::DeviceCommand cmd;
  cmd.mutable_query();
  return Command(cmd);
}

}  // namespace gputravel
