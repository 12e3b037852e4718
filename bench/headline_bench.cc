// The seed's headline table measured here: a window streamed over a shaped
// network (gRPC + mTLS between two network namespaces) against travelling,
// per training run of the seed's training time and of the built-in trainer's,
// measured on the same windows (docs/performance.md).
//   sudo bazel run -c opt //bench:headline_bench -- [--json] [--json_out F]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/gcm_reference.h"
#include "bench/headline_table.h"
#include "bench/machine_info.h"
#include "bench/netns_link.h"
#include "bench/network_baseline.h"
#include "bench/training_time.h"
#include "bench/travel_cost.h"
#include "nlohmann/json.hpp"
#include "util/flags.h"
#include "util/log.h"

namespace gputravel {
namespace bench {
namespace {

using json = nlohmann::json;

// "4M", "20M", "1G", "0" (unshaped) -> bits per second.
absl::StatusOr<std::vector<uint64_t>> ParseRates(const std::string& list) {
  std::vector<uint64_t> out;
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == "0" || item == "unshaped") {
      out.push_back(0);
      continue;
    }
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    const std::string unit = end ? end : "";
    const double mult = unit == "M" ? 1e6 : unit == "G" ? 1e9 : unit == "K" ? 1e3 : 0;
    if (v <= 0 || mult == 0) {
      return absl::InvalidArgumentError("--caps: '" + item +
                                        "' is not a rate like 4M, 1G or 0 (unshaped)");
    }
    out.push_back(static_cast<uint64_t>(v * mult));
  }
  if (out.empty()) return absl::InvalidArgumentError("--caps is empty");
  return out;
}

// "16,32" (MiB, or with --sizes_bytes bytes) -> ascending bytes.
absl::StatusOr<std::vector<uint64_t>> ParseSizes(const std::string& list, uint64_t unit,
                                                 const std::string& flag) {
  std::vector<uint64_t> out;
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (v == 0 || end == nullptr || *end != '\0' || (!out.empty() && v * unit <= out.back())) {
      return absl::InvalidArgumentError(flag + ": '" + list +
                                        "' is not an ascending list of positive sizes");
    }
    out.push_back(v * unit);
  }
  return out;
}

