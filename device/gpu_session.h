#ifndef GPUTRAVEL_DEVICE_GPU_SESSION_H_
#define GPUTRAVEL_DEVICE_GPU_SESSION_H_

#include <array>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "device/d2h_receiver.h"
#include "keyxfer/cc_channel.h"
#include "keyxfer/certificate_cache.h"
#include "keyxfer/device_session.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/x509.h"
#include "grpcpp/grpcpp.h"
#include "proto/device.grpc.pb.h"
#include "util/task_thread.h"

namespace gputravel {

// The orchestrator's driver for one GPU: authenticates the device, owns the CC
// session (control channel and copy-engine keys) and issues sealed commands.
// A real deployment puts NVIDIA's driver here; the emulated device speaks the
// same protocol over gRPC. Not thread-safe.
//
// Establish is on every trip's critical path (P3 needs a fresh P-384 ECDHE
// after each trip), so it does ahead of time what does not depend on the
// device's answer: the next ephemeral key is generated in the background
// once an exchange is done (each key is used for exactly one exchange), the
// device's checked identity (certificate chain, serial) is kept for
// kCertificateRecheck so that an exchange is one round trip, and the
// signature check runs beside the ECDH.
class GpuSession {
 public:
  // How long a verified device identity is trusted without fetching it and
  // re-checking its certificate's chain and validity period.
  static constexpr absl::Duration kCertificateRecheck = absl::Seconds(60);

  // `device_ca_der` is the pinned device CA; `expected_serial` (optional) pins
  // the one GPU this session may be with (P5).
  GpuSession(std::shared_ptr<grpc::Channel> channel, std::string device_ca_der,
             std::string expected_serial);
  ~GpuSession();
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  // Fresh key agreement: verifies the device certificate against the pinned
  // CA, the serial, and the signature over the transcript; derives new keys.
  // Every key of the previous session is dead afterwards (P3). While this
  // end holds the session in force, the request carries its authorisation
  // (sealed under that session, naming this exchange's key and nonce) to
  // keep device memory; without it, the device wipes memory. memory_kept()
  // says, as the device signed it, which happened.
  absl::Status Establish();

  // What became of a command sent with a key exchange (EstablishAfter).
  struct PriorOutcome {
    // OK when the device answered it under the session it was sealed in,
    // which proves the device still held that session: the GPU that came
    // back is the one that left. Otherwise why not.
    absl::Status session = absl::UnknownError("not sent");
    // The command's reply, or its refusal: the session's failure, or the
    // device's own answer (e.g. NOT_FOUND for a buffer a reset wiped).
    absl::StatusOr<v1::DeviceReply> reply = absl::UnknownError("not sent");
    // The exchange the command rode on did not verify and this end made a
    // second one (with a fresh look at the device's identity): the session
    // number then counts both.
    bool retried = false;
    // The device's count, sealed in the reply under the session that ended,
    // of chunks its copy engines refused under an H2D grant although they
    // authenticated (DeviceReply.h2d_grant_refusals): non-zero means a
    // holder of a handed-out key wrote outside its window. 0 unless the
    // reply opened under that session (`session` OK).
    uint64_t h2d_grant_refusals = 0;
    // Chunks the session's copy engines accepted, all engines together
    // (DeviceReply.h2d_chunks_accepted), sealed likewise; 0 unless the reply
    // opened.
    uint64_t h2d_chunks_accepted = 0;
  };
  // Establish, with `prior` sealed under the current session and executed by
  // the device just before the exchange ends that session, in the same
  // round trip (KeyExchangeRequest.prior_command). The return value is the
  // exchange's, as Establish's; `*outcome` is the command's. A command that
  // names a copy engine other than LCE0 is refused before anything is sent.
  absl::Status EstablishAfter(const v1::DeviceCommand& prior, PriorOutcome* outcome);

