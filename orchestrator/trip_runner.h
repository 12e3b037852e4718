#ifndef GPUTRAVEL_ORCHESTRATOR_TRIP_RUNNER_H_
#define GPUTRAVEL_ORCHESTRATOR_TRIP_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "device/gpu_session.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/attester.h"
#include "orchestrator/holder_channel.h"
#include "orchestrator/state_store.h"
#include "orchestrator/trip_steps.h"
#include "proto/holder.grpc.pb.h"
#include "proto/mux.grpc.pb.h"
#include "util/task_thread.h"

namespace gputravel {

// What one trip moves: holder H's dataset window into device buffer B.
struct TripPlan {
  std::string campaign;
  uint64_t trip = 0;  // also the MUX fencing token
  std::string holder;
  std::string holder_domain;
  uint64_t window_offset = 0;
  uint64_t window_length = 0;
  uint64_t buffer_id = 0;
  uint64_t buffer_bytes = 0;
  uint32_t chunk_bytes = 0;
  // Copy engines the window is written through side by side (1..8), each
  // with its own key and counter window (HandoffBinding.lanes).
  uint32_t copy_engines = 1;
  // A holder that does not answer (or, while provisioning, makes no progress)
  // for this long fails the trip.
  double holder_timeout_seconds = 120;
  // The campaign's training terms, bound into the hand-off: the holder
  // checks them, and the window's length, against its training policy.
  v1::TrainingTerms terms;
};

// Whose side a failed trip is charged to. The host relays every message and
// can cut, delay or withhold any of them, so a failure is the holder's only
// on evidence the host cannot forge.
enum class TripFault {
  // Not charged to a party: a cancel, or this orchestrator's own side (a
  // commit, a heartbeat).
  kNone,
  // Evidence the holder failed: its agent said so (Provision's
  // "gputravel-fault: holder", over mTLS under its certificate), it ended
  // Provision without a report or with one that does not open, the device
  // refused chunks made with its keys outside its window, or its report
  // does not match a window the device accepted in full.
  kHolder,
  // The device path explains it: the agent (attested) says its write failed
  // on the GPU or did not reach it, or that the GPU held its chunks
  // unacknowledged past holder_timeout_seconds; or the GPU came home without
  // the session it was handed out with.
  kHost,
  // No evidence either way: a holder that did not answer, a stream that
  // broke, a deadline, attestation evidence that does not verify or meet the
  // policy, a key exchange nobody owns up to, a window the device did not
  // receive in full. The host can cause each of these, so the holder is not
  // charged.
  kUndetermined,
};
const char* TripFaultName(TripFault fault);  // "holder", "host", ...

// How a trip ended. `ok` means: provisioned, digest matched, trained (if a
// trainer is configured), re-keyed, scrubbed and verified.
struct TripOutcome {
  bool ok = false;
  std::string error;
  TripFault fault = TripFault::kNone;
  bool cancelled = false;
  bool rekeyed = false;
  bool scrub_verified = false;
  bool trained = false;
  // The device said (sealed under the orchestrator's session) that the
  // trip's buffer no longer exists: its memory was wiped (a reset, or a key
  // exchange it did not authorise). The next trip needs a new buffer.
  bool buffer_gone = false;
};

// Callbacks through which the engine makes each step durable and observable.
class TripHooks {
 public:
  virtual ~TripHooks() = default;
  // Commits the move to `step` (orchestrator/trip_steps.h) BEFORE its side
  // effect. An error stops the trip, which then takes the safe path.
  virtual absl::Status Step(TripStep step, const std::string& message) = 0;
  // Commits step "route_out" together with the counter window about to be
  // handed to the holder (P4: recorded before it leaves), flushed to disk.
  virtual absl::Status RouteOut(const TripCounterWindow& window,
                                const std::string& message) = 0;
  // Live provisioning progress from the holder (not durable).
  virtual void Progress(uint64_t bytes, uint64_t total) = 0;
  // The holder's report and the digest check, after the re-key, committed
  // together with the move to `then_step` (train or scrub: the step that
  // follows, before its side effect) as one commit.
  virtual absl::Status Provisioned(uint64_t bytes, uint64_t chunks, double seconds,
                                   bool digest_match, TripStep then_step,
                                   const std::string& then_message) = 0;
  // Whether a trainer is configured (Train below trains and commits).
  virtual bool Trains() const = 0;
  // Trains on the window's plaintext (zeroized by the caller afterwards) and
  // commits the result with the model checkpoint; the trip is then at step
  // "scrub". Returns false (without committing) if no trainer is configured,
  // in which case the runner commits "scrub" itself.
  virtual absl::StatusOr<bool> Train(const std::string& plaintext) = 0;
  // The buffer was zeroed and every byte read back as zero (an event).
  virtual void Scrubbed() = 0;
  // The GPU is home under a fresh session: what is left of the trip (read
  // back, digest, scrub) waits on the device, not on the CPUs, so this is
  // where the next trip is prepared (not durable). Not while the GPU is away:
  // there the holder and the device need the CPUs to provision.
  virtual void Rekeyed() {}
  // The holder's TD was verified for this trip's channel (`peer`: what its
  // evidence showed and the policy accepted). Recorded, not durable for
  // recovery.
  virtual void Attested(const AttestedIdentity& peer) { (void)peer; }
};

// A mutually attested channel with a holder, opened ahead of its trip (it
// needs no GPU): the holder's evidence verified, ours made, the hand-off key
// derived. Single use; the holder keeps its end until the Provision that
// names channel_id.
// A prepared channel older than this is not used (its evidence is re-made).
inline constexpr std::chrono::seconds kPreparedChannelLifetime{30};

// Lets another thread stop a trip promptly: cancels the holder call in
// flight; every later step notices and takes the safe path.
class TripControl {
 public:
  void Cancel();
  bool cancelled() const;
  // The runner registers its in-flight holder call (nullptr to clear).
  void SetCall(grpc::ClientContext* ctx);

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* call_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// The steps of ARCHITECTURE section 4 for one trip, in order, each committed
// through TripHooks::Step before it happens: attested channel with the holder
// (still "planned": nothing has left), route out, hand-off + provisioning,
// route back, same-GPU check and fresh re-key, read-back + digest + training,
// scrub and verify. Any failure after route-out takes the safe path (route
// back, re-key, scrub, verify), so no holder keeps a working key and no other
// party finds residue. Run is its phases in order (OpenChannel,
// PrepareHandoff, Leave, ComeHome, VerifyAndTrain, then the scrub); one guard
// per trip (SafetyGuard) owns the hand-off key and the safe path, so no way
// out of a trip can skip either.
class TripRunner {
 public:
  // `heartbeat_period`: the device's CC heartbeat period (zero: off).
  TripRunner(std::string orchestrator_domain, std::string gpu_name, v1::Mux::Stub* mux,
             GpuSession* gpu, Attester* attester, Verifier* verifier,
             absl::Duration heartbeat_period = absl::ZeroDuration())
      : domain_(std::move(orchestrator_domain)), gpu_name_(std::move(gpu_name)),
        mux_(mux), gpu_(gpu), attester_(attester), verifier_(verifier),
        heartbeat_period_(heartbeat_period) {}

