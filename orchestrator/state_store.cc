#include "orchestrator/state_store.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "orchestrator/schedule.h"
#include "orchestrator/sqlite_db.h"
#include "orchestrator/state_rows.h"
#include "proto/training.pb.h"
#include "trainer/training_policy.h"
#include "util/status_macros.h"

namespace gputravel {
namespace {

// Name of the trip-id counter row.
constexpr char kTripCounter[] = "trip";

bool IsHolderState(absl::string_view s) {
  return s == kHolderActive || s == kHolderDone || s == kHolderFailed || s == kHolderSkipped;
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

std::string Quote(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

std::string TripName(const TripRow& t) {
  return absl::StrCat("trip ", t.id, " (campaign ", Quote(t.campaign),
                      ", holder ", Quote(t.holder), ")");
}

// An event of `campaign` (trip 0 = none) stamped `now`.
EventRow Event(const std::string& campaign, uint64_t trip, const char* kind,
               const std::string& step, const std::string& message, int64_t now) {
  EventRow e;
  e.campaign = campaign;
  e.trip = trip;
  e.kind = kind;
  e.step = step;
  e.message = message;
  e.time_ms = now;
  return e;
}

}  // namespace

// ---------------------------------------------------------------------------
// Opening, the change helper and events.

StateStore::StateStore(std::unique_ptr<SqliteDb> db, CheckpointSeal seal)
    : db_(std::move(db)), seal_(std::move(seal)) {}

StateStore::~StateStore() = default;

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::Open(
    const std::string& path, const std::string& checkpoint_key_path,
    bool seal_clear_checkpoints) {
  GT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::Open(path));
  GT_RETURN_IF_ERROR(EnsureStateSchema(*db));
  // Deleted and replaced content (a clear checkpoint being sealed, an old
  // sealed one) is overwritten with zeros, not left in free pages.
  GT_RETURN_IF_ERROR(db->Exec("PRAGMA secure_delete = ON"));
  // The key may be made only while no checkpoint is sealed under one.
  int64_t sealed = 0;
  {
    GT_ASSIGN_OR_RETURN(Stmt s,
                        db->Prepare("SELECT count(*) FROM campaigns WHERE model_trip != 0"));
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    sealed = row ? s.ColInt(0) : 0;
  }
  absl::StatusOr<CheckpointSeal> seal =
      CheckpointSeal::LoadOrCreate(checkpoint_key_path, /*may_create=*/sealed == 0);
  if (!seal.ok()) {
    if (seal.status().code() != absl::StatusCode::kNotFound) return seal.status();
    return absl::FailedPreconditionError(absl::StrCat(
        "state database ", path, " holds ", sealed, " sealed checkpoint(s) but the checkpoint "
        "key file ", checkpoint_key_path, " is missing: restore it from its backup (without it "
        "the checkpoints cannot be read; a new key would not open them)"));
  }
  std::unique_ptr<StateStore> store(new StateStore(std::move(db), *std::move(seal)));
  if (seal_clear_checkpoints) GT_RETURN_IF_ERROR(store->SealClearCheckpoints());
  return store;
}

absl::Status StateStore::SealClearCheckpoints() {
  bool any = false;
  GT_RETURN_IF_ERROR(
      Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        // Written in the clear before schema 5: a model and no model_trip.
        std::vector<std::pair<std::string, uint64_t>> clear;
        {
          GT_ASSIGN_OR_RETURN(
              Stmt s, db_->Prepare("SELECT name, (SELECT COALESCE(MAX(id), 0) FROM trips "
                                   "WHERE campaign = campaigns.name AND trained = 1) "
                                   "FROM campaigns WHERE model_trip = 0 AND model != x''"));
          for (;;) {
            GT_ASSIGN_OR_RETURN(bool row, s.Step());
            if (!row) break;
            clear.emplace_back(s.ColText(0), s.ColU64(1));
          }
        }
        for (const auto& [campaign, trip] : clear) {
          if (trip == 0) {
            return absl::DataLossError(absl::StrCat(
                "campaign ", Quote(campaign), " in ", db_->path(),
                " has a checkpoint but no trained trip to bind it to"));
          }
          GT_ASSIGN_OR_RETURN(Stmt s,
                              db_->Prepare("SELECT model FROM campaigns WHERE name = ?"));
          GT_ASSIGN_OR_RETURN(bool row, s.Bind(campaign).Step());
          if (!row) continue;
          GT_ASSIGN_OR_RETURN(std::string sealed, seal_.Seal(campaign, trip, s.ColBlob(0)));
          GT_RETURN_IF_ERROR(db_->Run("UPDATE campaigns SET model = ?, model_trip = ? "
                                      "WHERE name = ?",
                                      BlobRef{sealed}, trip, campaign));
          any = true;
        }
        return absl::OkStatus();
      }).status());
  if (!any) return absl::OkStatus();
  // The clear pages are zeroed in the WAL; move them into the database file
  // and empty the WAL, so neither file keeps a clear checkpoint.
  absl::MutexLock lock(&mu_);
  return db_->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
}

