#ifndef GPUTRAVEL_DEVICE_EMULATED_GPU_H_
#define GPUTRAVEL_DEVICE_EMULATED_GPU_H_

#include <array>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "device/bounce_buffer.h"
#include "device/device_memory.h"
#include "util/task_thread.h"
#include "keyxfer/cc_channel.h"
#include "keyxfer/device_session.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/secret_bytes.h"
#include "proto/device.pb.h"

namespace gputravel {

struct EmulatedGpuOptions {
  std::string serial = "EMU-H100-0001";
  uint64_t memory_bytes = 256ull << 20;
  // Key rotation threshold, counted as the driver counts it: a key's total
  // bytes / 16 plus its number of operations. Once either key of an engine's
  // pair is past it (the operation that crosses it is done, as the driver
  // notices a crossing afterwards), the engine refuses both directions until
  // a fresh key exchange (the driver's default upper threshold; the driver
  // would rotate the pair by HKDF of the old keys, which P3 forbids here).
  uint64_t rotation_threshold = 24296003999ull;
  // Heartbeat period (the driver allows 4-255 s; zero disables it). A session
  // that sees no heartbeat for twice the period puts the device into a state
  // where it refuses everything until a reset.
  absl::Duration heartbeat_period = absl::ZeroDuration();
  // Each domain's shared (unencrypted) memory: the directory its bounce rings
  // are created in, standing for the pages its TD shares with devices. The
  // device maps a ring only from the routed domain's own directory, as the
  // IOMMU lets the GPU reach only the shared pages of the TD it is assigned
  // to; a domain without an entry cannot attach a ring. Each directory is
  // opened once, when the device is made (not through a symbolic link), and
  // rings are opened relative to it from then on.
  std::map<std::string, std::string> shared_dirs;
  // Time source (tests advance it); null: absl::Now.
  std::function<absl::Time()> clock;
  // Tests of the copy engine's races only: called on the copy engine's
  // thread after a chunk is decrypted and before it is committed, while the
  // device lock is free (a test can re-key, scrub or reset from here).
  std::function<void()> copy_engine_hook_for_test;
  // Tests of the engines' concurrency only: called with the engine's number
  // on its thread while it decrypts (no device lock held), so a test can hold
  // one engine mid-chunk and see another finish meanwhile.
  std::function<void(uint32_t engine)> decrypt_hook_for_test;
};

// The emulated H100 in CC mode: the state and rules of the real device where
// security and performance live. Every method names the calling domain; only
// the owner (set by the MUX through SetOwner) is served. Thread-safe.
//
// Rules enforced: the identity key signs every key exchange; a new exchange
// ends the old session (all its keys die); control commands arrive sealed in
// strict counter order; each of the eight copy engines (LCE0..LCE7) decrypts
// host-to-device chunks with its own H2D key at its own next counter (the
// sender supplies no IV), checks the tag before touching device memory, and
// refuses replayed, reordered, misaligned or over-threshold chunks, and,
// once the session's owner granted the slot to a window (GrantH2dCommand),
// any chunk outside that window's buffer, byte range or counters; read-backs
// leave under the named engine's own D2H key and counter; each slot's IV
// carries a channel counter that an IV rotation (RotateIvCommand) moves on,
// closing the old IV space; a reset wipes sessions, keys and memory, and so
// does a key exchange that the session in force did not authorise.
//
// The copy engines (SubmitH2D) run beside everything else and beside each
// other: each engine handles one chunk at a time, in arrival order, under its
// own lock (CopyEngine::mu), and decrypts without the device-wide lock (mu_),
// which is taken only to check a chunk before and to commit it after, so
// Control, GetStatus, SetOwner and the other engines never wait behind a
// decryption. Commits are serialized by mu_, so engines writing different
// ranges of one buffer (or the same page) leave each write whole. A
// chunk whose session, IV, memory or route changed while it was being
// decrypted (re-key, IV rotation, reset, scrub, free, heartbeat miss) is
// discarded and changes
// nothing. A chunk is decrypted into its copy engine's own memory and put in
// place only after its tag checks: a chunk covering one whole 2 MiB page of
// device memory (device_memory.h) into a spare page that then takes that
// page's place (the old page becomes the spare), any other chunk into a
// scratch area it is then copied from. Neither is wiped per chunk; both are
// wiped when the data's life ends on the device (scrub, free, reset,
// heartbeat miss, destruction), so no plaintext survives a scrub there either
// (P2).
class EmulatedGpu {
 public:
  EmulatedGpu(EmulatedGpuOptions options, EcKey identity_key,
              std::string certificate_der);
  ~EmulatedGpu();

