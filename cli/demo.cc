#include "cli/demo.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "auth/identity.h"
#include "auth/tls_config.h"
#include "cli/campaign_commands.h"
#include "cli/client_commands.h"
#include "cli/emulated_stack.h"
#include "cli/serve_until_stopped.h"
#include "cli/terminal_text.h"
#include "cli/watch.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/flags.h"
#include "util/subprocess.h"

namespace gputravel {
namespace {

// Exit status of `gputravel demo` (stated in its --help).
constexpr int kDemoOk = 0;           // Completed, every trip verified.
constexpr int kDemoNotVerified = 1;  // The campaign did not complete, or a trip did not verify.
constexpr int kDemoUsage = 2;        // Bad usage, or the emulated stack could not start.

bool TripVerified(const v1::Trip& t) {
  return t.outcome() == "ok" && t.digest_match() && t.scrub_verified() && t.rekeyed();
}

// The identity of the demo's PyTorch trainer (`--trainer torch`).
constexpr char kTorchTrainer[] = "torch";

void PrintTable(const v1::Campaign& c, bool torch) {
  std::printf("\nCampaign '%s' on the emulated H100-CC (%s): %s\n\n",
              TerminalSafe(c.name()).c_str(),
              EmulatedStack::kGpuSerial, v1::CampaignState_Name(c.state()).c_str());
  std::printf("%-5s %-10s %10s %10s %7s %9s %9s %-8s %-9s %-8s %6s %8s\n", "trip", "holder",
              "offset", "bytes", "chunks", "seconds", "MB/s", "digest", "scrubbed", "re-keyed",
              "loss", "held-out");
  for (const auto& t : c.trips()) {
    double mbs = t.provision_seconds() > 0 ? t.bytes() / 1e6 / t.provision_seconds() : 0;
    // Reported losses carry the campaign's terms' decimals.
    const int decimals = static_cast<int>(c.terms().loss_decimals());
    char loss[32] = "-";
    if (t.has_loss()) std::snprintf(loss, sizeof(loss), "%.*f", decimals, t.loss());
    char eval[32] = "-";
    if (t.has_eval_loss()) std::snprintf(eval, sizeof(eval), "%.*f", decimals, t.eval_loss());
    std::printf("%-5llu %-10s %10llu %10llu %7llu %9.3f %9.1f %-8s %-9s %-8s %6s %8s\n",
                static_cast<unsigned long long>(t.id()), TerminalSafe(t.holder()).c_str(),
                static_cast<unsigned long long>(t.window_offset()),
                static_cast<unsigned long long>(t.bytes()),
                static_cast<unsigned long long>(t.chunks()), t.provision_seconds(), mbs,
                t.digest_match() ? "match" : "MISMATCH", t.scrub_verified() ? "verified" : "NO",
                t.rekeyed() ? "yes" : "NO", loss, eval);
    if (!t.error().empty()) std::printf("      error: %s\n", TerminalSafe(t.error()).c_str());
  }
  if (torch) {
    std::printf("\nThe loss column is the PyTorch trainer's training loss on each window\n"
                "(python/examples/torch_trainer.py, a small decoder-only transformer in its\n"
                "own process, fed through the orchestrator's Trainer service): the mean\n"
                "over the window's batches of each batch's loss as the model learns, in\n"
                "nats, as the holders' policies let it out (rounded to %u decimals). An\n"
                "untrained model scores ln(512) = 6.24.\n",
                c.terms().loss_decimals());
    return;
  }
  std::printf("\nThe loss column is the built-in next-token trainer's training loss on each\n"
              "window: the mean over its batches of each batch's loss just before the model\n"
              "learns from it, in nats. The held-out column is the model's loss, after the\n"
              "window, on text the orchestrator keeps for itself (never trained on): it\n"
              "falls as the model learns from the holders' data. An untrained model scores\n"
              "ln(512) = 6.24; on the demo's synthetic corpus (entropy about 1.5) the model\n"
              "settles near 1.6. Both are what the holders' training policies let out:\n"
              "rounded to %u decimals, one figure per %u trained window%s (the demo's\n"
              "holders allow a loss per trip; by default a holder allows one per 4).\n",
              c.terms().loss_decimals(), c.terms().min_windows_per_loss(),
              c.terms().min_windows_per_loss() == 1 ? "" : "s");
}

// `demo --serve FILE`: writes how to reach the running stack to FILE (JSON,
// mode 0600, renamed into place so a reader never sees half of it) and
// serves until SIGTERM or SIGINT (or a daemon's own exit, which is
// reported). Returns the exit code.
int Serve(EmulatedStack& stack, const std::string& file, bool torch) {
  auto files = [&](const char* role, const char* name) {
    TlsFiles t = stack.tls({role, name});
    return nlohmann::json{{"ca", t.ca}, {"cert", t.cert}, {"key", t.key}, {"crl", t.crl}};
  };
  nlohmann::json info = {{"dir", stack.dir()},
                         {"endpoint", stack.orchestrator_endpoint()},
                         {"server_name", "orchestrator"},
                         {"scheduler", files(kRoleScheduler, "scheduler")},
                         {"operator", files(kRoleOperator, "operator")},
                         {"spec", stack.CampaignSpec()},
                         {"pid", static_cast<int>(::getpid())}};
  if (torch) {  // the trainer's TLS files and the Trainer service's socket
    info["trainer"] = files(kRoleTrainer, kTorchTrainer);
    info["trainer"]["name"] = kTorchTrainer;
    info["trainer"]["endpoint"] = stack.trainer_endpoint();
  }
  std::string tmp = file + ".tmp";
  absl::Status st = WriteNewFile(tmp, info.dump(2) + "\n", 0600);
  if (st.ok() && std::rename(tmp.c_str(), file.c_str()) != 0) {
    st = absl::InternalError("cannot rename " + tmp + " to " + file);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "gputravel demo: --serve: %s\n", TerminalSafe(st.message()).c_str());
    return kDemoUsage;
  }
  std::fprintf(stderr, "gputravel demo: serving at %s (details in %s); stop with SIGTERM or "
                       "Ctrl-C\n", stack.orchestrator_endpoint().c_str(), file.c_str());
  return ServeUntilStopped(stack, "gputravel demo") == 0 ? kDemoOk : kDemoNotVerified;
}

// `--trainer torch`: starts the example PyTorch trainer (a py_binary in this
// program's runfiles) as its own process, attached to the campaign through
// the stack's Trainer service with the trainer's certificate. Its output
// goes to DIR/torch-trainer.log.
absl::Status StartTorchTrainer(EmulatedStack& stack, const std::string& bin_dir, int threads,
                               Subprocess* trainer) {
  auto dir = FindDaemonDir(bin_dir);
  if (!dir.ok()) return dir.status();
  const std::string program = *dir + "/python/torch_trainer";
  if (::access(program.c_str(), X_OK) != 0) {
    return absl::NotFoundError("cannot find the PyTorch trainer " + program +
                               " (start the demo with `bazel run //:gputravel -- demo`)");
  }
  const TlsFiles t = stack.tls({kRoleTrainer, kTorchTrainer});
  return trainer->Start({program, "--campaign", stack.CampaignSpec()["name"].get<std::string>(),
                         "--checkpoint_dir", stack.dir() + "/torch-checkpoints", "--endpoint",
                         stack.trainer_endpoint(), "--ca", t.ca, "--cert", t.cert, "--key", t.key,
                         "--threads", std::to_string(threads), "--json"},
                        stack.dir() + "/torch-trainer.log");
}

// What CreateAndFollow did.
struct Followed {
  std::string name;      // The campaign's name once it is registered.
  bool started = false;  // StartCampaign succeeded.
};

// Creates, starts and follows the stack's campaign with the code of the
// `create` and `watch` commands, as an operator does with the deployment's
// operator.env: `gputravel create DIR/campaign.json --start`, then
// `gputravel watch NAME`. `quiet` prints nothing on stdout (for --json);
// errors go to stderr either way.
Followed CreateAndFollow(const EmulatedStack& stack, bool quiet) {
  const Deployment& d = stack.deployment();
  const TlsFiles op = d.tls({kRoleOperator, "operator"});
  const std::vector<std::string> common = {"--endpoint=" + d.orchestrator_endpoint,
                                           "--ca=" + op.ca, "--cert=" + op.cert,
                                           "--key=" + op.key, "--crl=" + op.crl};
  Followed f;
  auto invoke = [&](std::vector<std::string> args) {
    if (!quiet) {
      std::string shown = "gputravel";
      for (const auto& a : args) shown += " " + a;
      std::printf("\n$ %s\n", TerminalSafe(shown).c_str());
      std::fflush(stdout);
    }
    args.insert(args.end(), common.begin(), common.end());
    int rc = 0;
    return cli::ClientInvocation::Parse(args, &rc);
  };
  auto create = invoke({"create", d.campaign_spec_path(), "--start"});
  if (create == nullptr) return f;
  cli::CreateResult r = cli::CreateCampaign(create->ctx());
  if (r.registered) f.name = r.response.campaign().name();
  if (r.exit != kExitOk) return f;
  f.started = true;
  if (!quiet) cli::PrintCreated(create->ctx(), r);
  auto watch = invoke({"watch", f.name});
  if (watch != nullptr) cli::FollowCampaign(watch->ctx(), quiet);
  return f;
}

}  // namespace