absl::StatusOr<EventSeqs> StateStore::Mutate(Durability durability,
                                             absl::FunctionRef<absl::Status()> change) {
  absl::MutexLock lock(&mu_);
  pending_events_.clear();
  const absl::Status st = db_->InTransaction(change, /*write=*/true, durability);
  std::vector<std::pair<std::string, int64_t>> committed;
  committed.swap(pending_events_);
  GT_RETURN_IF_ERROR(st);
  EventSeqs seqs;
  for (const auto& [campaign, seq] : committed) {
    if (observer_) observer_(campaign, seq);
    seqs.push_back(seq);
  }
  return seqs;
}

absl::Status StateStore::AppendLocked(const EventRow& e) {
  GT_RETURN_IF_ERROR(db_->Run("INSERT INTO events (campaign, trip, kind, step, "
                              "message, bytes, loss, time_ms, eval_loss) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              e.campaign, e.trip, e.kind, e.step, e.message, e.bytes, e.loss,
                              e.time_ms != 0 ? e.time_ms : NowMs(), e.eval_loss));
  pending_events_.emplace_back(e.campaign, db_->LastInsertRowid());
  return absl::OkStatus();
}

void StateStore::SetEventObserver(EventObserver observer) {
  absl::MutexLock lock(&mu_);
  observer_ = std::move(observer);
}

// ---------------------------------------------------------------------------
// Counters and campaigns.

absl::StatusOr<uint64_t> StateStore::NextTripId() { return NextId(Durability::kLazy); }

absl::StatusOr<uint64_t> StateStore::NextFencingToken() { return NextId(Durability::kFlush); }

absl::StatusOr<uint64_t> StateStore::NextId(Durability durability) {
  uint64_t id = 0;
  GT_RETURN_IF_ERROR(
      Mutate(durability, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_RETURN_IF_ERROR(
            db_->Run("UPDATE counters SET value = value + 1 WHERE name = ?", kTripCounter));
        GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT value FROM counters WHERE name = ?"));
        GT_ASSIGN_OR_RETURN(bool row, s.Bind(kTripCounter).Step());
        if (!row) {
          return absl::DataLossError(absl::StrCat(
              "state database ", db_->path(), " lost its trip counter row"));
        }
        id = s.ColU64(0);
        return absl::OkStatus();
      }).status());
  return id;
}

absl::StatusOr<CreateResult> StateStore::CreateCampaign(
    const CampaignRow& c, const std::vector<HolderRow>& holders) {
  if (c.name.empty()) {
    return absl::InvalidArgumentError("campaign name is empty");
  }
  if (c.request_id.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(c.name),
                     ": request_id is empty; the client must "
                     "send an idempotency token"));
  }
  if (c.spec_json.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(c.name), ": spec_json is empty"));
  }
  if (c.rounds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(c.name), ": rounds must be >= 1"));
  }
  if (holders.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(c.name), " has no holders"));
  }
  std::set<std::string> seen;
  for (const HolderRow& h : holders) {
    if (h.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "campaign ", Quote(c.name), " has a holder without a name"));
    }
    if (!seen.insert(h.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("campaign ", Quote(c.name),
                                                     " lists holder ",
                                                     Quote(h.name), " twice"));
    }
    if (h.dataset_bytes == 0 || h.dataset_bytes > kSqliteMaxInt) {
      return absl::InvalidArgumentError(
          absl::StrCat("campaign ", Quote(c.name), ": holder ", Quote(h.name),
                       " has dataset size ", h.dataset_bytes,
                       "; it must be between 1 and 2^63-1 bytes"));
    }
  }

  CreateResult result;
  auto seqs = Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, db_->Prepare("SELECT name, spec_json FROM campaigns WHERE request_id = ?"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(c.request_id).Step());
      if (row) {
        std::string name = s.ColText(0);
        if (name != c.name || s.ColText(1) != c.spec_json) {
          return absl::AlreadyExistsError(absl::StrCat(
              "request_id ", Quote(c.request_id), " already created campaign ",
              Quote(name),
              " with a different name or spec; use a new request_id for a "
              "new campaign"));
        }
        // The same request again (a client retry): answer as the first time.
        result.created = false;
        GT_ASSIGN_OR_RETURN(result.campaign, LoadCampaign(*db_, name));
        return absl::OkStatus();
      }
    }
    {
      GT_ASSIGN_OR_RETURN(Stmt s,
                          db_->Prepare("SELECT request_id FROM campaigns WHERE name = ?"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(c.name).Step());
      if (row) {
        return absl::AlreadyExistsError(absl::StrCat(
            "campaign ", Quote(c.name),
            " already exists (created by request_id ", Quote(s.ColText(0)),
            "); choose another campaign name"));
      }
    }
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("INSERT INTO campaigns (name, request_id, spec_json, gpu, "
                                "rounds, state, created_ms, updated_ms, terms) "
                                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                c.name, c.request_id, c.spec_json, c.gpu, c.rounds,
                                kCampaignCreated, now, now, BlobRef{c.terms}));
    for (size_t i = 0; i < holders.size(); ++i) {
      GT_RETURN_IF_ERROR(db_->Run("INSERT INTO holders (campaign, name, position, "
                                  "dataset_bytes, state) VALUES (?, ?, ?, ?, ?)",
                                  c.name, holders[i].name, static_cast<int64_t>(i),
                                  holders[i].dataset_bytes, kHolderActive));
    }
    GT_RETURN_IF_ERROR(AppendLocked(
        Event(c.name, 0, "campaign_state", kCampaignCreated,
              absl::StrCat("created with ", holders.size(), " holders, ", c.rounds,
                           " rounds, gpu ", Quote(c.gpu)),
              now)));
    result.created = true;
    GT_ASSIGN_OR_RETURN(result.campaign, LoadCampaign(*db_, c.name));
    return absl::OkStatus();
  });
  GT_RETURN_IF_ERROR(seqs.status());
  result.event_seqs = std::move(*seqs);
  return result;
}

