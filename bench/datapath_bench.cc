// datapath_bench: how fast the holder's encrypt-and-stage path and the
// end-to-end provisioning are against OpenSSL's own AES-256-GCM speed, and
// what a trip costs in the control plane. See docs/performance.md.
//
//   bazel run -c opt //bench:datapath_bench -- [--json] [--quick]
//       [--skip_trips | --trips_only | --copy_engines_only]
//       [--trips N] [--transport tcp|unix] [--bounce_dir DIR] [--bin_dir DIR]
//       [--writer_threads N]
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "bench/datapath_runner.h"
#include "bench/report.h"
#include "util/daemon_main.h"
#include "util/flags.h"
#include "util/log.h"

int main(int argc, char** argv) {
  using namespace gputravel;
  Flags flags("datapath_bench",
              "Measures, in one run: (ref) OpenSSL AES-256-GCM single-thread speed; (a) the\n"
              "holder's encrypt-and-stage into shared-memory bounce buffers (1 and 2 threads,\n"
              "64 KiB .. 2 MiB chunks), alone and through the in-process emulated device;\n"
              "(b) end-to-end provisioning of a 256 MiB window; (c) the control-plane cost of\n"
              "a 4 KiB trip over the real multi-process stack. Run it with -c opt.");
  flags.Bool("json", "Print one JSON object instead of tables.");
  flags.Bool("quick", "Smaller windows and fewer iterations (a smoke run, not figures).");
  flags.String("bin_dir", "",
               "Directory of the daemons for (c); default: this program's Bazel runfiles.");
  flags.String("bounce_dir", "/dev/shm",
               "Where the bounce rings of (a), (a') and (b) are created (a tmpfs); (c)'s "
               "stack keeps each holder's rings in its own directory.");
  flags.Bool("skip_trips", "Do not start the multi-process stack (c).");
  flags.String("trips", "",
               "Trips in (c), at least 100 for figures (default: 100, or 20 with --quick).");
  flags.String("transport", "tcp",
               "The network links of (c) (orchestrator API, MUX, holder agent): tcp (127.0.0.1, "
               "as between TDs) or unix (Unix sockets). The device's sockets, which stand for "
               "PCIe, are Unix sockets either way.");
  flags.Bool("copy_engines_only",
             "Only the reference and (b'), end-to-end provisioning through 1, 2, 4 and 8 copy "
             "engines; no trips (c).");
  flags.String("writer_threads", "",
               "The holder's encryption threads in (b) and (b'), 1 to 64 (default 2, a two-core "
               "TD's); on a larger machine, half its CPUs matches the limit's assumption that "
               "encryption and the device's decryption share the cores.");
  flags.Bool("trips_only",
             "Only the reference and (c): leave out the data-path sections (a), (a') and (b).");
  absl::Status s = flags.Parse(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "datapath_bench: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  auto usage_error = [](const std::string& msg) {
    std::fprintf(stderr, "datapath_bench: %s (see --help)\n", msg.c_str());
    return 2;
  };
  if (!flags.positional().empty()) {
    return usage_error("unexpected argument '" + flags.positional()[0] + "'");
  }
  if (flags.IsSet("skip_trips") && flags.IsSet("trips_only")) {
    return usage_error("--skip_trips and --trips_only leave nothing but the reference to run");
  }
  if (flags.IsSet("skip_trips") &&
      (flags.IsSet("trips") || flags.IsSet("bin_dir") || flags.IsSet("transport"))) {
    return usage_error(
        "--trips, --bin_dir and --transport are for the trips (c), which --skip_trips leaves out");
  }
  if (flags.Get("transport") != "tcp" && flags.Get("transport") != "unix") {
    return usage_error("--transport is tcp or unix, not '" + flags.Get("transport") + "'");
  }
  SetLogLevel(0);  // the in-process device's INFO lines would drown the output
  TurnOffLockOrderChecks();  // as the daemons whose code it runs in process
  bench::BenchConfig config =
      flags.IsSet("quick") ? bench::BenchConfig::Quick() : bench::BenchConfig::Full();
  config.bounce_dir = flags.Get("bounce_dir");
  config.trips.bin_dir = flags.Get("bin_dir");
  config.trips.tcp_loopback = flags.Get("transport") == "tcp";
  config.run_trips = !flags.IsSet("skip_trips") && !flags.IsSet("copy_engines_only");
  config.run_stages = !flags.IsSet("copy_engines_only");
  config.run_datapath = !flags.IsSet("trips_only");
  if (!flags.Get("trips").empty()) {
    int trips = 0;
    if (!absl::SimpleAtoi(flags.Get("trips"), &trips) || trips < 1 || trips > 100000) {
      return usage_error("--trips must be a whole number from 1 to 100000");
    }
    config.trips.rounds = static_cast<uint32_t>(trips);
  }

  if (!flags.Get("writer_threads").empty()) {
    int threads = 0;
    if (!absl::SimpleAtoi(flags.Get("writer_threads"), &threads) || threads < 1 || threads > 64) {
      return usage_error("--writer_threads must be a whole number from 1 to 64");
    }
    config.provision_threads = threads;
  }

  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  auto report = bench::RunDatapathBench(config, [](const std::string& line) {
    std::fprintf(stderr, "datapath_bench: %s\n", line.c_str());
  });
  if (!report.ok()) {
    std::fprintf(stderr, "datapath_bench: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  report->command_line = command_line;
  report->quick = flags.IsSet("quick");
  std::string out = flags.IsSet("json") ? bench::ReportJson(*report) : bench::ReportTable(*report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  // The figures are printed either way; a (c) that did not complete is a
  // failed run for scripts.
  if (report->ran_trips && !report->trips_error.empty()) {
    std::fprintf(stderr, "datapath_bench: (c) not measured: %s\n", report->trips_error.c_str());
    return 1;
  }
  if (report->ran_trips && report->trips.failed_trips > 0) {
    std::fprintf(stderr, "datapath_bench: (c) %llu of %llu trips failed\n",
                 (unsigned long long)report->trips.failed_trips,
                 (unsigned long long)report->trips.trips);
    return 1;
  }
  return 0;
}
