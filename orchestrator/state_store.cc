#include "orchestrator/state_store.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
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

bool IsHolderState(absl::string_view s) {
  return s == kHolderActive || s == kHolderDone || s == kHolderFailed || s == kHolderSkipped;
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
                "campaign ", Quoted(campaign), " in ", db_->path(),
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
  std::vector<EventRow> committed;
  committed.swap(pending_events_);
  if (storage_observer_ && (st.ok() || IsStorageFailure(st))) storage_observer_(st);
  GT_RETURN_IF_ERROR(st);
  EventSeqs seqs;
  for (const EventRow& e : committed) {
    for (const auto& [handle, observer] : observers_) observer(e);
    seqs.push_back(e.seq);
  }
  return seqs;
}

absl::Status StateStore::AppendLocked(const EventRow& e) {
  EventRow stored = e;
  if (stored.time_ms == 0) stored.time_ms = NowMs();
  GT_RETURN_IF_ERROR(db_->Run("INSERT INTO events (campaign, trip, kind, step, "
                              "message, bytes, loss, time_ms, eval_loss) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              stored.campaign, stored.trip, stored.kind, stored.step,
                              stored.message, stored.bytes, stored.loss, stored.time_ms,
                              stored.eval_loss));
  stored.seq = db_->LastInsertRowid();
  pending_events_.push_back(std::move(stored));
  return absl::OkStatus();
}

int StateStore::AddEventObserver(EventObserver observer) {
  absl::MutexLock lock(&mu_);
  const int handle = next_observer_++;
  observers_[handle] = std::move(observer);
  return handle;
}

void StateStore::RemoveEventObserver(int handle) {
  absl::MutexLock lock(&mu_);
  observers_.erase(handle);
}

void StateStore::SetStorageObserver(StorageObserver observer) {
  absl::MutexLock lock(&mu_);
  storage_observer_ = std::move(observer);
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
        absl::StrCat("campaign ", Quoted(c.name),
                     ": request_id is empty; the client must "
                     "send an idempotency token"));
  }
  if (c.spec_json.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quoted(c.name), ": spec_json is empty"));
  }
  if (c.rounds < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quoted(c.name), ": rounds must be >= 1"));
  }
  if (holders.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quoted(c.name), " has no holders"));
  }
  std::set<std::string> seen;
  for (const HolderRow& h : holders) {
    if (h.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "campaign ", Quoted(c.name), " has a holder without a name"));
    }
    if (!seen.insert(h.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("campaign ", Quoted(c.name),
                                                     " lists holder ",
                                                     Quoted(h.name), " twice"));
    }
    if (h.dataset_bytes == 0 || h.dataset_bytes > kSqliteMaxInt) {
      return absl::InvalidArgumentError(
          absl::StrCat("campaign ", Quoted(c.name), ": holder ", Quoted(h.name),
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
              "request_id ", Quoted(c.request_id), " already created campaign ",
              Quoted(name),
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
            "campaign ", Quoted(c.name),
            " already exists (created by request_id ", Quoted(s.ColText(0)),
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
        StampedEvent(c.name, 0, "campaign_state", kCampaignCreated,
              absl::StrCat("created with ", holders.size(), " holders, ", c.rounds,
                           " rounds, gpu ", Quoted(c.gpu)),
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
    if (!row) return absl::NotFoundError(absl::StrCat("campaign ", Quoted(name), " not found"));
    sealed = s.ColBlob(0);
    trip = s.ColU64(1);
    latest = s.ColU64(2);
  }
  if (sealed.empty() && trip == 0) {
    if (latest == 0) return std::string();  // nothing trained yet
    return absl::DataLossError(absl::StrCat(
        "campaign ", Quoted(name), " in ", db_path, " has trained trips (the latest is trip ",
        latest, ") but no checkpoint: it was erased"));
  }
  if (trip == 0) {
    return absl::DataLossError(absl::StrCat(
        "the checkpoint of campaign ", Quoted(name), " in ", db_path,
        " is stored in the clear, so it may have been planted: it is not used. If this "
        "database is your own from before checkpoints were sealed, start the orchestrator "
        "once with --seal_clear_checkpoints"));
  }
  if (trip != latest) {
    return absl::DataLossError(absl::StrCat(
        "the checkpoint of campaign ", Quoted(name), " in ", db_path, " is marked as trip ",
        trip, "'s, but the campaign's latest trained trip is ", latest,
        ": it was put back from another trip or campaign"));
  }
  return seal_.Open(name, trip, sealed);
}

absl::StatusOr<std::string> StateStore::GetCampaignState(const std::string& name) {
  absl::MutexLock lock(&mu_);
  GT_ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT state FROM campaigns WHERE name = ?"));
  GT_ASSIGN_OR_RETURN(bool row, s.Bind(name).Step());
  if (!row) return absl::NotFoundError(absl::StrCat("campaign ", Quoted(name), " not found"));
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
    const std::string& message, const std::string& only_from) {
  const std::optional<CampaignState> to = CampaignStateFromString(state);
  if (!to.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "campaign ", Quoted(name), ": unknown state ", Quoted(state)));
  }
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(*db_, name));
    if (!only_from.empty() && c.state != only_from) {
      return absl::FailedPreconditionError(absl::StrCat(
          "campaign ", Quoted(name), " is ", c.state, ", not ", only_from));
    }
    const std::optional<CampaignState> from = CampaignStateFromString(c.state);
    if (from.has_value() && !CanMoveCampaign(*from, *to)) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quoted(name), " is already ", c.state,
                       " and cannot become ", state));
    }
    const int64_t now = NowMs();
    GT_RETURN_IF_ERROR(
        db_->Run("UPDATE campaigns SET state = ?, error = ?, updated_ms = ? WHERE name = ?",
                 state, error, now, name));
    // The error once: a message that already says it is not followed by it.
    return AppendLocked(StampedEvent(name, 0, "campaign_state", state,
                              message.empty() || error.empty()
                                  ? absl::StrCat(message, error)
                              : absl::StrContains(message, error)
                                  ? message
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
    return AppendLocked(StampedEvent(
        name, 0, "buffer", "",
        buffer_id == 0        ? "device buffer released"
        : gpu_serial.empty() ? absl::StrCat("device buffer ", buffer_id)
                             : absl::StrCat("device buffer ", buffer_id, " on GPU ", gpu_serial),
        now));
  });
}

