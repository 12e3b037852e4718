#include "cli/campaign_commands.h"

#include <cstdio>
#include <string>

#include "cli/campaign_view.h"
#include "cli/request_id.h"
#include "cli/terminal_text.h"
#include "cli/watch.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/json_text.h"

namespace gputravel::cli {
namespace {

int RunCreate(CommandContext& ctx) {
  CreateResult r = CreateCampaign(ctx);
  if (r.exit == kExitOk) PrintCreated(ctx, r);
  return r.exit;
}

using StateRpc = grpc::Status (v1::Orchestrator::Stub::*)(grpc::ClientContext*,
                                                         const v1::CampaignRef&, v1::Campaign*);

int RunStateChange(CommandContext& ctx, StateRpc rpc, const std::string& rpc_name,
                   const std::string& done_text) {
  if (int rc = ctx.Connect()) return rc;
  v1::CampaignRef ref;
  ref.set_name(ctx.flags().positional()[0]);
  v1::Campaign camp;
  auto c = ctx.Call();
  grpc::Status s = (ctx.stub().*rpc)(c.get(), ref, &camp);
  if (!s.ok()) return ctx.RpcError(s, rpc_name + " '" + ref.name() + "'");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(camp));
  } else {
    std::printf("%s\n\n%s", done_text.c_str(), CampaignSummary(camp).c_str());
  }
  return kExitOk;
}

int RunStart(CommandContext& ctx) {
  const std::string n = ctx.flags().positional()[0];
  return RunStateChange(ctx, &v1::Orchestrator::Stub::StartCampaign, "StartCampaign",
                        "Started campaign '" + n + "'.");
}

int RunPause(CommandContext& ctx) {
  const std::string n = ctx.flags().positional()[0];
  return RunStateChange(ctx, &v1::Orchestrator::Stub::PauseCampaign, "PauseCampaign",
                        "Pause requested for campaign '" + n +
                            "': the trip in progress completes (and is scrubbed), then no "
                            "new trip starts.");
}

int RunResume(CommandContext& ctx) {
  const std::string n = ctx.flags().positional()[0];
  return RunStateChange(ctx, &v1::Orchestrator::Stub::ResumeCampaign, "ResumeCampaign",
                        "Resumed campaign '" + n + "'.");
}

int RunCancel(CommandContext& ctx) {
  const std::string name = ctx.flags().positional()[0];
  if (!ctx.flags().IsSet("wait")) {
    return RunStateChange(ctx, &v1::Orchestrator::Stub::CancelCampaign, "CancelCampaign",
                          "Cancel requested for campaign '" + name +
                              "': a trip in progress is aborted and made safe first. "
                              "Use --wait or `gputravel watch " + name +
                              "` to see the final state.");
  }
  if (int rc = ctx.Connect()) return rc;
  v1::CampaignRef ref;
  ref.set_name(name);
  v1::Campaign camp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().CancelCampaign(c.get(), ref, &camp);
  if (!s.ok()) return ctx.RpcError(s, "CancelCampaign '" + name + "'");
  v1::Campaign final_camp = camp;
  v1::CampaignState final_state = camp.state();
  std::string last_message;
  if (!IsFinal(camp.state())) {
    if (!ctx.json()) {
      std::printf("Cancelling campaign '%s'; waiting for the trip in progress to be made "
                  "safe...\n",
                  name.c_str());
      std::fflush(stdout);
    }
    WatchOptions o;
    o.print_events = !ctx.json();
    o.print_from_ms = camp.updated_unix_ms();  // Only what happened since the cancel.
    WatchResult w = Watch(ctx, name, o);
    if (w.exit != kExitOk) return w.exit;
    final_state = w.final_state;
    last_message = w.last_message;
    if (w.have_campaign) final_camp = w.campaign;
    final_camp.set_state(final_state);
  }
  if (ctx.json()) {
    ctx.PrintJson(ToJson(final_camp));
  } else {
    std::printf("\n%s", CampaignSummary(final_camp).c_str());
  }
  if (final_state == v1::CANCELLED) return kExitOk;
  std::string why =
      TerminalSafe(!final_camp.error().empty() ? final_camp.error() : last_message);
  return ctx.Fail(kExitFailed, "campaign '" + name + "' ended " + StateName(final_state) +
                                   ", not CANCELLED" + (why.empty() ? "" : ": " + why));
}