absl::StatusOr<CampaignRow> StateStore::GetCampaign(const std::string& name) {
  absl::MutexLock lock(&mu_);
  return LoadCampaign(*db_, name);
}

absl::StatusOr<std::string> StateStore::GetCheckpoint(const std::string& name) {
  std::string sealed, db_path;
  uint64_t trip = 0, latest = 0;
  {
    absl::MutexLock lock(&mu_);
    db_path = db_->path();
    GT_ASSIGN_OR_RETURN(
        Stmt s, db_->Prepare("SELECT model, model_trip, (SELECT COALESCE(MAX(id), 0) FROM trips "
                             "WHERE campaign = ?1 AND trained = 1) "
                             "FROM campaigns WHERE name = ?1"));
    GT_ASSIGN_OR_RETURN(bool row, s.Bind(name).Step());
    if (!row) return absl::NotFoundError(absl::StrCat("campaign ", Quote(name), " not found"));
    sealed = s.ColBlob(0);
    trip = s.ColU64(1);
    latest = s.ColU64(2);
  }
  if (sealed.empty() && trip == 0) {
    if (latest == 0) return std::string();  // nothing trained yet
    return absl::DataLossError(absl::StrCat(
        "campaign ", Quote(name), " in ", db_path, " has trained trips (the latest is trip ",
        latest, ") but no checkpoint: it was erased"));
  }
  if (trip == 0) {
    return absl::DataLossError(absl::StrCat(
        "the checkpoint of campaign ", Quote(name), " in ", db_path,
        " is stored in the clear, so it may have been planted: it is not used. If this "
        "database is your own from before checkpoints were sealed, start the orchestrator "
        "once with --seal_clear_checkpoints"));
  }
  if (trip != latest) {
    return absl::DataLossError(absl::StrCat(
        "the checkpoint of campaign ", Quote(name), " in ", db_path, " is marked as trip ",
        trip, "'s, but the campaign's latest trained trip is ", latest,
        ": it was put back from another trip or campaign"));
  }
  return seal_.Open(name, trip, sealed);
}

absl::StatusOr<std::string> StateStore::GetCampaignState(const std::string& name) {
  absl::MutexLock lock(&mu_);
  GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT state FROM campaigns WHERE name = ?"));
  GT_ASSIGN_OR_RETURN(bool row, s.Bind(name).Step());
  if (!row) return absl::NotFoundError(absl::StrCat("campaign ", Quote(name), " not found"));
  return s.ColText(0);
}

absl::StatusOr<std::vector<CampaignRow>> StateStore::ListCampaigns() {
  absl::MutexLock lock(&mu_);
  return LoadCampaigns(*db_);
}