  // Domain-facing (the PCIe function as seen by the routed TD).
  absl::StatusOr<v1::DeviceIdentity> GetIdentity(const std::string& domain);
  // A request's prior_command is executed as Control would execute it, under
  // the session in force, before the exchange starts; it is answered in the
  // response whatever the exchange's outcome, unless the exchange fails.
  // Device memory is wiped unless that command carries keep_memory naming
  // this request's key and nonce (P1).
  absl::StatusOr<v1::KeyExchangeResponse> KeyExchange(
      const std::string& domain, const v1::KeyExchangeRequest& request);
  absl::StatusOr<v1::SealedMessage> Control(const std::string& domain,
                                            const v1::SealedMessage& request);
  absl::StatusOr<uint64_t> AttachBounce(const std::string& domain,
                                        const v1::AttachBounceRequest& request);
  absl::Status DetachBounce(const std::string& domain, uint64_t bounce_id);
  // One chunk; a request with `attach` maps its ring first, one with
  // release_bounce unmaps it afterwards (whatever became of the chunk).
  // Returns the next counter; `*attached` (if given) gets the handle of a
  // ring the request attached and did not release, else 0.
  absl::StatusOr<uint32_t> SubmitH2D(const std::string& domain,
                                     const v1::SubmitH2DRequest& request,
                                     uint64_t* attached = nullptr);

  // Host-facing (the MUX's PCIe topology control).
  void SetOwner(const std::string& domain);
  void Reset();
  v1::DeviceStatus Status();

  // Moves a copy engine's next H2D / D2H counter (tests of IV exhaustion
  // only).
  void SetH2dCounterForTest(uint32_t next, uint32_t engine = 0);
  void SetD2hCounterForTest(uint32_t next, uint32_t engine = 0);
  // Moves a slot's channel counter, with its cipher (tests of the channel
  // counter's exhaustion only).
  void SetChannelCounterForTest(uint64_t channel, uint32_t engine, bool h2d);
  // True when the copy engine's own memory (its scratch and its spare page)
  // holds no plaintext (waits for a chunk in flight to finish first). Tests of
  // P2 only.
  bool ScratchIsClearForTest();
  // True when every byte of every allocated device buffer is zero (waits for
  // a chunk in flight to finish first). Tests of the wipe on a heartbeat miss
  // only: after one, nothing else can read device memory.
  bool MemoryIsZeroForTest();
  // Whether the device needs a reset, read without applying the heartbeat
  // rule first (Status applies it): tests of the watchdog only.
  bool NeedsResetWithoutCheckingForTest();
  // The public point of the ephemeral key the next exchange will use (waits
  // for it to be made); empty if none is pending. Tests only.
  std::string PendingEphemeralForTest();

