#include "cli/campaign_view.h"

#include <cstdio>
#include <ctime>
#include <utility>
#include <vector>

#include "cli/progress.h"
#include "cli/table.h"
#include "cli/terminal_text.h"

namespace gputravel::cli {
namespace {

std::string HolderCursor(const v1::HolderStatus& h) {
  // A holder done with every round has its cursor back at 0.
  if (h.state() == "done") return "all of " + FormatBytes(h.dataset_bytes());
  std::string s = FormatBytes(h.cursor_offset());
  if (h.dataset_bytes() > 0) s += " of " + FormatBytes(h.dataset_bytes());
  return s;
}

std::string Flag(bool v, bool running) {
  if (v) return "yes";
  return running ? "-" : "NO";
}

// The digest is checked against the holder's report, which brings the
// bytes and chunks it wrote: a trip that ended before any report (a failed
// channel, a holder that never answered, a recovered one) had none checked.
std::string DigestFlag(const v1::Trip& t, bool running) {
  if (!t.digest_match() && t.bytes() == 0 && t.chunks() == 0) return "-";
  return Flag(t.digest_match(), running);
}

}  // namespace

std::string U64(uint64_t v) { return std::to_string(v); }

std::string FormatTime(int64_t unix_ms, bool with_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = buf;
  if (with_ms) {
    char ms[8];
    std::snprintf(ms, sizeof(ms), ".%03d", static_cast<int>(unix_ms % 1000));
    out += ms;
  }
  return out + "Z";
}

std::string FormatLoss(double loss) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4f", loss);
  return buf;
}

std::string StateName(v1::CampaignState s) {
  const std::string& n = v1::CampaignState_Name(s);
  return n.empty() ? std::to_string(static_cast<int>(s)) : n;
}

bool IsFinal(v1::CampaignState s) {
  return s == v1::COMPLETED || s == v1::FAILED || s == v1::CANCELLED;
}

std::string WaitingText(const v1::Campaign& c) {
  if (!c.waiting_for_gpu()) return "";
  return c.gpu_holder().empty() ? " (waiting for its GPU)"
                                : " (waiting for its GPU, held by campaign " +
                                      TerminalSafe(c.gpu_holder()) + ")";
}

std::string ProgressText(const v1::Campaign& c) {
  if (c.bytes_total() == 0) return "-";
  return FormatPercent(static_cast<double>(c.bytes_provisioned()) /
                       static_cast<double>(c.bytes_total()));
}

std::string CampaignSummary(const v1::Campaign& c) {
  std::string out;
  auto row = [&](const char* k, const std::string& v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%-13s", k);
    out += buf + v + "\n";
  };
  row("Campaign", TerminalSafe(c.name()));
  row("State", StateName(c.state()) + WaitingText(c));
  row("GPU", c.gpu().empty() ? "-" : TerminalSafe(c.gpu()));
  row("Trips", U64(c.trips_ok()) + " ok, " + U64(c.trips_failed()) + " failed");
  if (c.bytes_total() > 0) {
    row("Provisioned", FormatBytes(c.bytes_provisioned()) + " of " +
                           FormatBytes(c.bytes_total()) + " (" + ProgressText(c) + ")");
  } else {
    row("Provisioned", FormatBytes(c.bytes_provisioned()) + " (total not known yet)");
  }
  row("Last loss", c.has_loss() ? FormatLoss(c.last_loss()) : "-");
  if (c.has_eval_loss()) row("Held-out", FormatLoss(c.last_eval_loss()));
  row("Created", FormatTime(c.created_unix_ms(), false));
  row("Updated", FormatTime(c.updated_unix_ms(), false));
  if (!c.error().empty()) row("Error", TerminalSafe(c.error()));
  return out;
}

std::string AttestationTable(const google::protobuf::RepeatedPtrField<v1::HolderStatus>& hs) {
  Table t({"HOLDER", "FORMAT", "TCB", "VERIFIED", "MRTD", "RTMR3"});
  bool any = false;
  for (const auto& h : hs) {
    if (!h.has_attestation()) continue;
    const v1::VerifiedAttestation& a = h.attestation();
    any = true;
    std::string tcb = a.tcb_status().empty() ? "-" : TerminalSafe(a.tcb_status());
    for (const auto& id : a.advisory_ids()) tcb += " " + TerminalSafe(id);
    t.Add({TerminalSafe(h.name()), TerminalSafe(a.format()), tcb,
           FormatTime(a.verified_unix_ms(), false), TerminalSafe(a.mrtd()),
           a.rtmr_size() > 3 ? TerminalSafe(a.rtmr(3)) : "-"});
  }
  return any ? t.Render() : "";
}