  // With a heartbeat period: sends a heartbeat if the device has not heard
  // one for a quarter of it (the GPU home and idle). Nothing to do otherwise.
  absl::Status KeepAlive();
  // The longest a trip may keep the GPU away with the heartbeat on: two
  // periods from the heartbeat sent as it leaves, less kHeartbeatMargin for
  // the way home and the re-key. Infinite without a heartbeat.
  absl::Duration MaxTimeAway() const;
  static constexpr absl::Duration kHeartbeatMargin = absl::Seconds(2);

  // Always returns an outcome for a trip that ended in a safe state. A non-OK
  // status means the GPU could not be brought back to a safe state (route
  // home, re-key or scrub failed): the caller must stop using the GPU.
  // `prepared`: a channel opened ahead (PrepareChannel); used if it is for
  // plan.holder and younger than kPreparedChannelLifetime, else dropped.
  absl::StatusOr<TripOutcome> Run(const TripPlan& plan, v1::HolderAgent::Stub* holder,
                                  TripHooks* hooks, TripControl* control,
                                  std::optional<PreparedChannel> prepared = std::nullopt);

  // Opens the attested channel with `holder` and completes it (verifies the
  // holder's evidence, makes ours). `control` (may be null) cancels it. On
  // failure `*fault` (may be null) is kHolder when the campaign CA revoked
  // the holder's certificate, else kUndetermined: neither a failed call nor
  // evidence that does not verify is evidence against the holder.
  absl::StatusOr<PreparedChannel> PrepareChannel(const std::string& holder_name,
                                                 v1::HolderAgent::Stub* holder,
                                                 double timeout_seconds,
                                                 TripControl* control,
                                                 TripFault* fault = nullptr);