absl::StatusOr<std::vector<HolderRow>> StateStore::ListHolders(const std::string& campaign) {
  absl::MutexLock lock(&mu_);
  // One read transaction, so the existence check and the rows agree.
  std::vector<HolderRow> out;
  GT_RETURN_IF_ERROR(db_->InTransaction(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_RETURN_IF_ERROR(LoadCampaign(*db_, campaign).status());
        GT_ASSIGN_OR_RETURN(out, LoadHolders(*db_, campaign));
        return absl::OkStatus();
      },
      /*write=*/false));
  return out;
}

absl::StatusOr<std::vector<TripRow>> StateStore::ListTrips(const std::string& campaign) {
  absl::MutexLock lock(&mu_);
  std::vector<TripRow> out;
  GT_RETURN_IF_ERROR(db_->InTransaction(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        GT_RETURN_IF_ERROR(LoadCampaign(*db_, campaign).status());
        GT_ASSIGN_OR_RETURN(out, LoadTrips(*db_, campaign));
        return absl::OkStatus();
      },
      /*write=*/false));
  return out;
}

absl::StatusOr<TripRow> StateStore::GetTrip(uint64_t trip_id) {
  absl::MutexLock lock(&mu_);
  return LoadTrip(*db_, trip_id);
}

absl::StatusOr<EventSeqs> StateStore::SetCampaignState(
    const std::string& name, const std::string& state, const std::string& error,
    const std::string& message) {
  const std::optional<CampaignState> to = CampaignStateFromString(state);
  if (!to.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "campaign ", Quote(name), ": unknown state ", Quote(state)));
  }
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(*db_, name));
    const std::optional<CampaignState> from = CampaignStateFromString(c.state);
    if (from.has_value() && !CanMoveCampaign(*from, *to)) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quote(name), " is already ", c.state,
                       " and cannot become ", state));
    }
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(
        db_->Run("UPDATE campaigns SET state = ?, error = ?, updated_ms = ? WHERE name = ?",
                 state, error, now, name));
    return AppendLocked(Event(name, 0, "campaign_state", state,
                              message.empty() || error.empty()
                                  ? absl::StrCat(message, error)
                                  : absl::StrCat(message, ": ", error),
                              now));
  });
}

absl::StatusOr<EventSeqs> StateStore::SetCampaignBuffer(const std::string& name,
                                                        uint64_t buffer_id,
                                                        const std::string& gpu_serial) {
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_RETURN_IF_ERROR(LoadCampaign(*db_, name).status());
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("UPDATE campaigns SET buffer_id = ?, buffer_gpu_serial = ?, "
                                "updated_ms = ? WHERE name = ?",
                                buffer_id, buffer_id == 0 ? "" : gpu_serial, now, name));
    return AppendLocked(Event(
        name, 0, "buffer", "",
        buffer_id == 0        ? "device buffer released"
        : gpu_serial.empty() ? absl::StrCat("device buffer ", buffer_id)
                             : absl::StrCat("device buffer ", buffer_id, " on GPU ", gpu_serial),
        now));
  });
}

// ---------------------------------------------------------------------------
// Trips.

absl::StatusOr<std::string> StateStore::RecordAttestation(uint64_t trip_id,
                                                          const std::string& attestation) {
  std::string previous;
  auto done = Mutate(Durability::kLazy, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(*db_, t.campaign, t.holder));
    previous = h.attestation;
    GT_RETURN_IF_ERROR(
        db_->Run("UPDATE trips SET attestation = ? WHERE id = ?", BlobRef{attestation}, trip_id));
    return db_->Run("UPDATE holders SET attestation = ? WHERE campaign = ? AND name = ?",
                    BlobRef{attestation}, t.campaign, t.holder);
  });
  if (!done.ok()) return done.status();
  return previous;
}