TlsFiles HelperTls(const Flags& f) {
  TlsFiles t;
  t.ca = f.Get("tls_ca");
  t.cert = f.Get("tls_cert");
  t.key = f.Get("tls_key");
  return t;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "headline_bench: %s\n", std::string(s.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  Flags flags("headline_bench",
              "Transmission of a window over a shaped network (gRPC + mTLS between two "
              "network namespaces, then into the emulated GPU) against travelling, in the "
              "seed's table: per training run of the seed's training time, and of the "
              "built-in trainer's time on the same window, measured. Needs root.");
  flags.Bool("json", "Print one JSON object instead of the text table.");
  flags.String("json_out", "", "Also write the JSON object to this file.");
  flags.String("caps", "4M,20M,100M,500M,1G,10G,0", "Link rates (K/M/G bit/s; 0: unshaped).");
  flags.String("sizes", "16,32,64,128,256,512", "Window sizes, MiB, ascending.");
  flags.String("sizes_kib", "", "Window sizes in KiB instead (small runs, tests).");
  flags.String("table_size", "256", "The table's window, MiB (one of the sizes).");
  flags.Int("max_measure_seconds", 40, 1, 3600,
            "Measure a size at a cap when its physical time is at most this (the two "
            "smallest always); extrapolate larger ones.");
  flags.String("delay_ms", "0", "netem delay added to the round trip, ms.");
  flags.String("travel_sizes", "", "Window sizes of travelling, MiB (default: the sizes).");
  flags.Int("travel_rounds", 3, 1, 1000, "Trips per travelling size.");
  flags.Bool("skip_travel", "Only the network baseline (and no training measurement).");
  flags.String("training_sizes", "",
               "Windows the built-in trainer is timed on, MiB (KiB with --sizes_kib), "
               "ascending; the table's must be one (default: half the table's and the "
               "table's, to show the time is proportional to the window).");
  flags.String("training_seconds", "1230",
               "Training time per run in the first table (the seed's), s. The second "
               "table's is measured: the built-in trainer on each travelling window.");
  flags.String("bin_dir", "", "Where the daemons are (default: Bazel runfiles).");
  // The helpers (this binary inside a namespace; set by the driver).
  flags.String("role", "", "holder | orchestrator: run as a helper inside a namespace.");
  flags.String("listen", "", "holder: host:port.");
  flags.String("holder", "", "orchestrator: the holder's host:port.");
  flags.String("tls_ca", "", "helper: campaign CA.");
  flags.String("tls_cert", "", "helper: own certificate.");
  flags.String("tls_key", "", "helper: own key.");
  flags.String("max_bytes", "0", "holder: the largest window.");
  flags.String("ready", "", "holder: file made once serving.");
  flags.String("deadline", "600", "orchestrator: seconds per fetch.");
  absl::Status s = flags.Parse(argc, argv);
  if (!s.ok() || flags.help_requested()) {
    std::fprintf(s.ok() ? stdout : stderr, "%s%s", s.ok() ? "" : (std::string(s.message()) + "\n").c_str(),
                 flags.Help().c_str());
    return s.ok() ? 0 : 2;
  }
  SetLogLevel(0);

  if (flags.Get("role") == "holder") {
    return Fail(ServeHolderWindow(flags.Get("listen"), HelperTls(flags),
                                  std::strtoull(flags.Get("max_bytes").c_str(), nullptr, 10),
                                  flags.Get("ready")));
  }
  if (flags.Get("role") == "orchestrator") {
    auto sizes = ParseSizes(flags.Get("sizes"), 1, "--sizes");
    if (!sizes.ok()) return Fail(sizes.status());
    auto runs = FetchAndLoad(flags.Get("holder"), HelperTls(flags), "h1", *sizes,
                             std::strtod(flags.Get("deadline").c_str(), nullptr));
    if (!runs.ok()) return Fail(runs.status());
    json out = json::array();
    for (const auto& r : *runs) out.push_back(ToJson(r));
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  if (!flags.Get("role").empty()) {
    return Fail(absl::InvalidArgumentError("--role is holder or orchestrator"));
  }

  auto rates = ParseRates(flags.Get("caps"));
  if (!rates.ok()) return Fail(rates.status());
  const bool kib = !flags.Get("sizes_kib").empty();
  auto sizes = kib ? ParseSizes(flags.Get("sizes_kib"), 1024, "--sizes_kib")
                   : ParseSizes(flags.Get("sizes"), 1u << 20, "--sizes");
  if (!sizes.ok()) return Fail(sizes.status());
  const uint64_t table_bytes =
      std::strtoull(flags.Get("table_size").c_str(), nullptr, 10) * (kib ? 1024 : 1u << 20);
  std::vector<uint64_t> travel_sizes = *sizes;
  if (!flags.Get("travel_sizes").empty()) {
    auto t = ParseSizes(flags.Get("travel_sizes"), kib ? 1024 : 1u << 20, "--travel_sizes");
    if (!t.ok()) return Fail(t.status());
    travel_sizes = *t;
  }

  std::vector<uint64_t> training_sizes = {table_bytes / 2, table_bytes};
  if (!flags.Get("training_sizes").empty()) {
    auto t = ParseSizes(flags.Get("training_sizes"), kib ? 1024 : 1u << 20, "--training_sizes");
    if (!t.ok()) return Fail(t.status());
    training_sizes = *t;
  }
  if (std::find(training_sizes.begin(), training_sizes.end(), table_bytes) ==
      training_sizes.end()) {
    return Fail(absl::InvalidArgumentError("--training_sizes must include --table_size"));
  }

  NetnsLink::InstallSignalCleanup();
  char tmpl[] = "/tmp/gtbench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Fail(absl::UnavailableError("cannot make a temp dir"));
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } work{tmpl};
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Fail(absl::UnavailableError("cannot read /proc/self/exe"));
  self[n] = '\0';

  HeadlineInputs in;
  in.table_bytes = table_bytes;
  in.training_seconds = std::strtod(flags.Get("training_seconds").c_str(), nullptr);
  const MachineInfo m = CollectMachineInfo();
  in.cores = m.nproc;
  in.machine = {{"nproc", m.nproc},       {"cpu_model", m.cpu_model},
                {"kernel", m.kernel},     {"openssl", m.openssl},
                {"build", m.build},       {"load_average", m.load_average}};
  auto ref = MeasureGcmReference(2u << 20, 0.5);
  if (!ref.ok()) return Fail(ref.status());
  in.openssl_single_mbps = ref->mbps;

  SweepOptions so;
  so.rates_bits_per_second = *rates;
  so.sizes = *sizes;
  so.max_measure_seconds = flags.GetInt("max_measure_seconds");
  so.delay_ms = std::strtod(flags.Get("delay_ms").c_str(), nullptr);
  so.self_binary = self;
  so.work_dir = work.dir;
  auto caps = RunBaselineSweep(so);
  if (!caps.ok()) return Fail(caps.status());
  in.caps = std::move(*caps);

  if (!flags.IsSet("skip_travel")) {
    for (uint64_t size : travel_sizes) {
      auto t = MeasureTravel(size, static_cast<uint32_t>(flags.GetInt("travel_rounds")),
                             flags.Get("bin_dir"));
      if (!t.ok()) return Fail(t.status());
      std::fprintf(stderr, "travelling: %llu bytes done\n", static_cast<unsigned long long>(size));
      in.travel.push_back(*t);
    }
    // The built-in trainer on the windows travelling provisions (the second
    // table's training time), after the trips so it does not share the cores
    // with them.
    for (uint64_t size : training_sizes) {
      auto t = MeasureTraining(size);
      if (!t.ok()) return Fail(t.status());
      std::fprintf(stderr, "training: %llu bytes in %.3f s\n",
                   static_cast<unsigned long long>(size), t->seconds);
      in.training.push_back(*t);
    }
  }

  const json j = HeadlineJson(in);
  if (!flags.Get("json_out").empty()) {
    std::ofstream f(flags.Get("json_out"));
    f << j.dump(2) << "\n";
    if (!f) return Fail(absl::UnavailableError("cannot write " + flags.Get("json_out")));
  }
  if (flags.IsSet("json")) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", HeadlineText(in).c_str());
  }
  for (const auto& c : in.caps) {
    if (!c.above_floor) {
      return Fail(absl::InternalError(
          "at " + c.label + " a window crossed the link faster than bytes x 8 / rate: the "
          "traffic control did not shape the link"));
    }
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace gputravel

int main(int argc, char** argv) { return gputravel::bench::Main(argc, argv); }
