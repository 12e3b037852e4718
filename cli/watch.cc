#include "cli/watch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cli/campaign_view.h"
#include "cli/progress.h"
#include "cli/terminal_text.h"

namespace gputravel::cli {
namespace {

int RunWatch(CommandContext& ctx) { return FollowCampaign(ctx, /*quiet=*/false).exit; }

}  // namespace

WatchResult Watch(CommandContext& ctx, const std::string& name, const WatchOptions& o) {
  WatchResult res;
  FILE* bar_out = nullptr;
  if (o.progress) {
    if (!o.json_lines && o.print_events && ::isatty(STDOUT_FILENO)) {
      bar_out = stdout;
    } else if (::isatty(STDERR_FILENO)) {
      bar_out = stderr;
    }
  }
  ProgressDisplay bars(bar_out);
  // Best effort: the campaign's numbers for the bars and the final summary.
  auto refresh = [&]() -> bool {
    auto c = ctx.Call();
    v1::GetCampaignRequest req;
    req.set_name(name);
    v1::Campaign camp;
    grpc::Status s = ctx.stub().GetCampaign(c.get(), req, &camp);
    if (!s.ok()) return false;
    res.campaign = camp;
    res.have_campaign = true;
    if (bars.enabled()) {
      bars.SetCampaign(camp.name(), camp.bytes_provisioned(), camp.bytes_total(),
                       camp.trips_ok(), camp.trips_failed());
    }
    return true;
  };
  if (bars.enabled()) {
    refresh();
    bars.Draw(true);
  }

  grpc::ClientContext stream_ctx;  // No deadline: a campaign runs for hours.
  v1::WatchCampaignRequest req;
  req.set_name(name);
  req.set_after_seq(o.after_seq);
  auto reader = ctx.stub().WatchCampaign(&stream_ctx, req);
  v1::Event ev;
  v1::CampaignState last_state = v1::CAMPAIGN_STATE_UNSPECIFIED;
  int64_t last_seq = o.after_seq;
  bool stopped = false;  // in one of o.stop_states
  auto is_stop_state = [&](v1::CampaignState s) {
    return std::find(o.stop_states.begin(), o.stop_states.end(), s) != o.stop_states.end();
  };
  while (!stopped && reader->Read(&ev)) {
    if (ev.seq() > last_seq) last_seq = ev.seq();
    switch (ev.kind()) {
      case v1::CAMPAIGN_STATE:
        last_state = ev.campaign_state();
        res.last_message = ev.message();
        // A replayed event of a state the campaign has left does not count.
        stopped = is_stop_state(last_state) && refresh() && res.campaign.state() == last_state;
        break;
      case v1::ERROR:
        res.last_message = ev.message();
        break;
      case v1::TRIP_STARTED:
        bars.TripStarted(ev.trip(), ev.holder());
        break;
      case v1::PROGRESS:
      case v1::PROVISIONED:
        bars.TripBytes(ev.trip(), ev.holder(), ev.bytes(), ev.total_bytes());
        break;
      case v1::TRIP_FINISHED:
        bars.TripFinished();
        if (bars.enabled()) refresh();
        break;
      default:
        break;
    }
    bool recorded = !(ev.kind() == v1::PROGRESS && ev.seq() == 0);
    if (o.json_lines) {
      bars.Clear();
      ctx.PrintJson(ToJson(ev));
      bars.Draw(true);
    } else if (o.print_events && recorded && ev.time_unix_ms() >= o.print_from_ms) {
      bars.Clear();
      std::printf("%s\n", EventLine(ev).c_str());
      std::fflush(stdout);
      bars.Draw(true);
    } else {
      bars.Draw(false);
    }
  }
  if (stopped) stream_ctx.TryCancel();
  grpc::Status st = reader->Finish();
  bars.Clear();
  if (stopped) {
    res.final_state = last_state;
    return res;
  }
  if (!st.ok()) {
    res.exit = ctx.RpcError(st, "WatchCampaign",
                            ExitCodeFor(st.error_code()) == kExitUnreachable
                                ? "to continue after the last event received, watch again "
                                  "with --after_seq=" + std::to_string(last_seq)
                                : "");
    return res;
  }
  // Best effort: the final campaign for the summary (and the state if the
  // stream did not carry it, e.g. when --after_seq skipped past it).
  bool have = refresh();
  if (IsFinal(last_state)) {
    res.final_state = last_state;
  } else if (have && (IsFinal(res.campaign.state()) || is_stop_state(res.campaign.state()))) {
    res.final_state = res.campaign.state();
  } else {
    std::string now = have ? StateName(res.campaign.state()) : "unknown";
    res.exit = ctx.Fail(kExitFailed, "the event stream of campaign '" + name +
                                         "' ended before a final state (state: " + now + ")");
  }
  return res;
}

FollowResult FollowCampaign(CommandContext& ctx, bool quiet) {
  FollowResult f;
  auto done = [&f](int code) {
    f.exit = code;
    return f;
  };
  const std::string name = ctx.flags().positional()[0];
  const std::string after = ctx.flags().Get("after_seq");
  char* end = nullptr;
  long long after_seq = std::strtoll(after.c_str(), &end, 10);
  if (after.empty() || *end != '\0' || after_seq < 0) {
    return done(ctx.Fail(kExitUsage, "--after_seq must be an integer >= 0"));
  }
  const std::string until_name = ctx.flags().Get("until");
  v1::CampaignState until = v1::CAMPAIGN_STATE_UNSPECIFIED;
  if (!until_name.empty() && (!v1::CampaignState_Parse(until_name, &until) ||
                              until == v1::CAMPAIGN_STATE_UNSPECIFIED)) {
    return done(ctx.Fail(kExitUsage,
                         "--until must be a campaign state (CREATED, RUNNING, PAUSING, "
                         "PAUSED, CANCELLING, COMPLETED, FAILED, CANCELLED), not '" +
                             until_name + "'"));
  }
  if (int rc = ctx.Connect()) return done(rc);
  WatchOptions o;
  o.stop_states = {until_name.empty() ? v1::PAUSED : until};
  o.after_seq = after_seq;
  o.json_lines = ctx.json() && !quiet;
  o.print_events = !ctx.json() && !quiet;
  o.progress = !ctx.flags().IsSet("no_progress") && !quiet;
  f.watch = Watch(ctx, name, o);
  const WatchResult& w = f.watch;
  if (w.exit != kExitOk) return done(w.exit);
  std::string why = TerminalSafe(w.have_campaign && !w.campaign.error().empty()
                                     ? w.campaign.error()
                                     : w.last_message);
  if (!ctx.json() && !quiet) {
    std::string line = "Campaign '" + name + "' " + StateName(w.final_state);
    if (w.have_campaign) {
      const auto& c = w.campaign;
      line += ": " + U64(c.trips_ok()) + " trips ok, " + U64(c.trips_failed()) + " failed, " +
              FormatBytes(c.bytes_provisioned()) + " provisioned";
      if (c.has_loss()) line += ", last loss " + FormatLoss(c.last_loss());
    }
    std::printf("%s.\n", line.c_str());
    std::fflush(stdout);
  }
  if (!until_name.empty() && w.final_state == until) return done(kExitOk);
  switch (w.final_state) {
    case v1::COMPLETED:
      if (!until_name.empty()) {
        return done(ctx.Fail(kExitFailed, "campaign '" + name +
                                              "' COMPLETED without reaching " + until_name));
      }
      return done(kExitOk);
    case v1::CANCELLED:
      return done(kExitCancelled);
    case v1::PAUSED:
      return done(ctx.Fail(kExitPaused, "campaign '" + name + "' PAUSED" +
                                            (why.empty() ? "" : ": " + why) +
                                            "; resume it with `gputravel resume " + name +
                                            "`"));
    default:
      return done(ctx.Fail(kExitFailed, "campaign '" + name + "' FAILED" +
                                            (why.empty() ? "" : ": " + why)));
  }
}

CommandInfo WatchCommand() {
  return {"watch", "NAME", 1, 1, "Follow a campaign's events until it finishes.",
          "Streams the events of campaign NAME (WatchCampaign): first the recorded ones\n"
          "after --after_seq, then live ones, one line each (time UTC, trip, holder,\n"
          "kind, step, message, loss). On a terminal, progress bars for the current\n"
          "provisioning (bytes of the trip, rate) and for the campaign (bytes\n"
          "provisioned of the total, trips) are redrawn in place below the events\n"
          "(on stdout, or on stderr when only stderr is a terminal); never when the\n"
          "output is not a terminal. With --json every event, the live PROGRESS\n"
          "events (seq 0) included, is printed as one JSON object per line. The\n"
          "watch ends when the campaign reaches a final state or is PAUSED (it then\n"
          "waits for an operator); the exit code says which: 0 COMPLETED, 1 FAILED,\n"
          "7 CANCELLED, 8 PAUSED. With --until STATE it ends when the campaign is in\n"
          "STATE (exit 0; at once if it already is), or in a final state first (1 for\n"
          "COMPLETED or FAILED, 7 for CANCELLED).",
          [](Flags& f) {
            f.String("after_seq", "0",
                     "Replay only recorded events with a sequence number above N (0: all).");
            f.Bool("no_progress", "Never draw progress bars, even on a terminal.");
            f.String("until", "",
                     "End when the campaign is in this state (e.g. PAUSED, RUNNING, "
                     "COMPLETED), exit 0.");
          },
          RunWatch};
}

}  // namespace gputravel::cli