  // Proves the device still holds the current session (the same GPU came
  // back, not a substitute): a sealed query must round-trip.
  absl::Status VerifyStillSameSession();

  absl::StatusOr<uint64_t> AllocBuffer(uint64_t size);
  absl::Status FreeBuffer(uint64_t buffer_id);
  // Reads back through the sealed control channel (the D2H path).
  absl::StatusOr<std::string> Read(uint64_t buffer_id, uint64_t offset,
                                   uint64_t length);
  // Zeroes on the device, then reads every byte back and checks it (P2); the
  // scrub command itself returns the first 8 MiB, Reads the rest.
  absl::Status ScrubAndVerify(uint64_t buffer_id, uint64_t size);
  // What ScrubUnlessGone found.
  enum class ScrubResult {
    kScrubbed,  // zeroed, and every byte read back as zero
    kGone,      // the device said, sealed under this session, it has no such buffer
  };
  // ScrubAndVerify, except that a buffer the device itself says it does not
  // have (its reply opened under this session: a reset or an unauthorised
  // key exchange wiped all memory) is kGone. A transport error, whatever its
  // code, is an error: only the device's sealed word can say "gone" (P2).
  absl::StatusOr<ScrubResult> ScrubUnlessGone(uint64_t buffer_id, uint64_t size);
  // Keeps the session alive on a device with a heartbeat period.
  absl::Status Heartbeat();
  // When the device last heard a heartbeat from this session: the last
  // successful Heartbeat or key exchange (infinite past if none).
  absl::Time last_heartbeat() const { return last_heartbeat_; }
  // LCE0's channels: next counters, channel counters and totals.
  absl::StatusOr<v1::DeviceReply> QueryChannel();
  // Rotates the IV of a copy engine's H2D (`h2d`) key slot, or of LCE0's D2H
  // slot, on the device and here (RotateIvCommand): the next channel
  // counter, the first message counter. Any failure (the device's refusal at
  // its last channel counter included) abandons the session: establish
  // again. Read and ScrubAndVerify rotate the D2H IV on their own once at
  // most iv_rotation_threshold() counters are left, as the driver does (a
  // read riding on a key exchange, EstablishAfter, is not checked: its
  // session ends with it); H2D IVs are rotated by H2dKeysForHandoff.
  absl::Status RotateIv(bool h2d, uint32_t engine = 0);
  // The driver rotates a channel's IV when at most this many message
  // counters are left (kIvRotationThreshold; tests lower it).
  uint64_t iv_rotation_threshold() const { return iv_rotation_threshold_; }
  void set_iv_rotation_threshold(uint64_t t) { iv_rotation_threshold_ = t; }
  // Tests of the D2H IV rotation: this end expects the next D2H copy at
  // `next` (as EmulatedGpu::SetD2hCounterForTest moves the device's).
  void SetD2hCounterForTest(uint32_t next) { d2h_.next = next; }

  const std::string& serial() const { return serial_; }
  uint64_t session_id() const { return session_id_; }
  // The device memory the GPU declared with its last identity that checked
  // out (certificate, serial): 0 until then. The declaration is not signed:
  // it sizes what the orchestrator asks for, it protects nothing.
  uint64_t device_memory_bytes() const { return device_memory_bytes_; }
  // Whether device memory survived the last successful exchange (signed by
  // the device in the exchange's transcript): false after any exchange this
  // end could not authorise, the first one of a process included.
  bool memory_kept() const { return memory_kept_; }
  bool established() const { return control_ != nullptr; }
  // The H2D key material of copy engines LCE0..LCE(engines-1) to hand to a
  // holder (copies, in engine order); each engine's window starts at
  // kFirstMessageCounter. Each hand-off is a key fetch, and a fetch gets an
  // IV space of its own, as the driver's keystore bumps the channel counter
  // on every fetch: the session's first hand-off of an engine gets the space
  // nobody has used (the key existed only in this process until then), a
  // later one in the same session first rotates that slot's IV (RotateIv,
  // one sealed command). So no two hand-offs share IVs, and nothing staged
  // for an earlier window can land in a later one. A rotation separates IVs,
  // not keys: whoever got the earlier hand-off knows the key of the later
  // one. So a key whose hand-off left the orchestrator is never handed out
  // again (TripRunner re-keys on the way home whatever happened); a second
  // fetch in one session is for a hand-off whose first never left. LCE0's
  // key comes with the exchange; another engine's is derived from the
  // session secret when first handed out (the device makes its slot alike).
  absl::StatusOr<std::vector<ChannelMaterial>> H2dKeysForHandoff(uint32_t engines);
  // Grants copy engines' H2D slots, for the IV spaces in force, to the
  // windows about to be handed out (GrantH2dCommand, one sealed command for
  // all of them): each key writes only its buffer range, at counters up to
  // its last, while it lives.
  absl::Status GrantH2d(const std::vector<v1::H2dGrant>& grants);