absl::StatusOr<EventSeqs> StateStore::MarkHolderState(
    const std::string& campaign, const std::string& holder,
    const std::string& state, const std::string& error) {
  if (!IsHolderState(state)) {
    return absl::InvalidArgumentError(
        absl::StrCat("campaign ", Quoted(campaign), ", holder ", Quoted(holder),
                     ": unknown holder state ", Quoted(state)));
  }
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_RETURN_IF_ERROR(LoadHolder(*db_, campaign, holder).status());
    return SetHolderStateLocked(campaign, holder, state, error);
  });
}

absl::Status StateStore::SetHolderStateLocked(const std::string& campaign,
                                              const std::string& holder,
                                              const std::string& state,
                                              const std::string& error) {
  GT_RETURN_IF_ERROR(db_->Run(
      "UPDATE holders SET state = ?, error = ? WHERE campaign = ? AND name = ?", state, error,
      campaign, holder));
  return AppendLocked(StampedEvent(campaign, 0, "holder_state", state,
                                   error.empty()
                                       ? absl::StrCat("holder ", Quoted(holder))
                                       : absl::StrCat("holder ", Quoted(holder), ": ", error),
                                   NowMs()));
}

absl::StatusOr<EventSeqs> StateStore::SkipHolder(const std::string& campaign,
                                                 const std::string& holder,
                                                 const std::string& error) {
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(*db_, campaign));
    if (c.state != kCampaignPaused) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quoted(campaign), " is ", c.state,
                       "; a holder can be skipped only while the campaign is paused"));
    }
    GT_ASSIGN_OR_RETURN(HolderRow h, LoadHolder(*db_, campaign, holder));
    if (h.state != kHolderActive) {
      return absl::FailedPreconditionError(
          absl::StrCat("holder ", Quoted(holder), " of campaign ", Quoted(campaign), " is ",
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
          absl::StrCat("campaign ", Quoted(campaign), " still has trip ", running.ColInt(0),
                       " in flight; skip the holder once it is finished (it is made safe "
                       "first)"));
    }
    return SetHolderStateLocked(campaign, holder, kHolderSkipped, error);
  });
}

absl::StatusOr<EventSeqs> StateStore::DeleteCampaign(const std::string& name,
                                                     const std::string& who) {
  return Mutate(Durability::kFlush, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    GT_ASSIGN_OR_RETURN(CampaignRow c, LoadCampaign(*db_, name));
    if (!IsTerminalCampaignState(c.state)) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quoted(name), " is ", c.state,
                       "; only a completed, failed or cancelled campaign can be deleted "
                       "(cancel it first)"));
    }
    // Recovery finds the trips it must make safe in this table: a trip not
    // finished stays until it is (the GPU may still be with its holder).
    GT_ASSIGN_OR_RETURN(Stmt unfinished,
                        db_->Prepare("SELECT id FROM trips WHERE campaign = ? AND step NOT IN "
                                     "('done', 'aborted') LIMIT 1"));
    unfinished.Bind(name);
    GT_ASSIGN_OR_RETURN(bool unsafe, unfinished.Step());
    if (unsafe) {
      return absl::FailedPreconditionError(
          absl::StrCat("campaign ", Quoted(name), " still has trip ", unfinished.ColInt(0),
                       " not made safe; it can be deleted once recovery has brought the GPU "
                       "home, re-keyed and scrubbed (see its events)"));
    }
    GT_RETURN_IF_ERROR(db_->Run("DELETE FROM events WHERE campaign = ?", name));
    GT_RETURN_IF_ERROR(db_->Run("DELETE FROM trips WHERE campaign = ?", name));
    GT_RETURN_IF_ERROR(db_->Run("DELETE FROM holders WHERE campaign = ?", name));
    GT_RETURN_IF_ERROR(db_->Run("DELETE FROM campaigns WHERE name = ?", name));
    return AppendLocked(StampedEvent("", 0, "campaign_deleted", c.state,
                                     absl::StrCat("campaign ", Quoted(name), " (", c.state,
                                                  ", ", c.trips_ok, " trips ok) deleted by ",
                                                  who),
                                     NowMs()));
  });
}

// ---------------------------------------------------------------------------
// Events.

absl::StatusOr<int64_t> StateStore::AppendEvent(const EventRow& e) {
  if (e.kind.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("event for campaign ", Quoted(e.campaign), " has no kind"));
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
                                                   Quoted(campaign), ": limit ",
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