int RunSkipHolder(CommandContext& ctx) {
  const std::string campaign = ctx.flags().positional()[0];
  const std::string holder = ctx.flags().positional()[1];
  const std::string reason = ctx.flags().Get("reason");
  if (reason.empty()) {
    return ctx.Fail(kExitUsage, "--reason is required: say why holder '" + holder +
                                    "' is taken out (it is recorded with the holder)");
  }
  if (int rc = ctx.Connect()) return rc;
  v1::SkipHolderRequest req;
  req.set_campaign(campaign);
  req.set_holder(holder);
  req.set_reason(reason);
  v1::Campaign camp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().SkipHolder(c.get(), req, &camp);
  if (!s.ok()) return ctx.RpcError(s, "SkipHolder '" + holder + "' of '" + campaign + "'");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(camp));
  } else {
    std::printf("Skipped holder '%s' of campaign '%s': its remaining windows will not be "
                "trained. Resume the campaign to go on without it.\n\n%s",
                TerminalSafe(holder).c_str(), TerminalSafe(campaign).c_str(),
                CampaignSummary(camp).c_str());
  }
  return kExitOk;
}

int RunDelete(CommandContext& ctx) {
  const std::string name = ctx.flags().positional()[0];
  if (int rc = ctx.Connect()) return rc;
  v1::CampaignRef ref;
  ref.set_name(name);
  v1::DeleteCampaignResponse resp;
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().DeleteCampaign(c.get(), ref, &resp);
  if (!s.ok()) return ctx.RpcError(s, "DeleteCampaign '" + name + "'");
  if (ctx.json()) {
    ctx.PrintJson(ToJson(resp));
  } else {
    std::printf("Deleted campaign '%s'; its name can be used again.\n",
                TerminalSafe(name).c_str());
  }
  return kExitOk;
}

}  // namespace

CreateResult CreateCampaign(CommandContext& ctx) {
  CreateResult r;
  auto fail = [&r](int code) {
    r.exit = code;
    return r;
  };
  const std::string path = ctx.flags().positional()[0];
  auto text = ReadFile(path);
  if (!text.ok()) return fail(ctx.Fail(kExitUsage, std::string(text.status().message())));
  // Checked before sending, as the orchestrator will (syntax, duplicate keys).
  auto spec = ParseJsonText(*text, path);
  if (!spec.ok()) return fail(ctx.Fail(kExitUsage, std::string(spec.status().message())));
  if (!spec->is_object()) {
    return fail(ctx.Fail(kExitUsage, path + ": the specification must be a JSON object"));
  }
  r.request_id = ctx.flags().Get("request_id");
  if (r.request_id.empty()) r.request_id = RandomRequestId();
  if (r.request_id.size() > 128) {
    return fail(ctx.Fail(kExitUsage, "--request_id: at most 128 characters"));
  }
  for (char c : r.request_id) {
    if (c < 0x21 || c > 0x7e) {
      return fail(
          ctx.Fail(kExitUsage, "--request_id: only printable ASCII characters, no spaces"));
    }
  }
  if (int rc = ctx.Connect()) return fail(rc);
  const std::string retry = "retry with --request_id=" + r.request_id;

  v1::CreateCampaignRequest req;
  req.set_request_id(r.request_id);
  req.set_spec_json(*text);
  auto c = ctx.Call();
  grpc::Status s = ctx.stub().CreateCampaign(c.get(), req, &r.response);
  if (!s.ok()) {
    bool transient = ExitCodeFor(s.error_code()) == kExitUnreachable ||
                     ExitCodeFor(s.error_code()) == kExitFailed;
    return fail(ctx.RpcError(s, "CreateCampaign",
                             transient ? retry + " (the same request is never created twice)"
                                       : "request id " + r.request_id));
  }
  r.registered = true;
  if (ctx.flags().IsSet("start")) {
    v1::CampaignRef ref;
    ref.set_name(r.response.campaign().name());
    v1::Campaign camp;
    auto c2 = ctx.Call();
    s = ctx.stub().StartCampaign(c2.get(), ref, &camp);
    if (!s.ok()) {
      const std::string shown = TerminalSafe(ref.name());  // The name the server gave.
      return fail(ctx.RpcError(s, "StartCampaign of '" + shown + "' (the campaign is " +
                                      (r.response.created() ? "created" : "registered") + ")",
                               "start it with `gputravel start " + shown + "`"));
    }
    *r.response.mutable_campaign() = camp;
    r.started = true;
  }
  return r;
}