absl::StatusOr<EventSeqs> StateStore::BeginTrip(const TripRow& t) {
  if (t.id == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(t.campaign),
                     ": trip id 0; take the id from NextTripId()"));
  }
  if (t.window_length == 0) {
    return absl::InvalidArgumentError(absl::StrCat(TripName(t), ": empty dataset window"));
  }
  return Mutate(Durability::kLazy, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    {
      // Fencing tokens are only safe if they were issued by the counter.
      GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT value FROM counters WHERE name = ?"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(kTripCounter).Step());
      uint64_t issued = row ? s.ColU64(0) : 0;
      if (t.id > issued) {
        return absl::InvalidArgumentError(absl::StrCat(
            TripName(t), ": id was never issued by NextTripId (latest ", issued, ")"));
      }
    }
    {
      GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT campaign FROM trips WHERE id = ?"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(t.id).Step());
      if (row) {
        return absl::AlreadyExistsError(absl::StrCat("trip ", t.id, " already exists in campaign ",
                                                     Quote(s.ColText(0)), "; take a new id"));
      }
    }
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(*db_, t.campaign));
    if (c.state != kCampaignRunning) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quote(c.name), " is ", c.state,
                       ", not running; trip ", t.id, " cannot start"));
    }
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(*db_, t.campaign, t.holder));
    if (h.state != kHolderActive) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t), ": holder is ", h.state, ", not active"));
    }
    if (t.window_offset > h.dataset_bytes ||
        t.window_length > h.dataset_bytes - t.window_offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          TripName(t), ": window [", t.window_offset, ", +", t.window_length,
          ") exceeds the holder's dataset of ", h.dataset_bytes, " bytes"));
    }
    {
      GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT id, step FROM trips WHERE campaign = ? AND "
                                               "step NOT IN ('done', 'aborted') LIMIT 1"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(t.campaign).Step());
      if (row) {
        return absl::FailedPreconditionError(
            absl::StrCat("campaign ", Quote(t.campaign), " still has trip ",
                         s.ColInt(0), " at step ", s.ColText(1),
                         "; finish or abort it before trip ", t.id));
      }
    }
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("INSERT INTO trips (id, campaign, holder, "
                                "window_offset, window_length, round, step, "
                                "started_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                t.id, t.campaign, t.holder, t.window_offset, t.window_length,
                                t.round, kStepPlanned, now));
    GT_RETURN_IF_ERROR(
        db_->Run("UPDATE campaigns SET last_holder = ?, updated_ms = ? WHERE name = ?",
                 t.holder, now, t.campaign));
    EventRow e = Event(t.campaign, t.id, "trip_started", kStepPlanned,
                       absl::StrCat("holder ", Quote(t.holder), " window [", t.window_offset,
                                    ", +", t.window_length, ") round ", t.round),
                       now);
    e.bytes = t.window_length;
    return AppendLocked(e);
  });
}

absl::Status StateStore::MoveStepLocked(const TripRow& t, TripStep to, const std::string& message,
                                        const std::optional<TripCounterWindow>& window) {
  const std::string step = ToString(to);
  const std::optional<TripStep> from = TripStepFromString(t.step);
  if (from.has_value() && !CanFinish(*from)) {
    return absl::FailedPreconditionError(
        absl::StrCat(TripName(t), " already finished (", t.step,
                     "); it cannot move to ", step));
  }
  if (from.has_value() && !CanCommitStep(*from, to)) {
    return absl::FailedPreconditionError(
        absl::StrCat(TripName(t), " is at step ", t.step,
                     "; steps only move forward, not back to ", step));
  }
  const int64_t now = NowMs();
  GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET step = ? WHERE id = ?", step, t.id));
  if (window.has_value()) {
    GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET gpu_session = ?, first_counter = ?, "
                                "counter_count = ?, gpu_serial = ? WHERE id = ?",
                                window->gpu_session, window->first, window->count,
                                window->gpu_serial, t.id));
  }
  return AppendLocked(Event(t.campaign, t.id, "step", step, message, now));
}

absl::StatusOr<EventSeqs> StateStore::SetTripStep(
    uint64_t trip_id, const std::string& step, const std::string& message,
    const std::optional<TripCounterWindow>& window) {
  const std::optional<TripStep> to = TripStepFromString(step);
  if ((step == kStepRouteOut) != window.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": the counter window is recorded with step route_out",
        " (before the GPU leaves), and only there"));
  }
  if (!to.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": unknown step ", Quote(step)));
  }
  if (IsFinal(*to)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": step ", step,
                     " is set by FinishTrip, which also counts the trip"));
  }
  return Mutate(step == kStepRouteOut ? Durability::kFlush : Durability::kLazy,
                [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
                  GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
                  return MoveStepLocked(t, *to, message, window);
                });
}

absl::StatusOr<EventSeqs> StateStore::RecordProvisioned(uint64_t trip_id, uint64_t bytes,
                                                        uint64_t chunks, double seconds,
                                                        bool digest_match,
                                                        const char* then_step,
                                                        const std::string& then_message) {
  if (!std::isfinite(seconds) || seconds < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": provisioning time ", seconds, " is not valid"));
  }
  std::optional<TripStep> then;
  if (then_step != nullptr) {
    then = TripStepFromString(then_step);
    if (then != StepAfterProvisioned(true) && then != StepAfterProvisioned(false)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trip ", trip_id, ": after the provisioning report a trip moves to ",
          ToString(StepAfterProvisioned(true)), " or ", ToString(StepAfterProvisioned(false)),
          ", not ", Quote(then_step)));
    }
  }
  return Mutate(Durability::kLazy, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
    const std::optional<TripStep> at = TripStepFromString(t.step);
    if (!at.has_value() || !AcceptsProvisioningReport(*at)) {
      return absl::FailedPreconditionError(absl::StrCat(
          TripName(t), " is at step ", t.step,
          "; a provisioning report belongs to steps provision..rekey"));
    }
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET bytes = ?, chunks = ?, provision_seconds = ?, "
                                "digest_match = ? WHERE id = ?",
                                bytes, chunks, seconds, digest_match, trip_id));
    EventRow e = Event(t.campaign, trip_id, "provisioned", t.step,
                       absl::StrCat(chunks, " chunks in ", seconds, " s, digest ",
                                    digest_match ? "matches" : "MISMATCH"),
                       now);
    e.bytes = bytes;
    GT_RETURN_IF_ERROR(AppendLocked(e));
    if (!then.has_value()) return absl::OkStatus();
    return MoveStepLocked(t, *then, then_message, std::nullopt);
  });
}

