#ifndef GPUTRAVEL_ORCHESTRATOR_STATE_STORE_H_
#define GPUTRAVEL_ORCHESTRATOR_STATE_STORE_H_

// The orchestrator's durable state: campaigns, their holders' progress, every
// trip's step, and an append-only event log, in one SQLite database (WAL).
//
// Crash safety (P7) rests on one rule the engine follows: a trip step is
// committed here BEFORE its side effect is performed. After a crash, the
// persisted step therefore names the side effect that may have been half done,
// and UnfinishedTrips() lists every trip that recovery must bring to a safe
// state (route back, re-key, scrub, then FinishTrip(aborted)). Campaign
// progress (holder cursors, trip counters) moves only in FinishTrip, once per
// trip, in the same transaction that marks the trip finished, so a crash can
// neither lose a finished trip nor count one twice.
//
// Every mutating method is one transaction that also appends the events it
// describes and returns their sequence numbers, so a caller can wake watchers
// (event streams) only after the change is durable.
//
// Durability: every commit is in the WAL before the method returns, so a
// crash of the orchestrator process never loses one. Most commits are also
// fsynced (synchronous=FULL) and survive a power cut. The exceptions are
// the trip's intermediate records whose loss to a power cut changes nothing
// recovery does (see Durability below): they are written with
// synchronous=NORMAL and become power-safe with the next fsynced commit,
// which always comes before the GPU leaves (SetTripStep route_out) and when
// the trip is trained or finished. A trip thus costs three fsyncs, not ten.
//
// Thread-safe: one connection, guarded by a mutex. Several processes may also
// open the same file (SQLite's own locking; busy_timeout applies), which the
// tests use to simulate crashes.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/functional/function_ref.h"
#include "orchestrator/checkpoint_seal.h"
#include "orchestrator/sqlite_db.h"
#include "orchestrator/state_schema.h"
#include "orchestrator/trip_steps.h"

