#include "orchestrator/state_rows.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "util/status_macros.h"

namespace gputravel {
namespace {

// Column lists shared by the loaders; the Read* functions follow the order.
#define GT_SS_CAMPAIGN_COLS                                             \
  "name, request_id, spec_json, gpu, rounds, state, error, buffer_id, " \
  "created_ms, updated_ms, trips_ok, trips_failed, trips_aborted, "     \
  "bytes_provisioned, last_loss, last_holder, buffer_gpu_serial, "      \
  "last_eval_loss, terms"
#define GT_SS_HOLDER_COLS                                                  \
  "campaign, name, position, dataset_bytes, cursor_offset, round, state, " \
  "error, trips, bytes, attestation"
#define GT_SS_TRIP_COLS                                                    \
  "id, campaign, holder, window_offset, window_length, round, step, "      \
  "outcome, error, bytes, chunks, digest_match, scrub_verified, rekeyed, " \
  "trained, loss, provision_seconds, started_ms, ended_ms, gpu_session, "  \
  "first_counter, counter_count, duration_us, gpu_serial, eval_loss, "  \
  "reported_loss, reported_eval_loss, attestation, trainer_checkpoint, "  \
  "trainer_tokens"
#define GT_SS_EVENT_COLS \
  "seq, campaign, trip, kind, step, message, bytes, loss, time_ms, eval_loss"

CampaignRow ReadCampaign(Stmt& s) {
  CampaignRow c;
  c.name = s.ColText(0);
  c.request_id = s.ColText(1);
  c.spec_json = s.ColText(2);
  c.gpu = s.ColText(3);
  c.rounds = static_cast<uint32_t>(s.ColInt(4));
  c.state = s.ColText(5);
  c.error = s.ColText(6);
  c.buffer_id = s.ColU64(7);
  c.created_ms = s.ColInt(8);
  c.updated_ms = s.ColInt(9);
  c.trips_ok = s.ColInt(10);
  c.trips_failed = s.ColInt(11);
  c.trips_aborted = s.ColInt(12);
  c.bytes_provisioned = s.ColU64(13);
  c.last_loss = s.ColOptReal(14);
  c.last_holder = s.ColText(15);
  c.buffer_gpu_serial = s.ColText(16);
  c.last_eval_loss = s.ColOptReal(17);
  c.terms = s.ColBlob(18);
  return c;
}

HolderRow ReadHolder(Stmt& s) {
  HolderRow h;
  h.campaign = s.ColText(0);
  h.name = s.ColText(1);
  h.position = static_cast<int32_t>(s.ColInt(2));
  h.dataset_bytes = s.ColU64(3);
  h.cursor_offset = s.ColU64(4);
  h.round = static_cast<uint32_t>(s.ColInt(5));
  h.state = s.ColText(6);
  h.error = s.ColText(7);
  h.trips = s.ColInt(8);
  h.bytes = s.ColU64(9);
  h.attestation = s.ColBlob(10);
  return h;
}

TripRow ReadTrip(Stmt& s) {
  TripRow t;
  t.id = s.ColU64(0);
  t.campaign = s.ColText(1);
  t.holder = s.ColText(2);
  t.window_offset = s.ColU64(3);
  t.window_length = s.ColU64(4);
  t.round = static_cast<uint32_t>(s.ColInt(5));
  t.step = s.ColText(6);
  t.outcome = s.ColText(7);
  t.error = s.ColText(8);
  t.bytes = s.ColU64(9);
  t.chunks = s.ColU64(10);
  t.digest_match = s.ColBool(11);
  t.scrub_verified = s.ColBool(12);
  t.rekeyed = s.ColBool(13);
  t.trained = s.ColBool(14);
  t.loss = s.ColOptReal(15);
  t.provision_seconds = s.ColReal(16);
  t.started_ms = s.ColInt(17);
  t.ended_ms = s.ColInt(18);
  t.gpu_session = s.ColU64(19);
  t.first_counter = static_cast<uint32_t>(s.ColInt(20));
  t.counter_count = static_cast<uint32_t>(s.ColInt(21));
  t.duration_us = s.ColInt(22);
  t.gpu_serial = s.ColText(23);
  t.eval_loss = s.ColOptReal(24);
  t.reported_loss = s.ColOptReal(25);
  t.reported_eval_loss = s.ColOptReal(26);
  t.attestation = s.ColBlob(27);
  t.trainer_checkpoint_sha256 = s.ColBlob(28);
  t.trainer_tokens = s.ColU64(29);
  return t;
}

EventRow ReadEvent(Stmt& s) {
  EventRow e;
  e.seq = s.ColInt(0);
  e.campaign = s.ColText(1);
  e.trip = s.ColU64(2);
  e.kind = s.ColText(3);
  e.step = s.ColText(4);
  e.message = s.ColText(5);
  e.bytes = s.ColU64(6);
  e.loss = s.ColOptReal(7);
  e.time_ms = s.ColInt(8);
  e.eval_loss = s.ColOptReal(9);
  return e;
}

// Every row `s` answers, decoded by `read`.
template <typename Row, typename Read>
absl::StatusOr<std::vector<Row>> ReadAll(Stmt& s, Read read) {
  std::vector<Row> out;
  while (true) {
    GT_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    out.push_back(read(s));
  }
}

}  // namespace

absl::StatusOr<CampaignRow> LoadCampaign(SqliteDb& db, const std::string& name) {
  GT_ASSIGN_OR_RETURN(Stmt s,
                      db.Prepare("SELECT " GT_SS_CAMPAIGN_COLS " FROM campaigns WHERE name = ?"));
  GT_ASSIGN_OR_RETURN(bool row, s.Bind(name).Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("campaign \"", name, "\" not found"));
  }
  return ReadCampaign(s);
}