std::string HoldersTable(const google::protobuf::RepeatedPtrField<v1::HolderStatus>& hs,
                         bool with_campaign) {
  std::vector<std::string> head;
  if (with_campaign) head.push_back("CAMPAIGN");
  for (const char* h : {"HOLDER", "STATE", "ROUND", "CURSOR", "TRIPS", "BYTES"}) head.push_back(h);
  if (with_campaign) head.push_back("ENDPOINT");
  head.push_back("ERROR");
  int off = with_campaign ? 1 : 0;
  Table t(head, {off + 2, off + 4});
  for (const auto& h : hs) {
    std::vector<std::string> r;
    if (with_campaign) r.push_back(TerminalSafe(h.campaign()));
    r.push_back(TerminalSafe(h.name()));
    r.push_back(h.state().empty() ? "-" : TerminalSafe(h.state()));
    r.push_back(std::to_string(h.round()));
    r.push_back(HolderCursor(h));
    r.push_back(U64(h.trips()));
    r.push_back(FormatBytes(h.bytes()));
    if (with_campaign) r.push_back(h.endpoint().empty() ? "-" : TerminalSafe(h.endpoint()));
    r.push_back(TerminalSafe(h.error()));
    t.Add(std::move(r));
  }
  return t.Render();
}

std::string TripsTable(const v1::Campaign& c) {
  Table t({"ID", "HOLDER", "ROUND", "WINDOW", "STEP", "OUTCOME", "BYTES", "MB/S", "LOSS",
           "DIGEST", "SCRUB", "REKEY", "ERROR"},
          {0, 2, 7, 8});
  for (const auto& tr : c.trips()) {
    bool running = tr.outcome().empty();
    char mbs[32] = "-";
    if (tr.provision_seconds() > 0 && tr.bytes() > 0) {
      std::snprintf(mbs, sizeof(mbs), "%.1f", tr.bytes() / 1e6 / tr.provision_seconds());
    }
    std::string window = FormatBytes(tr.window_offset()) + " +" + FormatBytes(tr.window_length());
    t.Add({U64(tr.id()), TerminalSafe(tr.holder()), std::to_string(tr.round()), window,
           v1::TripStep_Name(tr.step()), running ? "running" : TerminalSafe(tr.outcome()),
           FormatBytes(tr.bytes()), mbs, tr.has_loss() ? FormatLoss(tr.loss()) : "-",
           DigestFlag(tr, running), Flag(tr.scrub_verified(), running),
           Flag(tr.rekeyed(), running), TerminalSafe(tr.error())});
  }
  return t.Render();
}

std::string EventLine(const v1::Event& e) {
  auto pad = [](std::string s, size_t n) {
    if (s.size() < n) s += std::string(n - s.size(), ' ');
    return s + "  ";
  };
  std::string l = FormatTime(e.time_unix_ms(), true) + "  ";
  l += pad(e.trip() ? "trip " + U64(e.trip()) : "-", 7);
  l += pad(e.holder().empty() ? "-" : TerminalSafe(e.holder()), 12);
  l += pad(v1::EventKind_Name(e.kind()), 14);
  l += pad(e.step() == v1::TRIP_STEP_UNSPECIFIED ? "-" : v1::TripStep_Name(e.step()), 10);
  std::string msg = TerminalSafe(e.message());
  if (e.kind() == v1::CAMPAIGN_STATE) {
    std::string st = "state " + StateName(e.campaign_state());
    msg = msg.empty() ? st : st + ": " + msg;
  }
  if ((e.kind() == v1::PROVISIONED || e.kind() == v1::PROGRESS) && e.bytes() > 0) {
    std::string b = FormatBytes(e.bytes());
    if (e.total_bytes() > 0) b += " of " + FormatBytes(e.total_bytes());
    msg = msg.empty() ? b : msg + " (" + b + ")";
  }
  if (e.kind() == v1::TRAINED && e.has_loss()) {
    msg += (msg.empty() ? "" : " ") + std::string("loss=") + FormatLoss(e.loss());
    if (e.has_eval_loss()) msg += " held-out=" + FormatLoss(e.eval_loss());
  }
  l += msg.empty() ? "-" : msg;
  while (!l.empty() && l.back() == ' ') l.pop_back();
  return l;
}

}  // namespace gputravel::cli