namespace gputravel {

// Campaign states and trip steps (kCampaign*, kStep*): orchestrator/trip_steps.h.

// Holder states.
inline constexpr char kHolderActive[] = "active";
inline constexpr char kHolderDone[] = "done";
inline constexpr char kHolderFailed[] = "failed";    // on evidence, per the policy
inline constexpr char kHolderSkipped[] = "skipped";  // by an operator, for good

// Trip outcomes ("" while the trip runs).
inline constexpr char kOutcomeOk[] = "ok";
inline constexpr char kOutcomeFailed[] = "failed";
inline constexpr char kOutcomeAborted[] = "aborted";

// Byte counts, offsets and trip ids are unsigned here but stored as SQLite's
// signed 64-bit integers; values of 2^63 or more are refused (InvalidArgument).

struct CampaignRow {
  std::string name;
  std::string request_id;  // client's idempotency token
  std::string spec_json;   // the validated campaign spec, verbatim
  std::string gpu;
  uint32_t rounds = 1;  // passes over every holder's dataset
  std::string state = kCampaignCreated;
  std::string error;
  uint64_t buffer_id = 0;  // device dataset buffer, 0 = none
  // The serial of the GPU that holds buffer_id ("" with no buffer, or for
  // a buffer recorded before serials were): recovery and the next run
  // scrub it, or take it as gone, only on that device (P5).
  std::string buffer_gpu_serial;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t trips_ok = 0;
  int64_t trips_failed = 0;        // outcome "failed"
  int64_t trips_aborted = 0;       // outcome "aborted" (crash recovery, cancel)
  uint64_t bytes_provisioned = 0;  // sum of bytes of ok trips
  // The latest reported training and held-out losses (RecordTrained):
  // rounded, per block of the terms' min_windows_per_loss windows.
  std::optional<double> last_loss;
  std::optional<double> last_eval_loss;
  std::string last_holder;  // holder of the latest BeginTrip (round-robin)
  // The campaign's training terms (serialized v1::TrainingTerms), fixed at
  // create; empty for a campaign created before terms existed (the default
  // policy's reporting then applies).
  std::string terms;
};

struct HolderRow {
  std::string campaign;
  std::string name;
  int32_t position = 0;  // order in the spec
  uint64_t dataset_bytes = 0;
  uint64_t cursor_offset = 0;  // start of the next window to train
  uint32_t round = 0;          // completed passes over the dataset
  std::string state = kHolderActive;
  std::string error;
  int64_t trips = 0;   // ok trips
  uint64_t bytes = 0;  // bytes of ok trips
  // What was verified of the holder's TD at its latest trip (serialized
  // v1::VerifiedAttestation; empty before any).
  std::string attestation;
};

struct TripRow {
  uint64_t id = 0;  // from NextTripId(); also the MUX fencing token
  std::string campaign;
  std::string holder;
  uint64_t window_offset = 0;
  uint64_t window_length = 0;
  uint32_t round = 0;  // holder round the window belongs to
  std::string step = kStepPlanned;
  std::string outcome;
  std::string error;
  uint64_t bytes = 0;  // provisioned, as the holder reported
  uint64_t chunks = 0;
  bool digest_match = false;
  bool scrub_verified = false;
  bool rekeyed = false;
  bool trained = false;  // RecordTrained committed (loss + checkpoint)
  // This window's own training loss and the held-out loss after it: kept
  // inside the orchestrator's TD, never served (the API shows the reported
  // ones).
  std::optional<double> loss;
  std::optional<double> eval_loss;
  // What may be reported (proto Trip.loss/eval_loss): set on the trip that
  // completed a block of the campaign's terms, NULL on every other.
  std::optional<double> reported_loss;
  std::optional<double> reported_eval_loss;
  // What was verified of the holder's TD for this trip's channel
  // (serialized v1::VerifiedAttestation; empty before the channel).
  std::string attestation;
  double provision_seconds = 0;
  int64_t started_ms = 0;
  int64_t ended_ms = 0;  // 0 while unfinished
  // The copy-engine counter window handed to the holder (P4), recorded with
  // step route_out before the GPU leaves; zeros before that.
  uint64_t gpu_session = 0;
  uint32_t first_counter = 0;
  uint32_t counter_count = 0;
  // The serial of the GPU the holder was handed a key of, recorded with the
  // window: recovery re-keys and scrubs that device, no other (P5).
  std::string gpu_serial;
  // Whole trip on the orchestrator's monotonic clock, planning to verified
  // scrub (FinishTrip); 0 while unfinished or unknown (recovered trips).
  int64_t duration_us = 0;
  // An external trainer's report of this window (proto/trainer.proto),
  // committed with trained: its checkpoint's SHA-256 and the window's
  // tokens; empty and 0 otherwise.
  std::string trainer_checkpoint_sha256;
  uint64_t trainer_tokens = 0;
};

// What an external trainer reported with a window (RecordTrained).
struct ExternalTrainerReport {
  std::string checkpoint_sha256;  // 32 bytes
  uint64_t tokens = 0;
};

// The counter window of a trip's hand-off: counters [first, first + count)
// of the LCE H2D key of GPU session `gpu_session`.
struct TripCounterWindow {
  uint64_t gpu_session = 0;
  uint32_t first = 0;
  uint32_t count = 0;
  std::string gpu_serial;  // the GPU whose session that is
};

struct EventRow {
  int64_t seq = 0;       // assigned by AppendEvent / the mutating methods
  std::string campaign;  // "" for daemon-wide events
  uint64_t trip = 0;     // 0 if none
  // "campaign_state", "buffer", "holder_state", "trip_started", "step",
  // "provisioned", "trained", "trip_finished", "error", "recovery", ...
  std::string kind;
  std::string step;
  std::string message;
  uint64_t bytes = 0;
  // Reported training and held-out losses ("trained"/"trip_finished" of a
  // trip that completed a block), else NULL.
  std::optional<double> loss;
  std::optional<double> eval_loss;
  int64_t time_ms = 0;  // 0 in AppendEvent = now
};

// The outcome (kOutcomeOk, kOutcomeFailed, kOutcomeAborted) of a
// "trip_finished" event, whose message FinishTrip begins with it
// ("ok", "failed: why"); "" for any other event.
std::string TripOutcomeOf(const EventRow& e);

// Sequence numbers of the events a mutation appended, in order.
using EventSeqs = std::vector<int64_t>;
// Publishes the events a mutation committed (wakes watchers; logs a failed
// commit): the engine's, handed to its parts.
using CommitNotifier = std::function<void(const absl::StatusOr<EventSeqs>&)>;

struct CreateResult {
  CampaignRow campaign;
  bool created = false;  // false: an identical earlier request already did it
  EventSeqs event_seqs;  // empty when created is false
};

// How a trip ended; see FinishTrip.
struct TripFinish {
  std::string outcome;  // kOutcomeOk, kOutcomeFailed or kOutcomeAborted
  std::string error;    // why, when not ok
  bool scrub_verified = false;
  bool rekeyed = false;
  // Only with outcome ok: the window counts as trained; move the cursor on.
  bool advance_cursor = false;
  // Only with outcome failed/aborted: take the holder out of the campaign.
  bool fail_holder = false;
  // The trip's duration (TripRow::duration_us); 0 if not measured.
  int64_t duration_us = 0;
};

class StateStore {
 public:
  // Schema version kept in PRAGMA user_version (orchestrator/state_schema.h).
  static constexpr int kSchemaVersion = kStateSchemaVersion;