int DemoCommand(int argc, char** argv) {
  Flags flags("gputravel demo",
              "Writes a deployment to a temporary directory (as `gputravel init`\n"
              "does), starts the emulated GPU, the MUX, N holder agents and the\n"
              "orchestrator from it as separate processes (as `gputravel up` does),\n"
              "creates, starts and follows one campaign in which the GPU travels to\n"
              "every holder and back (as `gputravel create SPEC --start` and\n"
              "`gputravel watch NAME` do, printing what they print), prints a table\n"
              "per trip (with the trainer's loss) and stops every daemon.\n"
              "With --trainer torch the model is the example PyTorch trainer instead\n"
              "of the built-in one: a small decoder-only transformer in its own\n"
              "process (Debian's python3-torch, CPU), fed the windows through the\n"
              "orchestrator's Trainer service; the holders' datasets are then small\n"
              "(64 KiB x holder number) so that it trains in seconds.\n"
              "Exit status: 0 if the campaign completed and every trip verified\n"
              "(digest match, scrub verified, fresh re-key); 1 if the campaign did not\n"
              "complete (it failed, paused or was cancelled, or could not be created,\n"
              "started or followed) or a trip did not verify; 2 on bad usage or if\n"
              "the emulated stack could not start.");
  flags.Int("holders", 3, 1, 16, "Number of data holders; their datasets differ in size.");
  flags.Bool("json", "Print one JSON object instead of the table.");
  flags.Int("buffer_mib", 8, 1, 65536,
            "Device dataset buffer in MiB (bigger datasets take several trips).");
  flags.Int("threads", 2, 1, 32, "Encryption threads per holder.");  // The holder's limit.
  flags.Int("rounds", 1, 1, 100, "Passes over every holder's dataset.");
  flags.Int("v", 0, 0, 3,
            "Daemon log verbosity: 0 errors, 1 info, 2 debug, 3 trace (logs stay in the "
            "temporary directory).");
  flags.Bool("keep", "Keep the temporary directory (configs, logs) and print its path.");
  flags.String("bin_dir", "", "Directory of the daemons (default: Bazel runfiles).");
  flags.String("trainer", "builtin",
               "builtin (the orchestrator's next-token model) or torch (the example PyTorch "
               "trainer, python/examples/torch_trainer.py, in its own process).");
  flags.String("serve", "",
               "Start the stack and run no campaign: write its endpoint, the scheduler's and "
               "operator's TLS files and the campaign spec (with --trainer torch also the "
               "trainer's TLS files and the Trainer service's socket) to this JSON file, and "
               "serve until SIGTERM or Ctrl-C (exit 0), or until a daemon exits by itself "
               "(exit 1, its log's end shown) (for API clients such as the Python package's "
               "tests).");
  absl::Status ps = flags.Parse(argc, argv, 2);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return kDemoOk;
  }
  if (!ps.ok()) {
    std::fprintf(stderr, "gputravel demo: %s (see --help)\n", std::string(ps.message()).c_str());
    return kDemoUsage;
  }
  if (!flags.positional().empty()) {
    std::fprintf(stderr, "gputravel demo: unexpected argument '%s' (see --help)\n",
                 flags.positional()[0].c_str());
    return kDemoUsage;
  }
  // Parse() has checked every integer flag against its range.
  StackOptions o;
  o.holders = flags.GetInt("holders");
  o.buffer_bytes = static_cast<uint64_t>(flags.GetInt("buffer_mib")) << 20;
  o.threads = flags.GetInt("threads");
  o.rounds = static_cast<uint32_t>(flags.GetInt("rounds"));
  o.log_level = flags.GetInt("v");
  o.keep = flags.IsSet("keep");
  o.bin_dir = flags.Get("bin_dir");
  const std::string trainer_kind = flags.Get("trainer");
  if (trainer_kind != "builtin" && trainer_kind != "torch") {
    std::fprintf(stderr, "gputravel demo: --trainer is builtin or torch, not '%s' (see --help)\n",
                 TerminalSafe(trainer_kind).c_str());
    return kDemoUsage;
  }
  const bool torch = trainer_kind == "torch";
  if (torch) {
    o.external_trainer = kTorchTrainer;
    o.eval_set = false;  // the held-out set is the built-in model's
    o.holder_training_policy = {{"min_windows_per_loss", 1},
                                {"min_window_bytes", 32},
                                {"trainer_kinds", {"next-token", "external"}}};
    for (int i = 0; i < o.holders; ++i) o.dataset_bytes.push_back((64u << 10) * (i + 1));
  }
  bool as_json = flags.IsSet("json");
  if (!as_json) {
    std::printf("Starting the emulated stack: GPU, MUX, %d holder(s), orchestrator...\n",
                o.holders);
  }
  auto stack = EmulatedStack::Start(o);
  if (!stack.ok()) {
    std::fprintf(stderr, "gputravel demo: the emulated stack could not start: %s\n",
                 TerminalSafe(stack.status().message()).c_str());
    return kDemoUsage;
  }
  if (o.keep) std::fprintf(stderr, "gputravel demo: keeping %s\n", (*stack)->dir().c_str());
  if (!flags.Get("serve").empty()) return Serve(**stack, flags.Get("serve"), torch);
  Subprocess trainer;
  if (torch) {
    absl::Status started = StartTorchTrainer(**stack, o.bin_dir, o.threads, &trainer);
    if (!started.ok()) {
      std::fprintf(stderr, "gputravel demo: the PyTorch trainer could not start: %s\n",
                   TerminalSafe(started.message()).c_str());
      (*stack)->Stop();
      return kDemoUsage;
    }
    if (!as_json) std::printf("Started the PyTorch trainer (its own process).\n");
  }
  // A trainer that dies before the campaign ends (PyTorch missing, say)
  // would leave its windows waiting for trainer.timeout_seconds: the
  // campaign is cancelled at once instead, and its log shown.
  std::atomic<bool> campaign_over{false};
  std::atomic<bool> trainer_died{false};
  std::thread trainer_watch;
  if (torch) {
    trainer_watch = std::thread([&] {
      while (!campaign_over.load()) {
        if (!trainer.Running()) {
          // It exits 0 only once its campaign's stream ended final.
          if (WIFEXITED(trainer.exit_status()) && WEXITSTATUS(trainer.exit_status()) == 0) return;
          trainer_died = true;
          auto stub = (*stack)->OperatorClient();
          v1::CampaignRef ref;
          ref.set_name((*stack)->CampaignSpec()["name"].get<std::string>());
          // A trainer can die before the campaign is created: the cancel is
          // tried again until the campaign exists (or has ended), at most
          // kCancelTries times.
          constexpr int kCancelTries = 300;
          for (int i = 0; stub != nullptr && i < kCancelTries && !campaign_over.load(); ++i) {
            v1::Campaign ignored;
            grpc::ClientContext ctx;
            ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
            if (stub->CancelCampaign(&ctx, ref, &ignored).error_code() != grpc::NOT_FOUND) break;
            ::poll(nullptr, 0, 100);
          }
          return;
        }
        ::poll(nullptr, 0, 200);
      }
    });
  }
  const Followed followed = CreateAndFollow(**stack, as_json);
  campaign_over = true;
  if (trainer_watch.joinable()) trainer_watch.join();
  // The campaign with its trips. The watch has followed it to its end; a
  // campaign cancelled between its create and its start (its trainer died)
  // is CANCELLED within moments.
  absl::StatusOr<v1::Campaign> report =
      absl::FailedPreconditionError("the campaign could not be created (see above)");
  if (!followed.name.empty() && (followed.started || trainer_died)) {
    report = (*stack)->WaitForFinal(followed.name, followed.started ? 1200 : 60,
                                    /*paused_ends_wait=*/true);
  } else if (!followed.name.empty()) {
    report = absl::FailedPreconditionError("campaign '" + followed.name +
                                           "' could not be started (see above)");
  }
  if (trainer_died) {
    const std::string log = ReadFile((*stack)->dir() + "/torch-trainer.log").value_or("");
    const int st = trainer.exit_status();
    std::fprintf(stderr,
                 "gputravel demo: the PyTorch trainer %s %d before the campaign ended; the "
                 "campaign was cancelled. The end of its output:\n",
                 WIFSIGNALED(st) ? "was killed by signal" : "exited with status",
                 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    const std::string tail = log.size() > 4000 ? log.substr(log.size() - 4000) : log;
    std::fprintf(stderr, "%s", TerminalSafeLines(tail, "  ").c_str());
  }
  // The trainer's stream ends with the campaign; it exits by itself.
  if (torch && trainer.Running()) trainer.Terminate(10000);
  (*stack)->Stop();
  if (!report.ok()) {
    // The stack ran but the campaign did not complete (not created, not
    // started, or not final in time): a failed demo, not bad usage.
    std::fprintf(stderr, "gputravel demo: the campaign did not complete: %s\n",
                 TerminalSafe(report.status().message()).c_str());
    return kDemoNotVerified;
  }
  bool ok = report->state() == v1::COMPLETED && report->trips_size() > 0;
  for (const auto& t : report->trips()) ok = ok && TripVerified(t);
  if (as_json) {
    nlohmann::json j;
    j["ok"] = ok;
    j["campaign"] = report->name();
    j["trainer"] = trainer_kind;
    j["state"] = v1::CampaignState_Name(report->state());
    j["trips"] = nlohmann::json::array();
    for (const auto& t : report->trips()) {
      nlohmann::json tj = {{"trip", t.id()},
                           {"holder", t.holder()},
                           {"bytes", t.bytes()},
                           {"chunks", t.chunks()},
                           {"seconds", t.provision_seconds()},
                           {"trip_seconds", (t.ended_unix_ms() - t.started_unix_ms()) / 1000.0},
                           {"window_offset", t.window_offset()},
                           {"digest_match", t.digest_match()},
                           {"scrub_verified", t.scrub_verified()},
                           {"rekeyed", t.rekeyed()},
                           {"outcome", t.outcome()},
                           {"error", t.error()}};
      if (t.has_loss()) tj["loss"] = t.loss();
      if (t.has_eval_loss()) tj["eval_loss"] = t.eval_loss();
      j["trips"].push_back(tj);
    }
    // The reported training losses fall over the campaign (last below first).
    std::vector<double> losses;
    for (const auto& t : report->trips()) {
      if (t.has_loss()) losses.push_back(t.loss());
    }
    j["loss_falling"] = losses.size() >= 2 && losses.back() < losses.front();
    if (!report->error().empty()) j["error"] = report->error();
    // Never throws: invalid UTF-8 from the daemons becomes U+FFFD.
    std::printf("%s\n",
                j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    PrintTable(*report, torch);
    std::printf("\n%s\n", ok ? "OK: every trip verified (digest, scrub, fresh re-key)."
                              : ("FAILED: " + (report->error().empty()
                                                   ? std::string("a trip did not verify")
                                                   : TerminalSafe(report->error())))
                                    .c_str());
  }
  return ok ? kDemoOk : kDemoNotVerified;
}

}  // namespace gputravel