absl::StatusOr<EventSeqs> StateStore::RecordTrained(
    uint64_t trip_id, double loss, std::optional<double> eval_loss,
    const std::string& model_blob) {
  if (!std::isfinite(loss) || (eval_loss.has_value() && !std::isfinite(*eval_loss))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": the ", std::isfinite(loss) ? "held-out loss" : "training loss",
        " is not finite; training diverged, finish the trip failed instead "
        "of checkpointing it (the error is served: it names no loss)"));
  }
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
    if (t.trained) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t),
                       " was already trained and checkpointed; a window is "
                       "never trained twice"));
    }
    if (t.step != ToString(kStepOfTraining)) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t), " is at step ", t.step,
                       ", not train; commit step train before training"));
    }
    // What may be reported: the block of trained windows since the last
    // report, this one included, under the campaign's terms.
    v1::TrainingTerms terms = Strictest(v1::TrainingTerms(), {});
    {
      GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT terms FROM campaigns WHERE name = ?"));
      GT_ASSIGN_OR_RETURN(bool row, s.Bind(t.campaign).Step());
      const std::string blob = row ? s.ColBlob(0) : std::string();
      if (!blob.empty() && !terms.ParseFromString(blob)) {
        return absl::DataLossError(absl::StrCat("campaign ", Quote(t.campaign),
                                                ": its training terms in ", db_->path(),
                                                " cannot be parsed"));
      }
    }
    // The block counts windows per holder: a co-holder's windows (whose
    // losses it and the operator can work out) must not stand in for
    // another holder's, so the block is reported only once every holder
    // that trained in it has trained min_windows_per_loss windows in it.
    std::vector<double> block;
    std::map<std::string, uint64_t> windows_of;
    {
      GT_ASSIGN_OR_RETURN(
          Stmt s, db_->Prepare("SELECT loss, holder FROM trips WHERE campaign = ? AND trained = 1 "
                               "AND id > (SELECT COALESCE(MAX(id), 0) FROM trips "
                               "WHERE campaign = ? AND reported_loss IS NOT NULL) "
                               "ORDER BY id"));
      s.Bind(t.campaign, t.campaign);
      for (;;) {
        GT_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        block.push_back(s.ColReal(0));
        ++windows_of[s.ColText(1)];
      }
    }
    block.push_back(loss);
    ++windows_of[t.holder];
    bool every_holder_filled = true;
    for (const auto& [holder, n] : windows_of) {
      every_holder_filled &= n >= std::max<uint64_t>(1, terms.min_windows_per_loss());
    }
    const std::optional<double> reported =
        every_holder_filled ? ReportedLoss(block, terms) : std::nullopt;
    std::optional<double> reported_eval;
    if (reported && eval_loss) reported_eval = RoundLoss(*eval_loss, terms.loss_decimals());
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET loss = ?, eval_loss = ?, reported_loss = ?, "
                                "reported_eval_loss = ?, trained = 1, step = ? WHERE id = ?",
                                loss, eval_loss, reported, reported_eval,
                                ToString(StepAfterTrained()), trip_id));
    // Sealed, bound to the campaign and this trip.
    GT_ASSIGN_OR_RETURN(std::string sealed, seal_.Seal(t.campaign, trip_id, model_blob));
    if (reported) {
      GT_RETURN_IF_ERROR(db_->Run("UPDATE campaigns SET model = ?, model_trip = ?, "
                                  "last_loss = ?, last_eval_loss = ?, updated_ms = ? "
                                  "WHERE name = ?",
                                  BlobRef{sealed}, trip_id, reported, reported_eval, now,
                                  t.campaign));
    } else {
      GT_RETURN_IF_ERROR(
          db_->Run("UPDATE campaigns SET model = ?, model_trip = ?, updated_ms = ? "
                   "WHERE name = ?",
                   BlobRef{sealed}, trip_id, now, t.campaign));
    }
    EventRow trained = Event(
        t.campaign, trip_id, "trained", kStepTrain,
        reported ? absl::StrCat("checkpoint of ", model_blob.size(), " bytes; loss over the last ",
                                block.size(), " trained windows")
                 : absl::StrCat("checkpoint of ", model_blob.size(), " bytes; loss reported per ",
                                terms.min_windows_per_loss(), " windows of each holder (",
                                block.size(), " so far)"),
        now);
    trained.bytes = t.window_length;
    trained.loss = reported;
    trained.eval_loss = reported_eval;
    GT_RETURN_IF_ERROR(AppendLocked(trained));
    return AppendLocked(Event(t.campaign, trip_id, "step", ToString(StepAfterTrained()),
                              "scrub after training", now));
  });
}