  // Opens (creating with mode 0600 if missing) the database at `path`, turns
  // on WAL, synchronous=FULL, foreign keys, secure_delete (freed pages are
  // zeroed) and a busy timeout (orchestrator/sqlite_db.h), and creates or
  // migrates the schema (orchestrator/state_schema.h). Refuses a database
  // written by a newer schema.
  //
  // Model checkpoints are stored sealed under the key in
  // `checkpoint_key_path` (orchestrator/checkpoint_seal.h). The key file is
  // created if missing while the database holds no sealed checkpoint; with
  // sealed checkpoints and no key file, FAILED_PRECONDITION names both
  // files. Checkpoints stored in the clear (by a schema before 5) are
  // sealed here only when `seal_clear_checkpoints` (the operator's one-time
  // word that this database is its own: the host that can write the
  // database could plant a clear model as well), bound to their campaign's
  // latest trained trip, and their clear bytes are overwritten in the
  // database file and its WAL; otherwise GetCheckpoint refuses them.
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(
      const std::string& path, const std::string& checkpoint_key_path,
      bool seal_clear_checkpoints = false);

  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // A fresh, never reused trip id (also the trip's MUX fencing token). It is
  // committed before it is returned, so a process crash cannot issue it
  // twice; the commit is fsynced with the trip's route_out commit, which is
  // flushed before the token leaves the orchestrator.
  absl::StatusOr<uint64_t> NextTripId();
  // The same counter for a fencing token sent to the MUX with no flushed
  // commit before it (making a GPU safe at recovery or at a campaign's
  // start): fsynced before it is returned. The MUX fsyncs every token it
  // accepts, so a counter rolled back by a power cut would make the
  // orchestrator's next tokens stale until it caught up.
  absl::StatusOr<uint64_t> NextFencingToken();

  // Creates the campaign with `holders` (in spec order; position, cursor,
  // round, state and counters are set here, as are the campaign's state,
  // timestamps and counters). Idempotent on request_id: the same request_id,
  // name and spec_json return the existing campaign with created=false.
  // AlreadyExists for a request_id reused with another spec or name, or for a
  // name already created by another request.
  absl::StatusOr<CreateResult> CreateCampaign(
      const CampaignRow& c, const std::vector<HolderRow>& holders);

  // A campaign's row (without its checkpoint: GetCheckpoint); ListCampaigns
  // orders them by creation.
  absl::StatusOr<CampaignRow> GetCampaign(const std::string& name);
  // The campaign's latest checkpoint, opened ("" before any training).
  // DATA_LOSS naming the campaign when it does not authenticate under the
  // key for this campaign and the trip that wrote it, or when that trip is
  // not the campaign's latest trained one (a checkpoint swapped from
  // another campaign, put back from an earlier trip, or sealed under
  // another key file).
  absl::StatusOr<std::string> GetCheckpoint(const std::string& name);
  // Only the campaign's lifecycle state (kCampaign*): what the trip loop and
  // watchers poll, without reading the spec and the model checkpoint.
  absl::StatusOr<std::string> GetCampaignState(const std::string& name);
  absl::StatusOr<std::vector<CampaignRow>> ListCampaigns();
  // NotFound for an unknown campaign. Holders by position, trips by id.
  absl::StatusOr<std::vector<HolderRow>> ListHolders(
      const std::string& campaign);
  absl::StatusOr<std::vector<TripRow>> ListTrips(const std::string& campaign);
  absl::StatusOr<TripRow> GetTrip(uint64_t trip_id);

  // Moves the campaign to `state` and records `error`. A terminal campaign
  // (completed, failed, cancelled) can only be set to the same state again,
  // a cancelling one only to cancelled (CanMoveCampaign).
  // With `only_from`, only a campaign in that state moves (else
  // FailedPrecondition and nothing changes).
  absl::StatusOr<EventSeqs> SetCampaignState(const std::string& name,
                                             const std::string& state,
                                             const std::string& error,
                                             const std::string& message,
                                             const std::string& only_from = "");
  // Records the device dataset buffer (0 = released) and the serial of the
  // GPU it is on ("" with buffer 0).
  absl::StatusOr<EventSeqs> SetCampaignBuffer(const std::string& name,
                                              uint64_t buffer_id,
                                              const std::string& gpu_serial = "");