 private:
  // Takes every engine's lock in engine order (tests and destruction: no
  // chunk in flight while they hold them).
  void LockAllEngines() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void UnlockAllEngines() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // One key slot of one copy engine: host-to-device (lce0N_h2d_user, which
  // the engine decrypts with at its next counter) or device-to-host
  // (lce0N_d2h_user, which it encrypts read-backs with at its next counter).
  // Each slot has its own counter and exhaustion, and its own use, counted as
  // the driver counts it for rotation (total bytes / 16 + operations).
  //
  // The IV is the message counter and the slot's 64-bit channel counter
  // (ChannelIv); an IV rotation (RotateIvCommand) bumps the channel counter,
  // starts the message counter again and replaces `cipher`, so a chunk that
  // was decrypted with the old one is not committed (its cipher is no longer
  // the slot's).
  struct KeySlot {
    // Null until the slot is first used. Shared: the copy engine keeps the
    // one it decrypts a chunk with while a rotation replaces it.
    std::shared_ptr<ChannelCipher> cipher;
    uint64_t channel = 0;  // the channel counter `cipher` was made with
    uint32_t next = kFirstMessageCounter;
    // H2D only: the grant for the IV space in force (GrantH2dCommand): the
    // last counter a chunk may use, and the buffer (0: none, writes
    // anywhere) and byte range it may write. A rotation lifts it.
    uint32_t last = kLastMessageCounter;
    uint64_t grant_buffer = 0, grant_offset = 0, grant_length = 0;
    // H2D only: chunks refused under the grant that authenticated.
    uint64_t grant_refusals = 0;
    bool exhausted = false;
    uint64_t ops = 0, bytes = 0;  // chunks decrypted or copies encrypted
  };
  // A CC session: the control channel and the eight copy engines' key slots.
  // LCE0's pair is made at the exchange (the data path's engine); another
  // engine's at its first use, from the session secret, which dies with the
  // session.
  struct Session {
    uint64_t id = 0;
    std::unique_ptr<SealedChannel> control;  // receives gsp_h2d, sends gsp_d2h
    SecretBytes secret;
    std::array<KeySlot, kCopyEngines> h2d, d2h;
  };
  // Engine `engine`'s H2D or D2H slot of `ses`, made on first use; an error
  // for an engine the GPU does not have. Called with mu_ held (the copy
  // engine takes its own reference to an H2D slot's cipher, which only it
  // uses, under ce_mu_).
  static absl::StatusOr<KeySlot*> SlotLocked(Session* ses, uint32_t engine, bool h2d);
  // A cipher for engine `engine`'s H2D or D2H key at channel counter
  // `channel`, from the session secret.
  static absl::StatusOr<std::shared_ptr<ChannelCipher>> SlotCipher(const Session& ses,
                                                                   uint32_t engine, bool h2d,
                                                                   uint64_t channel);
  // RotateIvCommand: the slot's next channel counter, the first message
  // counter, a cipher for them; RESOURCE_EXHAUSTED at the last channel
  // counter. The error goes in `*r`.
  void RotateIvLocked(uint32_t engine, bool h2d, v1::DeviceReply* r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED once either key of the engine's pair is past the
  // rotation threshold (the driver rotates keys by pair): refuses both
  // directions until a fresh exchange.
  absl::Status PairRotationDueLocked(const Session* ses, uint32_t engine) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Owner check, and the heartbeat rule (a miss wipes the session): DATA_LOSS
  // while the device needs a reset.
  absl::Status CheckOwnerLocked(const std::string& domain)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // No heartbeat for twice the period: the session and memory are wiped and
  // the device needs a reset.
  void ApplyHeartbeatRuleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time Now() const;
  // Opens a command sealed under the session in force (strict counter order).
  absl::StatusOr<v1::DeviceCommand> OpenCommandLocked(const v1::SealedMessage& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Executes an opened command and seals the reply under the session in
  // force. `in_exchange`: the command rode on a key exchange, where
  // keep_memory belongs and the oneof may be empty; Control refuses
  // keep_memory.
  absl::StatusOr<v1::SealedMessage> ExecuteAndSealLocked(const v1::DeviceCommand& cmd,
                                                         bool in_exchange)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every buffer is gone, each zeroized, as after a reset.
  void WipeMemoryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes attached ring `bounce_id` and hands it over (null if none): the
  // caller drops it after releasing mu_, so that unmapping the ring (tens of
  // MiB, a TLB shootdown) never holds up the other copy engines.
  std::shared_ptr<BounceBuffer> TakeBounceLocked(uint64_t bounce_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // GrantH2dCommand: validates every grant, then applies them all; an error
  // goes in `*r` and grants nothing.
  void GrantH2dLocked(const v1::GrantH2dCommand& cmd, v1::DeviceReply* r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs a control command; a Read or a Scrub's read-back leaves the bytes
  // as the copy engine's D2H copy in `*d2h_copy` (ciphertext || tag).
  v1::DeviceReply ExecuteLocked(const v1::DeviceCommand& cmd, std::string* d2h_copy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies [offset, +length) of `buffer` out under copy engine `engine`'s D2H
  // key at its next counter into `*d2h_copy`; the counter and length go in `*r`. An
  // error (counter spent, rotation threshold) goes in `*r` and copies nothing.
  void D2hCopyLocked(uint32_t engine, uint64_t buffer_id, const DeviceBuffer& buffer,
                     uint64_t offset, uint64_t length, v1::DeviceReply* r,
                     std::string* d2h_copy)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The data in device memory ends (scrub, free, reset, heartbeat miss): a
  // chunk being decrypted is discarded, and every engine's scratch and spare
  // page are wiped now (or by the engine as soon as its chunk is discarded).
  void EndDataLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The copy engine's handling of one chunk (SubmitH2D without the release).
  absl::StatusOr<uint32_t> CopyChunk(const std::string& domain,
                                     const v1::SubmitH2DRequest& request);
  struct CopyEngine;
  // Phase 3 of a chunk that is not committed: wipes what engine `ce`
  // decrypted (into `target`, its scratch or its spare page).
  absl::Status DiscardChunkLocked(CopyEngine& ce, uint8_t* target, size_t n, absl::Status why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t MemoryInUseLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The responder's next ephemeral P-384 key, made at idle priority once an
  // exchange is done (and after a route change or a reset, if none is
  // pending): the key exchange is on every trip's critical path. Taken only
  // if it is ready, else a key is made inline. Each key serves exactly one
  // exchange; a reset discards the pending one.
  absl::StatusOr<EcKey> TakeEphemeral();
  void PrepareEphemeral();
  void DiscardEphemeral();

  const EmulatedGpuOptions options_;
  // The shared-memory directories, opened at construction (fd -1 and why,
  // when a directory could not be opened).
  struct SharedDir {
    int fd = -1;
    std::string error;
  };
  std::map<std::string, SharedDir> shared_dirs_;
  const EcKey identity_key_;
  const std::string certificate_der_;

  absl::Mutex eph_mu_;
  std::future<absl::StatusOr<EcKey>> next_ephemeral_ ABSL_GUARDED_BY(eph_mu_);

  // One copy engine's own memory: the decryption targets, the scratch for
  // chunks that are copied in and the spare page for whole-page chunks (made
  // at the first one). Touched by the engine (holding `mu`) while `busy`, and
  // by mu_ holders only while !busy.
  struct CopyEngine {
    // One chunk at a time on this engine; taken before the device's mu_
    // (never after), and never two engines' at once except all of them in
    // engine order (tests, destruction).
    absl::Mutex mu;
    std::vector<uint8_t> scratch;
    DevicePage spare{0};
    // The fields below are guarded by the device's mu_.
    bool busy = false;
    // Leading bytes of scratch that may hold plaintext of committed chunks.
    size_t scratch_residue = 0;
    // True when spare holds a page that was device memory (plaintext).
    bool spare_residue = false;
    // Set by EndDataLocked while busy: the engine wipes all of scratch and
    // spare.
    bool wipe_pending = false;
  };
  std::array<CopyEngine, kCopyEngines> engines_;
  absl::Mutex mu_;
  std::string owner_ ABSL_GUARDED_BY(mu_);
  uint64_t last_session_id_ ABSL_GUARDED_BY(mu_) = 0;
  // Shared so that a chunk being decrypted outside mu_ keeps its session's
  // cipher alive when a key exchange or reset replaces the session.
  std::shared_ptr<Session> session_ ABSL_GUARDED_BY(mu_);
  // Device memory: buffer id -> bytes (really stored, really zeroed).
  std::map<uint64_t, DeviceBuffer> buffers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_buffer_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Shared for the same reason: a ring detached or dropped mid-chunk stays
  // mapped until the copy engine is done reading it.
  std::map<uint64_t, std::shared_ptr<BounceBuffer>> bounces_ ABSL_GUARDED_BY(mu_);
  uint64_t next_bounce_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Bumped whenever data in device memory ends; a chunk decrypted across a
  // change is discarded.
  uint64_t data_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t resets_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t memory_wipes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rejected_chunks_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_heartbeat_ ABSL_GUARDED_BY(mu_);
  uint64_t heartbeats_ ABSL_GUARDED_BY(mu_) = 0;  // accepted
  // The heartbeat rule applies from the first session after a reset until
  // the next reset (or a miss), also while a failed exchange left no session:
  // device memory may still hold data then.
  bool heartbeat_armed_ ABSL_GUARDED_BY(mu_) = false;
  bool needs_reset_ ABSL_GUARDED_BY(mu_) = false;

  // With a heartbeat period (and the real clock): applies the heartbeat rule
  // every quarter period on its own, so a missed heartbeat wipes the session
  // and memory soon after the deadline even if nobody calls the device. (With
  // a test clock the rule is applied at each call only.) Stopped first in the
  // destructor.
  void Watchdog();
  absl::Mutex watchdog_mu_;
  bool stop_watchdog_ ABSL_GUARDED_BY(watchdog_mu_) = false;
  std::thread watchdog_;

  // Last, so destroyed first (each runs what is queued, then joins):
  // the signature made beside the ECDH of a key exchange, and the next
  // ephemeral key made ahead at idle priority.
  TaskThread beside_{TaskThread::Priority::kNormal, TaskThread::Placement::kAwayFromCaller};
  TaskThread idle_{TaskThread::Priority::kIdle};
};

}  // namespace gputravel

#endif  // GPUTRAVEL_DEVICE_EMULATED_GPU_H_
