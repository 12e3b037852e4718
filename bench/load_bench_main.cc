// load_bench: many holders, many rounds, many watchers on the real
// multi-process stack; the orchestrator's resident memory and open files
// over the campaign. See docs/performance.md.
//
//   bazel run -c opt //bench:load_bench -- [--holders 100] [--rounds 10]
//       [--watchers 50] [--window_kib 64] [--json]
#include <cstdio>
#include <string>

#include "bench/load_bench.h"
#include "util/flags.h"

int main(int argc, char** argv) {
  using namespace gputravel;
  Flags flags("load_bench",
              "Starts the emulated stack with N holder agents, runs one campaign of R rounds\n"
              "(N x R trips of one small window each, no trainer) with W concurrent\n"
              "WatchCampaign streams, and samples the orchestrator's resident memory\n"
              "(VmRSS) and open files every second. Reports failed trips, whether every\n"
              "watcher saw every trip and the end, and, after warm-up (every holder met\n"
              "once and a tenth of the trips done) until the end, how RSS and open files\n"
              "move: the last sample's RSS over the first one's, and the slope per 100\n"
              "trips. Exit 0 if the campaign completed with no\n"
              "failed trip and every watcher complete, 1 otherwise, 2 on bad usage.");
  flags.Int("holders", 100, 1, 200, "Holder agents (one process each).");
  flags.Int("rounds", 10, 1, 1000, "Passes over every holder's one-window dataset.");
  flags.Int("watchers", 50, 1, 500, "Concurrent WatchCampaign streams, each on its own channel.");
  flags.Int("window_kib", 64, 4, 65536, "Each holder's dataset, one window, in KiB.");
  flags.String("bin_dir", "", "Directory of the daemons (default: Bazel runfiles).");
  flags.Bool("json", "Print one JSON object (with every sample) instead of text.");
  absl::Status s = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "load_bench: %s (see --help)\n", std::string(s.message()).c_str());
    return 2;
  }
  bench::LoadOptions o;
  o.holders = flags.GetInt("holders");
  o.rounds = static_cast<uint32_t>(flags.GetInt("rounds"));
  o.watchers = flags.GetInt("watchers");
  o.window_bytes = static_cast<uint64_t>(flags.GetInt("window_kib")) << 10;
  o.bin_dir = flags.Get("bin_dir");
  auto r = bench::RunLoad(o);
  if (!r.ok()) {
    std::fprintf(stderr, "load_bench: %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  if (flags.IsSet("json")) {
    std::printf("%s\n", bench::LoadJson(*r).dump().c_str());
  } else {
    std::printf("%s", bench::LoadText(*r).c_str());
  }
  const bool ok = r->state == "COMPLETED" && r->failed_trips == 0 &&
                  r->trips == static_cast<uint64_t>(r->holders) * r->rounds &&
                  r->watchers_complete == r->watchers;
  return ok ? 0 : 1;
}