  // Inserts trip `t` at step "planned" (t.id from NextTripId; step, outcome,
  // results and timestamps of `t` are ignored) and makes t.holder the
  // campaign's last_holder. Requires a running campaign, an active holder, a
  // window inside its dataset and no unfinished trip in the campaign: one
  // trip at a time owns the campaign's GPU buffer (P2).
  absl::StatusOr<EventSeqs> BeginTrip(const TripRow& t);

  // Commits the move to `step` before the caller performs it. Steps only move
  // forward (repeating the current step is allowed, for a retry); "done" and
  // "aborted" are FinishTrip's. FailedPrecondition for a finished trip.
  // `window` (only with step route_out, where it is required) records the
  // counter window handed to the holder in the same commit. The route_out
  // commit is fsynced; the later steps' are not (see Durability).
  absl::StatusOr<EventSeqs> SetTripStep(
      uint64_t trip_id, const std::string& step, const std::string& message,
      const std::optional<TripCounterWindow>& window = std::nullopt);

  // What was verified of the holder's TD for this trip's channel
  // (serialized v1::VerifiedAttestation), on the trip and as its holder's
  // latest, in one lazy commit (nothing depends on it for recovery).
  // Returns the holder's previous record ("" if none).
  absl::StatusOr<std::string> RecordAttestation(uint64_t trip_id,
                                                const std::string& attestation);

  // The holder's provisioning report. Allowed at steps provision..rekey.
  // With `then_step` (train or scrub, the step that follows the report) the
  // trip also moves there in the same transaction, exactly as SetTripStep
  // would have moved it: one commit instead of two on the trip's path.
  absl::StatusOr<EventSeqs> RecordProvisioned(uint64_t trip_id, uint64_t bytes,
                                              uint64_t chunks, double seconds,
                                              bool digest_match,
                                              const char* then_step = nullptr,
                                              const std::string& then_message = "");

  // Training of the trip's window finished: in ONE transaction, stores the
  // loss (and the held-out loss after it, if measured) on the trip and the
  // checkpoint on the campaign, marks the trip trained and moves it to step
  // "scrub" (the next side effect). If the trip completes a block of the
  // campaign's terms (trainer/training_policy.h ReportedLoss: at least
  // min_windows_per_loss trained windows of each holder that trained since
  // the last report), the
  // block's rounded mean loss and the rounded held-out loss become the
  // trip's reported losses, the campaign's last_loss/last_eval_loss and the
  // "trained" event's. The
  // trip must be at step "train" and not yet trained, so after a crash a
  // trip found at "train" was not checkpointed (train again or abort), and
  // one found at "scrub" with trained=true only needs its scrub: a window is
  // never trained twice into the model.
  // With `external` (a campaign of trainer kind "external"), the report is
  // stored on the trip in the same transaction, and `model_blob` is the
  // campaign's resume point (serialized v1::Resume), sealed like a model.
  absl::StatusOr<EventSeqs> RecordTrained(
      uint64_t trip_id, double loss, std::optional<double> eval_loss,
      const std::string& model_blob,
      const std::optional<ExternalTrainerReport>& external = std::nullopt);

  // Finishes the trip exactly once (FailedPrecondition the second time):
  // step "done" (ok, failed) or "aborted" (aborted), ended_ms, scrub/rekey
  // results. Outcome ok requires scrub_verified and rekeyed, and counts the
  // trip and its bytes on the campaign and the holder; with advance_cursor
  // the holder's cursor moves past the window (which must be the one at the
  // cursor), wrapping to 0 with round+1 at the end of the dataset; the
  // holder is "done" when its round reaches the campaign's rounds. Failed /
  // aborted count in trips_failed / trips_aborted, and fail_holder marks the
  // holder failed with the trip's error.
  absl::StatusOr<EventSeqs> FinishTrip(uint64_t trip_id, const TripFinish& f);

  // Trips not done or aborted, by id: what crash recovery must resolve.
  absl::StatusOr<std::vector<TripRow>> UnfinishedTrips();

  absl::StatusOr<EventSeqs> MarkHolderState(const std::string& campaign,
                                            const std::string& holder,
                                            const std::string& state,
                                            const std::string& error);

  // Marks active holder `holder` of PAUSED campaign `campaign` "skipped"
  // with `error`, with its event, in one commit: FAILED_PRECONDITION, naming
  // the state, unless the campaign is PAUSED and the holder active (checked
  // in the same transaction, so a concurrent resume either comes first and
  // refuses this, or sees the holder skipped).
  absl::StatusOr<EventSeqs> SkipHolder(const std::string& campaign,
                                       const std::string& holder,
                                       const std::string& error);

