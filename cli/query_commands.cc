#include "cli/query_commands.h"

#include <cstdio>
#include <string>
#include <vector>

#include "cli/campaign_view.h"
#include "cli/progress.h"
#include "cli/table.h"
#include "cli/terminal_text.h"

namespace gputravel::cli {
namespace {

int RunStatus(CommandContext& ctx) {
  if (int rc = ctx.Connect()) return rc;
  v1::GetCampaignRequest req;
  req.set_name(ctx.flags().positional()[0]);
  req.set_include_trips(ctx.flags().IsSet("trips"));
  v1::Campaign camp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().GetCampaign(c.get(), req, &camp);
  if (!s.ok()) return ctx.RpcError(s, "GetCampaign '" + req.name() + "'");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(camp));
    return kExitOk;
  }
  std::string out = CampaignSummary(camp);
  out += "\nHolders:\n";
  out += camp.holders_size() == 0 ? "  (none yet)\n" : HoldersTable(camp.holders(), false);
  const std::string attested = AttestationTable(camp.holders());
  if (!attested.empty()) out += "\nAttested (latest trip):\n" + attested;
  if (req.include_trips()) {
    out += "\nTrips:\n";
    out += camp.trips_size() == 0 ? "  (none yet)\n" : TripsTable(camp);
  }
  std::fputs(out.c_str(), stdout);
  return kExitOk;
}

int RunList(CommandContext& ctx) {
  if (int rc = ctx.Connect()) return rc;
  v1::ListCampaignsResponse resp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().ListCampaigns(c.get(), v1::ListCampaignsRequest(), &resp);
  if (!s.ok()) return ctx.RpcError(s, "ListCampaigns");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(resp));
    return kExitOk;
  }
  if (resp.campaigns_size() == 0) {
    std::printf("No campaigns.\n");
    return kExitOk;
  }
  Table t({"NAME", "STATE", "GPU", "TRIPS OK", "FAILED", "PROGRESS", "LAST LOSS", "UPDATED"},
          {3, 4, 5, 6});
  for (const auto& cp : resp.campaigns()) {
    t.Add({TerminalSafe(cp.name()),
           StateName(cp.state()) + (cp.waiting_for_gpu() ? " (waiting for GPU)" : ""),
           cp.gpu().empty() ? "-" : TerminalSafe(cp.gpu()),
           U64(cp.trips_ok()), U64(cp.trips_failed()), ProgressText(cp),
           cp.has_loss() ? FormatLoss(cp.last_loss()) : "-",
           FormatTime(cp.updated_unix_ms(), false)});
  }
  std::fputs(t.Render().c_str(), stdout);
  return kExitOk;
}

// `holders check`: the orchestrator's preflight of one holder agent.
int RunHolderCheck(CommandContext& ctx) {
  v1::CheckHolderRequest req;
  req.set_endpoint(ctx.flags().Get("holder_endpoint"));
  req.set_name(ctx.flags().Get("name"));
  req.set_domain(ctx.flags().Get("domain"));
  req.set_dataset_name(ctx.flags().Get("dataset"));
  for (const char* need : {"holder_endpoint", "name", "domain"}) {
    if (ctx.flags().Get(need).empty()) {
      return ctx.Fail(kExitUsage, std::string("holders check needs --") + need + "; see --help");
    }
  }
  if (!ctx.flags().Get("campaign").empty()) {
    return ctx.Fail(kExitUsage, "holders check takes no --campaign; see --help");
  }
  if (int rc = ctx.Connect()) return rc;
  v1::HolderCheck resp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().CheckHolder(c.get(), req, &resp);
  if (!s.ok()) return ctx.RpcError(s, "CheckHolder of '" + req.name() + "'");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(resp));
    return kExitOk;
  }
  const v1::VerifiedAttestation& a = resp.attestation();
  std::string tcb = a.tcb_status().empty() ? "-" : TerminalSafe(a.tcb_status());
  for (const auto& id : a.advisory_ids()) tcb += " " + TerminalSafe(id);
  std::printf("holder %s answers in TD %s, serves dataset %s (%s, %s), and attests.\n",
              TerminalSafe(resp.name()).c_str(), TerminalSafe(resp.domain()).c_str(),
              TerminalSafe(resp.dataset_name()).c_str(),
              TerminalSafe(resp.dataset_format()).c_str(),
              FormatBytes(resp.dataset_bytes()).c_str());
  Table t({"FORMAT", "TCB", "VERIFIED", "MRTD", "RTMR3"});
  t.Add({TerminalSafe(a.format()), tcb, FormatTime(a.verified_unix_ms(), false),
         TerminalSafe(a.mrtd()), a.rtmr_size() > 3 ? TerminalSafe(a.rtmr(3)) : "-"});
  std::fputs(t.Render().c_str(), stdout);
  return kExitOk;
}

int RunHolders(CommandContext& ctx) {
  const auto& pos = ctx.flags().positional();
  if (!pos.empty()) {
    if (pos[0] != "check") {
      return ctx.Fail(kExitUsage, "unknown holders subcommand '" + pos[0] +
                                      "' (only \"check\"); see --help");
    }
    return RunHolderCheck(ctx);
  }
  for (const char* only_check : {"holder_endpoint", "name", "domain", "dataset"}) {
    if (!ctx.flags().Get(only_check).empty()) {
      return ctx.Fail(kExitUsage, std::string("--") + only_check +
                                      " is for `holders check`; see --help");
    }
  }
  if (int rc = ctx.Connect()) return rc;
  v1::ListHoldersRequest req;
  req.set_campaign(ctx.flags().Get("campaign"));
  v1::ListHoldersResponse resp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().ListHolders(c.get(), req, &resp);
  if (!s.ok()) {
    return ctx.RpcError(s, req.campaign().empty() ? "ListHolders"
                                                  : "ListHolders of '" + req.campaign() + "'");
  }
  if (ctx.json()) {
    ctx.PrintJson(ToJson(resp));
    return kExitOk;
  }
  if (resp.holders_size() == 0) {
    std::printf("No holders.\n");
    return kExitOk;
  }
  std::fputs(HoldersTable(resp.holders(), true).c_str(), stdout);
  return kExitOk;
}