absl::StatusOr<EventSeqs> StateStore::FinishTrip(uint64_t trip_id, const TripFinish& f) {
  const bool ok = f.outcome == kOutcomeOk;
  if (!ok && f.outcome != kOutcomeFailed && f.outcome != kOutcomeAborted) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": unknown outcome ", Quote(f.outcome)));
  }
  if (ok && !(f.scrub_verified && f.rekeyed)) {
    // P2/P3: a trip whose buffer was not verifiably scrubbed or whose holder
    // key is not yet dead is not a success, whatever else happened.
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id,
                     " cannot finish ok without a verified scrub and a "
                     "re-key; finish it failed"));
  }
  if (f.advance_cursor && !ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trip ", trip_id, ": only an ok trip advances the holder's cursor"));
  }
  if (f.fail_holder && ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("trip ", trip_id, ": an ok trip cannot fail its holder"));
  }
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(TripRow t, LoadTrip(*db_, trip_id));
    const std::optional<TripStep> from = TripStepFromString(t.step);
    if (from.has_value() && !CanFinish(*from)) {
      return absl::FailedPreconditionError(
          absl::StrCat(TripName(t), " already finished with outcome ",
                       t.outcome, "; every trip is counted once"));
    }
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(*db_, t.campaign));
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(*db_, t.campaign, t.holder));
    const std::string final_step = ToString(FinalStep(f.outcome == kOutcomeAborted));
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run("UPDATE trips SET step = ?, outcome = ?, error = ?, "
                                "scrub_verified = ?, rekeyed = ?, ended_ms = ?, "
                                "duration_us = ? WHERE id = ?",
                                final_step, f.outcome, f.error, f.scrub_verified, f.rekeyed, now,
                                std::max<int64_t>(0, f.duration_us), trip_id));

    const std::string old_holder_state = h.state;
    if (ok) {
      h.trips += 1;
      h.bytes += t.bytes;
      if (f.advance_cursor) {
        if (h.state != kHolderActive) {
          return absl::FailedPreconditionError(
              absl::StrCat(TripName(t), ": holder is ", h.state,
                           "; its cursor no longer moves"));
        }
        // The window must be the one at the cursor: otherwise it was already
        // counted (or skipped), and moving on would lose or repeat data.
        if (t.window_offset != h.cursor_offset || t.round != h.round) {
          return absl::FailedPreconditionError(absl::StrCat(
              TripName(t), " covers offset ", t.window_offset, " of round ",
              t.round, " but the holder's cursor is at offset ",
              h.cursor_offset, " of round ", h.round,
              "; the window does not advance the cursor"));
        }
        // The schedule's own bookkeeping (schedule.h), the one the engine
        // plans with: a window reaching the end completes a pass.
        const HolderProgress next = AdvanceProgress(
            HolderProgress{h.dataset_bytes, h.cursor_offset, h.round, true}, t.window_length);
        h.cursor_offset = next.cursor_offset;
        h.round = next.round;
        if (HolderFinished(next, c.rounds)) h.state = kHolderDone;
      }
    } else if (f.fail_holder) {
      h.state = kHolderFailed;
      h.error = f.error.empty() ? absl::StrCat("trip ", trip_id, " ", f.outcome) : f.error;
    }
    GT_RETURN_IF_ERROR(db_->Run("UPDATE holders SET cursor_offset = ?, round = ?, "
                                "state = ?, error = ?, trips = ?, bytes = ? "
                                "WHERE campaign = ? AND name = ?",
                                h.cursor_offset, h.round, h.state, h.error, h.trips, h.bytes,
                                h.campaign, h.name));
    GT_RETURN_IF_ERROR(db_->Run("UPDATE campaigns SET trips_ok = trips_ok + ?, "
                                "trips_failed = trips_failed + ?, "
                                "trips_aborted = trips_aborted + ?, "
                                "bytes_provisioned = bytes_provisioned + ?, "
                                "updated_ms = ? WHERE name = ?",
                                ok, f.outcome == kOutcomeFailed, f.outcome == kOutcomeAborted,
                                ok ? t.bytes : 0, now, t.campaign));
    EventRow e = Event(t.campaign, trip_id, "trip_finished", final_step,
                       f.error.empty() ? f.outcome : absl::StrCat(f.outcome, ": ", f.error), now);
    e.bytes = t.bytes;
    e.loss = t.reported_loss;
    e.eval_loss = t.reported_eval_loss;
    GT_RETURN_IF_ERROR(AppendLocked(e));
    if (h.state == old_holder_state) return absl::OkStatus();
    return AppendLocked(Event(
        t.campaign, trip_id, "holder_state", h.state,
        h.state == kHolderDone
            ? absl::StrCat("holder ", Quote(h.name), " completed its ", h.round, " rounds")
            : absl::StrCat("holder ", Quote(h.name), ": ", h.error),
        now));
  });
}