  // Removes a campaign that reached a final state (completed, failed,
  // cancelled) with its holders, trips, events and checkpoint, so that its
  // name can be used again; a daemon-wide event ("" campaign, kind
  // "campaign_deleted") records who deleted which campaign in which state.
  // Trip ids and event sequence numbers are never reused. NotFound for an
  // unknown campaign, FailedPrecondition for one that is not final.
  absl::StatusOr<EventSeqs> DeleteCampaign(const std::string& name, const std::string& who);

  // Appends one free-form event (e.g. "recovery", "error"); returns its seq.
  absl::StatusOr<int64_t> AppendEvent(const EventRow& e);
  // Events with seq > after_seq, oldest first, at most `limit` (> 0), of one
  // campaign or, with campaign "", of all.
  absl::StatusOr<std::vector<EventRow>> EventsAfter(const std::string& campaign,
                                                    int64_t after_seq,
                                                    int limit);
  // The newest event's seq, 0 when there is none.
  absl::StatusOr<int64_t> LastEventSeq();

  // Called once for every event, as stored (seq and time_ms set), right
  // after the transaction that inserted it commits (never for one rolled
  // back), in commit order, with the store's lock held: it must return
  // quickly and must not call the store. WatchCampaign streams wake on it
  // (orchestrator/campaign_changes.h); the metrics count from it
  // (orchestrator/orchestrator_metrics.h). AddEventObserver returns the
  // handle RemoveEventObserver takes.
  using EventObserver = std::function<void(const EventRow& event)>;
  int AddEventObserver(EventObserver observer);
  void RemoveEventObserver(int handle);

  // Called after every write transaction: with OK when it committed, with
  // its error when it failed at the storage level (sqlite_db.h
  // IsStorageFailure: a full or failing file system), not for a change its
  // own checks refused. With the store's lock held, like the event
  // observer: it must return quickly and must not call the store. The
  // engine's storage backoff (orchestrator/storage_backoff.h) listens.
  using StorageObserver = std::function<void(const absl::Status& write)>;
  void SetStorageObserver(StorageObserver observer);

 private:
  StateStore(std::unique_ptr<SqliteDb> db, CheckpointSeal seal);
  // Open's sealing of checkpoints an older schema stored in the clear.
  absl::Status SealClearCheckpoints() ABSL_LOCKS_EXCLUDED(mu_);

  // The one shape of every change: under the lock, in one write transaction
  // committed with `durability` (sqlite_db.h), `change` checks and updates
  // rows and appends the events that describe them (AppendLocked). Returns
  // the events' seqs once committed, after telling the observer; a failed
  // change leaves nothing, events included.
  //
  // Durability per commit: kFlush unless the record's loss to a power cut
  // changes nothing recovery does. kLazy only for a trip's steps after
  // route_out (recovery treats route_out .. scrub alike unless training was
  // committed, which is flushed), the provisioning report, trip ids and
  // BeginTrip (nothing has left the orchestrator before the flushed
  // route_out; tokens sent without one come from NextFencingToken), and
  // free-form events.
  absl::StatusOr<EventSeqs> Mutate(Durability durability,
                                   absl::FunctionRef<absl::Status()> change)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Inside Mutate: inserts event `e` (time_ms 0 = now) and remembers its seq.
  absl::Status AppendLocked(const EventRow& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets a holder's state and error, with its holder_state event, inside the
  // caller's change (MarkHolderState, SkipHolder check what may change).
  absl::Status SetHolderStateLocked(const std::string& campaign, const std::string& holder,
                                    const std::string& state, const std::string& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> NextId(Durability durability);
  // Inside Mutate: moves trip `t` to step `to` (checked by the caller to be
  // non-final) if trip_steps.h allows the move, records `window` with it,
  // and appends the step event.
  absl::Status MoveStepLocked(const TripRow& t, TripStep to, const std::string& message,
                              const std::optional<TripCounterWindow>& window)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  const std::unique_ptr<SqliteDb> db_ ABSL_PT_GUARDED_BY(mu_);
  const CheckpointSeal seal_;
  std::map<int, EventObserver> observers_ ABSL_GUARDED_BY(mu_);
  int next_observer_ ABSL_GUARDED_BY(mu_) = 1;
  // The events the open change appended, told to observers_ once it
  // commits.
  std::vector<EventRow> pending_events_ ABSL_GUARDED_BY(mu_);
  StorageObserver storage_observer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_STATE_STORE_H_