absl::StatusOr<std::vector<CampaignRow>> LoadCampaigns(SqliteDb& db) {
  GT_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT " GT_SS_CAMPAIGN_COLS
                                         " FROM campaigns ORDER BY created_ms, name"));
  return ReadAll<CampaignRow>(s, [](Stmt& s) { return ReadCampaign(s); });
}

absl::StatusOr<HolderRow> LoadHolder(SqliteDb& db, const std::string& campaign,
                                     const std::string& name) {
  GT_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT " GT_SS_HOLDER_COLS
                                         " FROM holders WHERE campaign = ? AND name = ?"));
  GT_ASSIGN_OR_RETURN(bool row, s.Bind(campaign, name).Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat(
        "holder \"", name, "\" is not part of campaign \"", campaign, "\""));
  }
  return ReadHolder(s);
}

absl::StatusOr<std::vector<HolderRow>> LoadHolders(SqliteDb& db, const std::string& campaign) {
  GT_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT " GT_SS_HOLDER_COLS
                                         " FROM holders WHERE campaign = ? ORDER BY position"));
  s.Bind(campaign);
  return ReadAll<HolderRow>(s, ReadHolder);
}

absl::StatusOr<TripRow> LoadTrip(SqliteDb& db, uint64_t trip_id) {
  GT_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT " GT_SS_TRIP_COLS " FROM trips WHERE id = ?"));
  GT_ASSIGN_OR_RETURN(bool row, s.Bind(trip_id).Step());
  if (!row) return absl::NotFoundError(absl::StrCat("trip ", trip_id, " not found"));
  return ReadTrip(s);
}

absl::StatusOr<std::vector<TripRow>> LoadTrips(SqliteDb& db, const std::string& campaign) {
  GT_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT " GT_SS_TRIP_COLS
                                         " FROM trips WHERE campaign = ? ORDER BY id"));
  s.Bind(campaign);
  return ReadAll<TripRow>(s, ReadTrip);
}

absl::StatusOr<std::vector<TripRow>> LoadUnfinishedTrips(SqliteDb& db) {
  GT_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT " GT_SS_TRIP_COLS
                                         " FROM trips WHERE step NOT IN ('done', 'aborted') "
                                         "ORDER BY id"));
  return ReadAll<TripRow>(s, ReadTrip);
}

absl::StatusOr<std::vector<EventRow>> LoadEvents(SqliteDb& db, const std::string& campaign,
                                                 int64_t after_seq, int limit) {
  const char* sql =
      campaign.empty()
          ? "SELECT " GT_SS_EVENT_COLS
            " FROM events WHERE seq > ? ORDER BY seq LIMIT ?"
          : "SELECT " GT_SS_EVENT_COLS
            " FROM events WHERE campaign = ? AND seq > ? ORDER BY seq LIMIT ?";
  GT_ASSIGN_OR_RETURN(Stmt s, db.Prepare(sql));
  if (!campaign.empty()) s.Text(campaign);
  s.Bind(after_seq, limit);
  return ReadAll<EventRow>(s, ReadEvent);
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

std::string Quoted(absl::string_view s) { return absl::StrCat("\"", s, "\""); }

std::string TripName(const TripRow& t) {
  return absl::StrCat("trip ", t.id, " (campaign ", Quoted(t.campaign), ", holder ",
                      Quoted(t.holder), ")");
}

EventRow StampedEvent(const std::string& campaign, uint64_t trip, const char* kind,
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

}  // namespace gputravel