absl::StatusOr<std::vector<TripRow>> StateStore::UnfinishedTrips() {
  absl::MutexLock lock(&mu_);
  return LoadUnfinishedTrips(*db_);
}

absl::StatusOr<EventSeqs> StateStore::MarkHolderState(
    const std::string& campaign, const std::string& holder,
    const std::string& state, const std::string& error) {
  if (!IsHolderState(state)) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quote(campaign), ", holder ", Quote(holder),
                     ": unknown holder state ", Quote(state)));
  }
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_RETURN_IF_ERROR(LoadHolder(*db_, campaign, holder).status());
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run(
        "UPDATE holders SET state = ?, error = ? WHERE campaign = ? AND name = ?", state, error,
        campaign, holder));
    return AppendLocked(Event(campaign, 0, "holder_state", state,
                              error.empty() ? absl::StrCat("holder ", Quote(holder))
                                            : absl::StrCat("holder ", Quote(holder), ": ", error),
                              now));
  });
}

absl::StatusOr<EventSeqs> StateStore::SkipHolder(const std::string& campaign,
                                                 const std::string& holder,
                                                 const std::string& error) {
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(*db_, campaign));
    if (c.state != kCampaignPaused) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quote(campaign), " is ", c.state,
                       "; a holder can be skipped only while the campaign is paused"));
    }
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(*db_, campaign, holder));
    if (h.state != kHolderActive) {
      return absl::FailedPreconditionError(
          absl::StrCat("holder ", Quote(holder), " of campaign ", Quote(campaign), " is ",
                       h.state, "; only an active holder can be skipped"));
    }
    // A trip planned before the pause may still run (or wait for recovery):
    // its holder's row must not change under it.
    GT_ASSIGN_OR_RETURN(Stmt running,
                        db_->Prepare("SELECT id FROM trips WHERE campaign = ? AND step NOT IN "
                                     "('done', 'aborted') LIMIT 1"));
    running.Bind(campaign);
    GT_ASSIGN_OR_RETURN(bool in_flight, running.Step());
    if (in_flight) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quote(campaign), " still has trip ", running.ColInt(0),
                       " in flight; skip the holder once it is finished (it is made safe "
                       "first)"));
    }
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(db_->Run(
        "UPDATE holders SET state = ?, error = ? WHERE campaign = ? AND name = ?",
        kHolderSkipped, error, campaign, holder));
    return AppendLocked(Event(campaign, 0, "holder_state", kHolderSkipped,
                              absl::StrCat("holder ", Quote(holder), ": ", error), now));
  });
}

// ---------------------------------------------------------------------------
// Events.

absl::StatusOr<int64_t> StateStore::AppendEvent(const EventRow& e) {
  if (e.kind.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("event for campaign ", Quote(e.campaign), " has no kind"));
  }
  GT_ASSIGN_OR_RETURN(
      EventSeqs seqs,
      Mutate(Durability::kLazy, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return AppendLocked(e); }));
  return seqs.front();
}

absl::StatusOr<std::vector<EventRow>> StateStore::EventsAfter(
    const std::string& campaign, int64_t after_seq, int limit) {
  if (limit <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("events of campaign ",
                                                   Quote(campaign), ": limit ",
                                                   limit, " must be positive"));
  }
  absl::MutexLock lock(&mu_);
  return LoadEvents(*db_, campaign, after_seq, limit);
}

absl::StatusOr<int64_t> StateStore::LastEventSeq() {
  absl::MutexLock lock(&mu_);
  GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT COALESCE(MAX(seq), 0) FROM events"));
  GT_ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.ColInt(0) : 0;
}

}  // namespace gputravel