int RunGpus(CommandContext& ctx) {
  if (int rc = ctx.Connect()) return rc;
  v1::ListCampaignGpusResponse resp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().ListGpus(c.get(), v1::ListCampaignGpusRequest(), &resp);
  if (!s.ok()) return ctx.RpcError(s, "ListGpus");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(resp));
    return kExitOk;
  }
  if (resp.gpus_size() == 0) {
    std::printf("No GPUs.\n");
    return kExitOk;
  }
  Table t({"GPU", "SERIAL", "CAMPAIGN", "HEALTH", "SESSION", "MEMORY FREE", "QUEUE", "CHECKED"});
  std::vector<std::string> errors;
  for (const auto& g : resp.gpus()) {
    std::string health = "unknown";
    if (g.reach() == v1::GPU_REACHABLE) health = "reachable";
    if (g.reach() == v1::GPU_UNREACHABLE) {
      health = "UNREACHABLE";
      errors.push_back(TerminalSafe(g.name()) + ": " + TerminalSafe(g.error()));
    }
    std::string serial = g.serial().empty() ? "(any certified device)" : g.serial();
    if (!g.device_serial().empty() && g.serial().empty()) serial = g.device_serial();
    std::string queue;
    for (const auto& q : g.queue()) queue += (queue.empty() ? "" : ", ") + q;
    t.Add({TerminalSafe(g.name()), TerminalSafe(serial),
           g.campaign().empty() ? "(idle)" : TerminalSafe(g.campaign()), health,
           g.session() ? "yes" : "no",
           g.memory_bytes() == 0 ? "-"
                                 : FormatBytes(g.memory_free_bytes()) + " of " +
                                       FormatBytes(g.memory_bytes()),
           queue.empty() ? "-" : TerminalSafe(queue),
           g.checked_unix_ms() == 0 ? "never" : FormatTime(g.checked_unix_ms(), false)});
  }
  std::fputs(t.Render().c_str(), stdout);
  for (const auto& e : errors) std::printf("%s\n", e.c_str());
  return kExitOk;
}

}  // namespace

std::vector<CommandInfo> QueryCommands() {
  return {
      {"status", "NAME", 1, 1, "Show a campaign: state, progress, holders (and trips).",
       "Prints campaign NAME (GetCampaign): state, GPU, trips ok/failed, bytes\n"
       "provisioned of the total with a percentage, the last reported training\n"
       "and held-out losses (as the holders' training policies allow), a table of\n"
       "its holders (state, round, cursor, trips, bytes, error) and, once holders\n"
       "have travelled, what was verified of each holder's TD at its latest trip.\n"
       "With --trips also a table of every trip (id, holder, round, window, step,\n"
       "outcome, bytes, MB/s, loss, digest/scrub/re-key checks, error).",
       [](Flags& f) { f.Bool("trips", "Also list every trip of the campaign."); },
       RunStatus},
      {"list", "", 0, 0, "List every campaign, newest first.",
       "Prints a table of every campaign (ListCampaigns): name, state, GPU, trips\n"
       "ok and failed, progress (bytes provisioned of the total), last loss and\n"
       "the time of the last change (UTC).",
       NoFlags, RunList},
      {"holders", "[check]", 0, 1, "List the data holders and their progress; check one.",
       "Prints the holders of every campaign, or of one with --campaign\n"
       "(ListHolders): campaign, holder, state, round, cursor (of the dataset size),\n"
       "successful trips, bytes provisioned, endpoint and error.\n"
       "\n"
       "`holders check --holder_endpoint E --name N --domain D [--dataset NAME]`\n"
       "asks the orchestrator to preflight a holder agent before any campaign names\n"
       "it (CheckHolder): the orchestrator connects to E as it would for a campaign\n"
       "(the agent's certificate must name holder N), checks the TD and dataset it\n"
       "serves, and verifies its attestation evidence against its policy; nothing\n"
       "is provisioned. Prints what it serves and what was verified of its TD.\n"
       "(--endpoint stays the orchestrator's.)",
       [](Flags& f) {
         f.String("campaign", "", "Only this campaign's holders (default: every campaign's).");
         f.String("holder_endpoint", "",
                  "check: the agent's endpoint, as a campaign spec's holders[].endpoint.");
         f.String("name", "", "check: the holder's name, as holders[].name.");
         f.String("domain", "", "check: its TD, as holders[].domain.");
         f.String("dataset", "",
                  "check: the dataset it must serve, as holders[].dataset.name (default: any).");
       },
       RunHolders},
      {"gpus", "", 0, 0, "List the GPUs the orchestrator drives and their campaigns.",
       "Prints the GPUs this orchestrator drives (ListGpus): name at the MUX, the\n"
       "pinned device serial (or, unpinned, the device met), the campaign running\n"
       "on it, its health (whether the orchestrator's last contact with it, home\n"
       "through the MUX and re-keyed, worked; unknown before the first), whether a\n"
       "CC session is in force, device memory free of this orchestrator's buffers\n"
       "(of what the device declared), the RUNNING campaigns queued for it, and\n"
       "when it was last contacted (UTC). Below the table, why each unreachable\n"
       "GPU failed.",
       NoFlags, RunGpus},
  };
}

}  // namespace gputravel::cli
