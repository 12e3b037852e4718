#include "cli/demo.h"

#include <cstdio>
#include <string>

#include "cli/emulated_stack.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/flags.h"

namespace gputravel {
namespace {

bool TripVerified(const v1::Trip& t) {
  return t.outcome() == "ok" && t.digest_match() && t.scrub_verified() && t.rekeyed();
}

void PrintTable(const v1::Campaign& c) {
  std::printf("\nCampaign '%s' on the emulated H100-CC (%s): %s\n\n", c.name().c_str(),
              EmulatedStack::kGpuSerial, v1::CampaignState_Name(c.state()).c_str());
  std::printf("%-5s %-10s %10s %10s %7s %9s %9s %-8s %-9s %-8s %8s\n", "trip", "holder",
              "offset", "bytes", "chunks", "seconds", "MB/s", "digest", "scrubbed", "re-keyed",
              "loss");
  for (const auto& t : c.trips()) {
    double mbs = t.provision_seconds() > 0 ? t.bytes() / 1e6 / t.provision_seconds() : 0;
    char loss[32] = "-";
    if (t.has_loss()) std::snprintf(loss, sizeof(loss), "%.4f", t.loss());
    std::printf("%-5llu %-10s %10llu %10llu %7llu %9.3f %9.1f %-8s %-9s %-8s %8s\n",
                static_cast<unsigned long long>(t.id()), t.holder().c_str(),
                static_cast<unsigned long long>(t.window_offset()),
                static_cast<unsigned long long>(t.bytes()),
                static_cast<unsigned long long>(t.chunks()), t.provision_seconds(), mbs,
                t.digest_match() ? "match" : "MISMATCH", t.scrub_verified() ? "verified" : "NO",
                t.rekeyed() ? "yes" : "NO", loss);
    if (!t.error().empty()) std::printf("      error: %s\n", t.error().c_str());
  }
  std::printf("\nThe loss column is the built-in next-token trainer's mean loss on each\n"
              "window (nats; an untrained model scores ln(512) = 6.24).\n");
}

}  // namespace

int DemoCommand(int argc, char** argv) {
  Flags flags("gputravel demo",
              "Starts the emulated GPU, the MUX, N holder agents and the orchestrator\n"
              "as separate processes in a temporary directory, runs one campaign in\n"
              "which the GPU travels to every holder and back, prints a table per\n"
              "trip and stops every daemon. Exit status 0 only if every trip\n"
              "verified (digest match, scrub verified, fresh re-key) and the campaign\n"
              "completed; the table shows the trainer's loss per trip; 1 if a trip\n"
              "failed; 2 on bad usage or if the stack could not start.");
  flags.String("holders", "3", "Number of data holders (1..16); their datasets differ in size.");
  flags.Bool("json", "Print one JSON object instead of the table.");
  flags.String("buffer_mib", "8", "Device dataset buffer in MiB (bigger datasets take several trips).");
  flags.String("threads", "2", "Encryption threads per holder (1..32).");
  flags.String("rounds", "1", "Passes over every holder's dataset (1..100).");
  flags.String("v", "0", "Daemon log verbosity (logs stay in the temporary directory).");
  flags.Bool("keep", "Keep the temporary directory (configs, logs) and print its path.");
  flags.String("bin_dir", "", "Directory of the daemons (default: Bazel runfiles).");
  absl::Status ps = flags.Parse(argc, argv, 2);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!ps.ok()) {
    std::fprintf(stderr, "gputravel demo: %s\n", std::string(ps.message()).c_str());
    return 2;
  }
  StackOptions o;
  o.holders = flags.GetInt("holders");
  o.buffer_bytes = uint64_t(flags.GetInt("buffer_mib")) << 20;
  o.threads = flags.GetInt("threads");
  o.rounds = static_cast<uint32_t>(flags.GetInt("rounds"));
  o.log_level = flags.GetInt("v");
  o.keep = flags.IsSet("keep");
  o.bin_dir = flags.Get("bin_dir");
  if (o.holders < 1 || o.holders > 16) {
    std::fprintf(stderr, "gputravel demo: --holders must be 1..16\n");
    return 2;
  }
  if (o.rounds < 1 || o.rounds > 100) {
    std::fprintf(stderr, "gputravel demo: --rounds must be 1..100\n");
    return 2;
  }
  if (o.buffer_bytes == 0 || o.threads < 1 || o.threads > 32) {  // the holder's limit
    std::fprintf(stderr, "gputravel demo: --buffer_mib must be >= 1 and --threads 1..32\n");
    return 2;
  }
  bool as_json = flags.IsSet("json");
  if (!as_json) {
    std::printf("Starting the emulated stack: GPU, MUX, %d holder(s), orchestrator...\n",
                o.holders);
  }
  auto stack = EmulatedStack::Start(o);
  if (!stack.ok()) {
    std::fprintf(stderr, "gputravel demo: %s\n", std::string(stack.status().message()).c_str());
    return 2;
  }
  if (o.keep) std::fprintf(stderr, "gputravel demo: keeping %s\n", (*stack)->dir().c_str());
  auto report = (*stack)->RunCampaign();
  (*stack)->Stop();
  if (!report.ok()) {
    std::fprintf(stderr, "gputravel demo: %s\n", std::string(report.status().message()).c_str());
    return 2;
  }
  bool ok = report->state() == v1::COMPLETED && report->trips_size() > 0;
  for (const auto& t : report->trips()) ok = ok && TripVerified(t);
  if (as_json) {
    nlohmann::json j;
    j["ok"] = ok;
    j["campaign"] = report->name();
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
      j["trips"].push_back(tj);
    }
    if (!report->error().empty()) j["error"] = report->error();
    std::printf("%s\n", j.dump().c_str());
  } else {
    PrintTable(*report);
    std::printf("\n%s\n", ok ? "OK: every trip verified (digest, scrub, fresh re-key)."
                              : ("FAILED: " + (report->error().empty() ? std::string(
                                                   "a trip did not verify")
                                                                     : report->error()))
                                    .c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace gputravel