  // Routes the GPU home with `token`, establishes a fresh session (every key
  // of the previous one dies) and scrubs + verifies `buffer_id` if it is not
  // 0. A buffer the device says it no longer has (its memory was wiped)
  // counts as clean; a transport error never does.
  // A device that missed its heartbeat (DATA_LOSS: it needs a reset) is
  // reset through the MUX first. Used at start-up and by crash recovery.
  // `gpu_serial` (if not empty) is the GPU the buffer, or a holder's key,
  // is on: a device answering with another serial is refused
  // (FAILED_PRECONDITION naming both) before anything is scrubbed or taken
  // as gone, so the right device is found first (P5).
  absl::Status MakeSafe(uint64_t token, uint64_t buffer_id, uint64_t buffer_bytes,
                        const std::string& gpu_serial);
  // FAILED_PRECONDITION, naming both, when the device (home, with a session)
  // enforces another heartbeat period than this runner keeps: no campaign
  // can run so. Asked before every campaign run, not by recovery, which must
  // finish a trip whatever the configuration.
  absl::Status CheckHeartbeatPeriod();

  absl::Status RouteHome(uint64_t token);

  // How long a MUX call that found the MUX unreachable (UNAVAILABLE) waits
  // for it, once, before its error stands: a MUX that has just restarted
  // leaves the channel failing fast for a moment.
  static constexpr int kMuxReconnectSeconds = 2;

 private:
  absl::Status RouteTo(const std::string& domain, uint64_t token);
  // One MUX call (`call` on a context with `deadline_seconds`); on
  // UNAVAILABLE made once more on a context that waits up to
  // kMuxReconnectSeconds for the channel to connect. Only for Route and
  // Reset, which the MUX takes again with an equal fencing token.
  absl::Status CallMux(const std::string& what, double deadline_seconds,
                       const std::function<grpc::Status(grpc::ClientContext*)>& call);
  // Scrubs and verifies `buffer_id`; a buffer the device itself says it no
  // longer has (sealed under the session: a reset or an unauthorised key
  // exchange wiped all device memory) counts as clean, and sets `*gone`
  // (may be null). A transport error never does.
  absl::Status ScrubOrGone(uint64_t buffer_id, uint64_t buffer_bytes, bool* gone);
  // One trip's state from phase to phase, and the guard that owns its
  // hand-off key and its way back to a safe state (trip_runner.cc).
  struct Trip;
  class SafetyGuard;
  // Run's phases, in order. false (or OpenChannel/PrepareHandoff/Leave
  // returning false): the trip failed before the GPU left, with the outcome
  // in trip->out. A non-OK status: the GPU cannot be shown safe.
  // The attested channel with the holder: the prepared one, or a new one.
  bool OpenChannel(Trip* trip, std::optional<PreparedChannel> prepared);
  // The counter window, the copy-engine key (held by `guard`), the bound
  // device, the wrapped hand-off; a heartbeat.
  absl::StatusOr<bool> PrepareHandoff(Trip* trip, SafetyGuard* guard);
  // Commits route_out (then the guard's safe path is armed), routes the GPU
  // to the holder and streams its Provision; its result in trip->provisioned.
  bool Leave(Trip* trip, SafetyGuard* guard);
  // Route home, read back under the old session riding on the re-key, and
  // whose fault a lost session or a failed provisioning is.
  absl::Status ComeHome(Trip* trip, SafetyGuard* guard);
  // The digest check, the report's commit and training.
  void VerifyAndTrain(Trip* trip, SafetyGuard* guard);
  // Streams the holder's Provision, with the no-progress watchdog, and
  // opens its report with the channel's `report_key` (PERMISSION_DENIED,
  // naming the holder, for a report not sealed under it for this hand-off).
  // `*fault`: whose side a failure is (TripFault; the agent's word in
  // holder_agent/provision_fault.h, the device's wait it reports).
  absl::Status Provision(const TripPlan& plan, v1::HolderAgent::Stub* holder,
                         const v1::ProvisionRequest& req, TripHooks* hooks,
                         const SecretBytes& report_key, TripControl* control,
                         v1::ProvisionReport* report, TripFault* fault);

  const std::string domain_, gpu_name_;
  v1::Mux::Stub* const mux_;
  GpuSession* const gpu_;
  Attester* const attester_;
  Verifier* const verifier_;
  const absl::Duration heartbeat_period_;
  // Runs Provision's no-progress watchdog (one trip at a time per runner).
  TaskThread watchdog_thread_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_TRIP_RUNNER_H_
