#include "cli/measure_command.h"

#include <cstdio>

#include "keyxfer/runtime_measurement.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/flags.h"
#include "util/hex.h"

namespace gputravel {

absl::StatusOr<std::string> MeasureReport(const std::string& daemon, const std::string& config,
                                          const std::string& binary) {
  if (daemon != "orchestrator" && daemon != "holder_agent") {
    return absl::InvalidArgumentError("--daemon must be orchestrator or holder_agent, not '" +
                                      daemon + "'");
  }
  auto j = ReadJsonFile(config);
  if (!j.ok()) return j.status();
  auto m = MeasureDaemon(daemon, binary, *j, config);
  if (!m.ok()) return m.status();
  auto doc = CanonicalConfig(daemon, *j, config);
  if (!doc.ok()) return doc.status();
  nlohmann::json events = nlohmann::json::object();
  for (int i = 0; i < kRtmr3EventCount; ++i) events[Rtmr3EventName(i)] = HexEncode(m->events[i]);
  nlohmann::json pins = {{"binary", events["binary"]}, {"config", events["config"]}};
  // Holders pin the orchestrator's own pins as well; the orchestrator leaves
  // a holder's out (they name the orchestrator, so pinning them is circular).
  if (daemon == "orchestrator") pins["peer_pins"] = events["peer_pins"];
  nlohmann::json out = {{"daemon", daemon},
                        {"rtmr3", HexEncode(m->rtmr3)},
                        {"events", events},
                        {"peer_rtmr3", pins},
                        {"trusted_files", (*doc)["trusted_files"]}};
  return out.dump(2) + "\n";
}

int MeasureCommand(int argc, char** argv) {
  Flags flags("gputravel measure",
              "Prints the RTMR3 a daemon extends before it serves, for a given binary and\n"
              "configuration: its three events (binary; configuration with the CA files\n"
              "it names; its pins of its peers), the resulting RTMR3, and the\n"
              "\"peer_rtmr3\" object its peers put in their \"attestation\" section.\n"
              "Run it on the reviewed binary and configuration the TD will use\n"
              "(docs/tdx-attestation.md). Exit status: 0, 1 if a file cannot be\n"
              "measured, 2 on bad usage.");
  flags.String("daemon", "", "orchestrator or holder_agent (required).");
  flags.String("config", "", "The daemon's configuration file (required).");
  flags.String("binary", "", "The daemon's executable (required).");
  absl::Status ps = flags.Parse(argc, argv, 2);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (ps.ok() && !flags.positional().empty()) {
    ps = absl::InvalidArgumentError("unexpected argument '" + flags.positional()[0] + "'");
  }
  for (const char* f : {"daemon", "config", "binary"}) {
    if (ps.ok() && flags.Get(f).empty()) {
      ps = absl::InvalidArgumentError(std::string("--") + f + " is required");
    }
  }
  if (ps.ok() && flags.Get("daemon") != "orchestrator" && flags.Get("daemon") != "holder_agent") {
    ps = absl::InvalidArgumentError("--daemon must be orchestrator or holder_agent");
  }
  if (!ps.ok()) {
    std::fprintf(stderr, "gputravel measure: %s (see --help)\n", std::string(ps.message()).c_str());
    return 2;
  }
  auto report = MeasureReport(flags.Get("daemon"), flags.Get("config"), flags.Get("binary"));
  if (!report.ok()) {
    std::fprintf(stderr, "gputravel measure: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  std::printf("%s", report->c_str());
  return 0;
}

}  // namespace gputravel