void PrintCreated(CommandContext& ctx, const CreateResult& r) {
  const v1::CreateCampaignResponse& resp = r.response;
  if (ctx.json()) {
    nlohmann::json j = nlohmann::json::parse(ToJson(resp), nullptr, false);
    if (j.is_discarded()) j = nlohmann::json::object();
    j["request_id"] = r.request_id;
    j["started"] = r.started;
    // Never throws: invalid UTF-8 becomes U+FFFD.
    ctx.PrintJson(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  std::printf("Request id: %s\n", r.request_id.c_str());
  if (resp.created()) {
    std::printf("Created campaign '%s'.\n", TerminalSafe(resp.campaign().name()).c_str());
  } else {
    std::printf("Campaign '%s' already existed for this request id (same specification); "
                "nothing new was created.\n",
                TerminalSafe(resp.campaign().name()).c_str());
  }
  if (r.started) {
    std::printf("Started campaign '%s'.\n", TerminalSafe(resp.campaign().name()).c_str());
  }
  std::printf("\n%s", CampaignSummary(resp.campaign()).c_str());
  std::fflush(stdout);
}

std::vector<CommandInfo> CampaignCommands() {
  return {
      {"create", "SPEC.json", 1, 1, "Register a campaign from its JSON specification.",
       "Registers a campaign from the JSON specification in SPEC.json\n"
       "(docs/campaign-config.md) with CreateCampaign and prints it. The file is\n"
       "checked to be a JSON object before anything is sent. The call is\n"
       "idempotent per request id: without --request_id a random one is made up\n"
       "and printed; repeating the command with the same --request_id and the same\n"
       "file returns the existing campaign instead of creating another. The\n"
       "campaign starts in state CREATED unless --start is given.\n"
       "With --json: {\"campaign\": {...}, \"created\": bool, \"request_id\": \"...\",\n"
       "\"started\": bool}.",
       [](Flags& f) {
         f.String("request_id", "",
                  "Idempotency token (1-128 printable characters); default: a random UUID, "
                  "printed so the command can be retried safely.");
         f.Bool("start", "Also start the campaign (StartCampaign) once it is registered.");
       },
       RunCreate},
      {"start", "NAME", 1, 1, "Start a CREATED campaign.",
       "Moves campaign NAME from CREATED to RUNNING (StartCampaign) and prints it.\n"
       "Starting a RUNNING campaign changes nothing; any other state is refused\n"
       "(exit 4). A campaign whose GPU is busy waits in RUNNING until it is free.",
       NoFlags, RunStart},
      {"pause", "NAME", 1, 1, "Pause a RUNNING campaign at the next safe point.",
       "Asks the orchestrator to pause campaign NAME (PauseCampaign): the trip in\n"
       "progress completes (its buffer scrubbed), then no new trip starts. Pausing\n"
       "a PAUSED campaign changes nothing. Prints the campaign.",
       NoFlags, RunPause},
      {"resume", "NAME", 1, 1, "Resume a PAUSED (or CREATED) campaign.",
       "Moves campaign NAME from PAUSED (or CREATED) to RUNNING (ResumeCampaign);\n"
       "holders that failed under the \"pause\" failure policy get another chance.\n"
       "Prints the campaign.",
       NoFlags, RunResume},
      {"cancel", "NAME", 1, 1, "Cancel a campaign (safely aborting the trip in progress).",
       "Cancels campaign NAME (CancelCampaign): a trip in progress is aborted and\n"
       "made safe (GPU routed home, re-keyed, buffer scrubbed and verified), then\n"
       "the campaign becomes CANCELLED. Without --wait the command returns once the\n"
       "state is CANCELLING or CANCELLED. Cancelling a finished campaign is refused\n"
       "(exit 4). With --wait it follows the event stream (printing what happens\n"
       "from the cancel on; with --json only the final campaign) and exits 0 once\n"
       "the campaign is CANCELLED, 1 if it ended otherwise.",
       [](Flags& f) {
         f.Bool("wait", "Follow the campaign's events until it reaches a final state; exit 0 "
                        "only if that is CANCELLED.");
       },
       RunCancel},
      {"skip", "CAMPAIGN HOLDER", 2, 2,
       "Take a holder out of a PAUSED campaign for good (operators only).",
       "Takes active holder HOLDER out of PAUSED campaign CAMPAIGN (SkipHolder): its\n"
       "state becomes \"skipped\", resume does not bring it back, and its remaining\n"
       "windows are not trained; the campaign's final state says it went without\n"
       "it. A trip that failed without evidence against its holder (or the host)\n"
       "pauses the campaign instead of dropping the holder, so that the host cannot\n"
       "choose whose data trains: this is the operator's way on without it. Only\n"
       "the operator role may call it. Refused (exit 4) unless the campaign is\n"
       "PAUSED with no trip in flight and the holder active. Resume afterwards.",
       [](Flags& f) {
         f.String("reason", "", "Why the holder is taken out (required; recorded with the "
                                "holder and in the campaign's events).");
       },
       RunSkipHolder},
      {"delete", "NAME", 1, 1,
       "Delete a COMPLETED, FAILED or CANCELLED campaign (operators only).",
       "Removes campaign NAME (DeleteCampaign) with its holders, trips, events and\n"
       "model checkpoint, so that its name can be used again. Only a campaign in a\n"
       "final state can be deleted (exit 4 otherwise: cancel it first), and only\n"
       "by the operator role. Trip ids are never reused; the deletion is recorded\n"
       "in the orchestrator's log and as a daemon-wide event naming the caller.\n"
       "To keep the campaign's record, save `gputravel status NAME --trips --json`\n"
       "first.",
       NoFlags, RunDelete},
  };
}

}  // namespace gputravel::cli