 private:
  // A device whose identity was checked: certificate against the pinned CA,
  // common name = serial, serial = the pinned one.
  struct KnownDevice {
    std::string serial;
    std::shared_ptr<const VerifiedCertificate> certificate;
    absl::Time fetched;
  };
  absl::StatusOr<KnownDevice> FetchIdentity();
  // Derives copy engine `engine`'s H2D key from the session secret.
  absl::Status DeriveH2d(uint32_t engine);
  absl::Status EstablishWith(const v1::DeviceCommand* prior, PriorOutcome* outcome);
  // One P-384 ECDHE with `device` for `request` (made with `eph`); installs
  // the session if it verifies. `*response` gets the response whenever one
  // arrived, verified or not.
  absl::Status Exchange(const KnownDevice& device, EcKey eph,
                        const v1::KeyExchangeRequest& request,
                        v1::KeyExchangeResponse* response);
  // A command sealed under the session; its reply opened under it. A reply
  // with a non-zero code (the device's authenticated refusal) is returned as
  // a reply; every other failure is a status.
  absl::StatusOr<v1::DeviceReply> SealedCommand(const v1::DeviceCommand& cmd);
  // SealedCommand, with a refusal turned into its status.
  absl::StatusOr<v1::DeviceReply> Command(const v1::DeviceCommand& cmd);
  void PrepareNextEphemeral();
  absl::StatusOr<EcKey> TakeEphemeral();

  std::unique_ptr<v1::Device::Stub> stub_;
  CertificateCache device_certificates_;
  std::string expected_serial_;
  std::string serial_;
  uint64_t session_id_ = 0;
  std::unique_ptr<SealedChannel> control_;
  // The copy engine's D2H channel: read-backs arrive encrypted under
  // lce00_d2h_user, and are decrypted here at the counter this end expects.
  D2hReceiver d2h_;
  // The session secret (zeroizing) the other engines' keys are derived from.
  SecretBytes session_secret_;
  // Each copy engine's H2D key (empty until derived) and whether its IV
  // space in force was handed out.
  std::array<ChannelMaterial, kCopyEngines> h2d_;
  std::array<bool, kCopyEngines> h2d_handed_{};
  bool memory_kept_ = false;
  uint64_t device_memory_bytes_ = 0;
  uint64_t iv_rotation_threshold_ = kIvRotationThreshold;
  absl::Time last_heartbeat_ = absl::InfinitePast();
  std::future<absl::StatusOr<EcKey>> next_ephemeral_;
  std::optional<KnownDevice> known_;
  // Last, so destroyed first (each runs what is queued, then joins): the
  // signature check made beside the ECDH, and the next ephemeral key made
  // ahead at idle priority.
  TaskThread beside_{TaskThread::Priority::kNormal, TaskThread::Placement::kAwayFromCaller};
  TaskThread idle_{TaskThread::Priority::kIdle};
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_GPU_SESSION_H_
