#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "nlohmann/json.hpp"

namespace gputravel {
namespace bench {
namespace {

using json = nlohmann::json;

std::string Format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

std::string SizeName(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

double Finite(double v) { return std::isfinite(v) ? v : 0.0; }

json SummaryJson(const Summary& s, double scale = 1.0) {
  return json{{"n", s.n},
              {"min", s.min * scale},
              {"p50", s.p50 * scale},
              {"p90", s.p90 * scale},
              {"p99", s.p99 * scale},
              {"max", s.max * scale},
              {"mean", s.mean * scale}};
}

constexpr char kVerdictBasis[] =
    "the lower of ratio_vs_threads_x_openssl and ratio_vs_threads_x_adjacent_openssl";

// `has_target`: the issue sets a target for (a) and (b), none for (a').
json FigureJson(const ThroughputFigure& f, bool with_breakdown, bool has_target) {
  json j = {{"chunk_bytes", f.chunk_size},
            {"threads", f.threads},
            {"window_bytes", f.window_bytes},
            {"passes", f.pass_mbps.size()},
            {"pass_mbps", f.pass_mbps},
            {"mbps_median", f.mbps},
            {"mbps_best", f.best_mbps},
            {"openssl_single_thread_mbps", f.reference_mbps},
            {"openssl_single_thread_into_shm_ring_mbps", f.ring_reference_mbps},
            {"openssl_single_thread_large_source_into_shm_ring_mbps",
             f.large_source_reference_mbps},
            {"ratio_vs_threads_x_openssl", Finite(f.ratio)},
            {"ratio_vs_openssl_single_thread", Finite(f.ratio_single)},
            {"pass_adjacent_openssl_mbps", f.pass_adjacent_reference_mbps},
            {"adjacent_openssl_mbps_median", f.adjacent_reference_mbps},
            {"ratio_vs_threads_x_adjacent_openssl", Finite(f.ratio_adjacent)}};
  if (has_target) {
    j["verdict_ratio"] = Finite(VerdictRatio(f));
    j["verdict_basis"] = kVerdictBasis;
    j["meets_target"] = VerdictRatio(f) >= kStageTargetRatio;
  } else {
    j["meets_target"] = nullptr;  // no target for this figure
  }
  j["ring_create_seconds_once"] = f.ring_create_seconds;
  if (!f.pass_concurrent_reference_mbps.empty()) {
    j["pass_concurrent_openssl_mbps"] = f.pass_concurrent_reference_mbps;
    j["concurrent_openssl_mbps_median"] = f.concurrent_reference_mbps;
    j["ratio_vs_concurrent_openssl"] = Finite(f.ratio_concurrent);
  }
  if (!f.pass_both_sides_mbps.empty()) {
    j["pass_openssl_both_sides_mbps"] = f.pass_both_sides_mbps;
    j["openssl_both_sides_mbps_median"] = f.both_sides_mbps;
    j["ratio_vs_openssl_both_sides"] = Finite(f.ratio_both_sides);
  }
  j["median_pass"] = {{"seconds", f.seconds},
                      {"process_cpu_seconds", f.cpu_seconds},
                      {"cpus_busy", f.seconds > 0 ? f.cpu_seconds / f.seconds : 0.0}};
  if (with_breakdown) {
    j["zero_copy_source"] = f.zero_copy;
    j["median_pass"]["source_view_or_copy_seconds_all_workers"] = f.read_seconds;
  }
  return j;
}

}  // namespace

double VerdictRatio(const ThroughputFigure& f) {
  return f.ratio_adjacent > 0 ? std::min(f.ratio, f.ratio_adjacent) : f.ratio;
}

std::optional<bool> TripTargetMet(const BenchReport& r) {
  if (!r.ran_trips || !r.trips_error.empty()) return std::nullopt;
  if (r.trips.trip_seconds.n < kTripsForFigures) return std::nullopt;
  return r.trips.trip_seconds.p50 <= kTripP50TargetSeconds;
}

double ReferenceMbps(const BenchReport& report, size_t message_bytes, bool into_ring,
                     bool large_source) {
  for (const auto& r : report.reference) {
    if (r.message_bytes == message_bytes && r.into_ring == into_ring &&
        r.large_source == large_source && r.pairs == 0) {
      return r.mbps;
    }
  }
  return 0;
}

void PairWithPasses(const std::vector<double>& refs, const std::vector<double>& passes,
                    double scale, double* ref, double* ratio) {
  if (refs.empty() || refs.size() != passes.size()) return;
  std::vector<double> sorted = refs, ratios;
  for (size_t i = 0; i < refs.size(); ++i) {
    if (refs[i] > 0) ratios.push_back(passes[i] / (scale * refs[i]));
  }
  std::sort(sorted.begin(), sorted.end());
  *ref = sorted[(sorted.size() - 1) / 2];
  if (!ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    *ratio = ratios[(ratios.size() - 1) / 2];
  }
}

void FinishFigure(const BenchReport& report, ThroughputFigure* f) {
  std::vector<double> v = f->pass_mbps;
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  f->mbps = v[(v.size() - 1) / 2];
  f->best_mbps = v.back();
  f->reference_mbps = ReferenceMbps(report, f->chunk_size);
  f->ring_reference_mbps = ReferenceMbps(report, f->chunk_size, true);
  f->large_source_reference_mbps = ReferenceMbps(report, f->chunk_size, true, true);
  if (f->reference_mbps > 0) {
    f->ratio_single = f->mbps / f->reference_mbps;
    f->ratio = f->mbps / (std::max(1, f->threads) * f->reference_mbps);
  }
  PairWithPasses(f->pass_adjacent_reference_mbps, f->pass_mbps, std::max(1, f->threads),
                 &f->adjacent_reference_mbps, &f->ratio_adjacent);
  PairWithPasses(f->pass_both_sides_mbps, f->pass_mbps, 1, &f->both_sides_mbps,
                 &f->ratio_both_sides);
  PairWithPasses(f->pass_concurrent_reference_mbps, f->pass_mbps, 1,
                 &f->concurrent_reference_mbps, &f->ratio_concurrent);
}

std::string ReportJson(const BenchReport& r) {
  json j;
  j["benchmark"] = "datapath_bench";
  j["command_line"] = r.command_line;
  j["quick"] = r.quick;
  j["total_seconds"] = r.total_seconds;
  j["machine"] = {{"nproc", r.machine.nproc},
                  {"cpu_model", r.machine.cpu_model},
                  {"cpu_crypto_flags", r.machine.cpu_crypto_flags},
                  {"kernel", r.machine.kernel},
                  {"openssl", r.machine.openssl},
                  {"build", r.machine.build},
                  {"load_average_start", r.machine.load_average},
                  {"load_average_end", r.load_average_end}};
  j["targets"] = {{"stage_ratio_min", kStageTargetRatio},
                  {"provision_ratio_min", kStageTargetRatio},
                  {"trip_p50_max_seconds", kTripP50TargetSeconds},
                  {"trips_for_figures_min", kTripsForFigures}};
  j["sections_run"] = {{"reference", true},
                       {"encrypt_and_stage", r.ran_datapath},
                       {"encrypt_and_stage_from_dataset_file", r.ran_datapath},
                       {"encrypt_and_stage_with_device", r.ran_datapath},
                       {"provision_end_to_end", r.ran_datapath},
                       {"trip_steps_in_process", true},
                       {"trip_control_plane", r.ran_trips && r.trips_error.empty()}};
  json ref = json::array();
  for (const auto& x : r.reference) {
    ref.push_back({{"message_bytes", x.message_bytes},
                   {"mode", !x.into_ring      ? "in_place"
                            : x.large_source ? "out_of_place_large_source_to_shm_ring"
                                             : "out_of_place_staging_to_shm_ring"},
                   {"messages", x.messages},
                   {"seconds", x.seconds},
                   {"mbps", x.mbps}});
  }
  j["openssl_reference"] = ref;
  json stage = json::array();
  for (const auto& f : r.stage) stage.push_back(FigureJson(f, true, true));
  j["encrypt_and_stage"] = {{"bounce_dir", r.bounce_dir}, {"figures", stage}};
  json from_file = json::array();
  for (const auto& f : r.stage_from_file) from_file.push_back(FigureJson(f, true, false));
  j["encrypt_and_stage_from_dataset_file"] = {
      {"what", "(a) with the holder agent's DatasetSource over a file in bounce_dir; "
               "diagnostic, no target"},
      {"file_system", r.stage_from_file_fs},
      {"chunks_mapped", r.stage_from_file_mapped},
      {"not_run_because", r.stage_from_file_note},
      {"figures", from_file}};
  json dev = json::array();
  for (const auto& f : r.stage_device) dev.push_back(FigureJson(f, false, false));
  json ceil = json::array();
  for (const auto& c : r.device_ceiling) {
    ceil.push_back({{"chunk_bytes", c.chunk_size},
                    {"bytes", c.bytes},
                    {"seconds", c.seconds},
                    {"mbps", c.mbps},
                    {"per_chunk_us", c.per_chunk_us}});
  }
  j["encrypt_and_stage_with_device"] = {
      {"bounce_dir", r.bounce_dir}, {"figures", dev}, {"device_submit_h2d_ceiling", ceil}};
  j["provision_end_to_end"] = FigureJson(r.provision, false, true);
  json engines = json::array();
  for (const auto& e : r.provision_engines) {
    json f = FigureJson(e.figure, false, true);
    f["copy_engines"] = e.copy_engines;
    f["limit_mbps"] = e.limit_mbps;
    f["ratio_to_limit"] = e.ratio_limit;
    f["measured_limit_mbps"] = e.measured_limit_mbps;
    f["ratio_to_measured_limit"] = Finite(e.ratio_measured_limit);
    f["openssl_both_sides_ratio_to_limit"] = Finite(e.both_sides_ratio_limit);
    // The verdict here is on the machine's limit, not on threads x OpenSSL.
    f["meets_target"] = e.ratio_limit >= kEnginesTargetRatio;
    f["verdict_ratio"] = e.ratio_limit;
    f["verdict_basis"] = "ratio_to_limit";
    f["ratio_to_openssl_single_thread"] = e.figure.adjacent_reference_mbps > 0
                                              ? e.figure.mbps / e.figure.adjacent_reference_mbps
                                              : 0.0;
    engines.push_back(std::move(f));
  }
  j["provision_copy_engines"] = {
      {"limit", "nproc x OpenSSL single-thread AES-256-GCM (adjacent) / 2"},
      {"measured_limit", "OpenSSL AES-256-GCM on nproc threads at once (before each pass) / 2"},
      {"openssl_both_sides",
       "the window encrypted into /dev/shm rings and decrypted out of them by OpenSSL alone, "
       "nproc / 2 pairs of threads (before each pass): what any data path can get here"},
      {"target_ratio_to_limit", kEnginesTargetRatio},
      {"figures", std::move(engines)}};
  if (!r.ran_datapath) {
    j["provision_copy_engines"] = nullptr;
    j["encrypt_and_stage"] = nullptr;
    j["encrypt_and_stage_from_dataset_file"] = nullptr;
    j["encrypt_and_stage_with_device"] = nullptr;
    j["provision_end_to_end"] = nullptr;
  }
  json comps = json::array();
  for (const auto& c : r.components) {
    comps.push_back({{"name", c.name},
                     {"what", c.what},
                     {"per_trip", c.per_trip},
                     {"seconds", SummaryJson(c.seconds)}});
  }
  const TripBenchResult& t = r.trips;
  if (!r.ran_trips || !r.trips_error.empty()) {
    // Not measured: the steps in process only, no summaries of nothing.
    j["trip_control_plane"] = {{"error", r.ran_trips ? r.trips_error : "not run (--skip_trips)"},
                               {"p50_meets_target", nullptr},
                               {"components_in_process", comps}};
    return j.dump(2) + "\n";
  }
  const std::optional<bool> met = TripTargetMet(r);
  j["trip_control_plane"] = {
      {"error", r.trips_error},
      {"network_transport", t.transport},
      {"stack_start_seconds", t.stack_start_seconds},
      {"campaign_seconds", t.campaign_seconds},
      {"campaign_seconds_per_trip", t.trips > 0 ? t.campaign_seconds / t.trips : 0.0},
      {"trips", t.trips},
      {"failed_trips", t.failed_trips},
      {"trip_seconds", SummaryJson(t.trip_seconds)},
      {"holder_provision_seconds", SummaryJson(t.holder_seconds)},
      {"orchestrator_side_seconds", SummaryJson(t.orchestrator_seconds)},
      {"phases_from_logs",
       {{"trips", t.phase_trips},
        {"setup_mean_seconds", t.setup_mean},
        {"away_mean_seconds", t.away_mean},
        {"return_mean_seconds", t.return_mean}}},
      {"mux_route_seconds", SummaryJson(t.mux_route_seconds)},
      {"cpu_seconds_per_trip", t.cpu_seconds_per_trip},
      {"device_bounce_mappings_after_campaign",
       t.device_maps_readable ? json(t.device_bounce_mappings) : json(nullptr)},
      {"device_bounce_bytes_after_campaign",
       t.device_maps_readable ? json(t.device_bounce_bytes) : json(nullptr)},
      {"p50_meets_target", met.has_value() ? json(*met) : json(nullptr)},
      {"components_in_process", comps}};
  return j.dump(2) + "\n";
}

std::string ReportTable(const BenchReport& r) {
  std::string o;
  o += "GPU Travelling data-path benchmark" + std::string(r.quick ? " (--quick)" : "") + "\n";
  o += Format("machine: %d CPU(s), %s [%s], %s, %s, build %s\n", r.machine.nproc,
              r.machine.cpu_model.c_str(), r.machine.cpu_crypto_flags.c_str(),
              r.machine.kernel.c_str(), r.machine.openssl.c_str(), r.machine.build.c_str());
  o += "load average: start " + r.machine.load_average + ", end " + r.load_average_end + "\n";
  o += "command: " + r.command_line + "\n\n";

  o += "(ref) OpenSSL EVP AES-256-GCM, one thread (MB/s = 1e6 bytes/s)\n";
  o += Format("  %-10s %12s %28s %28s\n", "message", "in place",
              ("private -> " + r.bounce_dir + " ring").c_str(),
              (SizeName(r.large_source_bytes) + " source -> " + r.bounce_dir + " ring").c_str());
  for (const auto& x : r.reference) {
    if (x.into_ring) continue;
    double ring = ReferenceMbps(r, x.message_bytes, true);
    double large = ReferenceMbps(r, x.message_bytes, true, true);
    o += Format("  %-10s %12.0f %28s %28s\n", SizeName(x.message_bytes).c_str(), x.mbps,
                ring > 0 ? Format("%.0f", ring).c_str() : "-",
                large > 0 ? Format("%.0f", large).c_str() : "-");
  }
  o += "  (the last column reads each message from the next offset of a " +
       SizeName(r.large_source_bytes) +
       " buffer,\n   as the holder's workers stream theirs: OpenSSL alone with that memory "
       "traffic, without (a)'s\n   private-piece copy into the ring or its pipeline)\n";

  auto table = [&](const std::vector<ThroughputFigure>& figs, bool breakdown, bool has_target) {
    o += Format("  %-8s %-7s %9s %9s %9s %9s %12s %7s %8s %8s", "chunk", "threads", "MB/s",
                "best", "ref", "ring ref", "vs thr x ref", "target", "adj ref", "vs adj");
    o += Format(" %5s %7s", "CPUs", "ring ms");
    if (breakdown) o += Format(" %9s %7s", "conc ref", "vs conc");
    if (breakdown) o += Format("  %s", "source, % of wall (all workers)");
    o += "\n";
    for (const auto& f : figs) {
      o += Format("  %-8s %-7d %9.0f %9.0f %9.0f %9.0f %12.2f %7s %8.0f %8.2f",
                  SizeName(f.chunk_size).c_str(), f.threads, f.mbps, f.best_mbps,
                  f.reference_mbps, f.ring_reference_mbps, f.ratio,
                  !has_target ? "-" : VerdictRatio(f) >= kStageTargetRatio ? "met" : "MISSED",
                  f.adjacent_reference_mbps, f.ratio_adjacent);
      o += Format(" %5.2f %7.2f", f.seconds > 0 ? f.cpu_seconds / f.seconds : 0.0,
                  1e3 * f.ring_create_seconds);
      if (breakdown) {
        if (f.concurrent_reference_mbps > 0) {
          o += Format(" %9.0f %7.2f", f.concurrent_reference_mbps, f.ratio_concurrent);
        } else {
          o += Format(" %9s %7s", "-", "-");
        }
      }
      if (breakdown && f.seconds > 0) {
        o += Format("  %3.0f%%", 100 * f.read_seconds / f.seconds);
      }
      o += "\n";
    }
  };
  if (r.ran_datapath) {
    o += "\n(adj ref: OpenSSL single thread measured right before each pass; vs adj: median over\n"
         " passes of MB/s / (threads x that pass's adj ref). CPUs: process CPU time / wall.\n"
         " ring ms: creating the bounce ring, once per holder agent, which keeps it between\n"
         " trips; the passes reuse it, the device maps it on every pass. conc ref: OpenSSL's\n"
         " loop on that many threads at once right before each pass, what the machine gives\n"
         " now; vs conc: MB/s / conc ref, median over passes. Diagnostic, not the target.\n"
         " target: met only when both vs thr x ref and vs adj reach it; (a') has none.)\n";
    o += "\n(a) encrypt-and-stage into the bounce ring in " + r.bounce_dir +
         ", the device a stand-in that frees each slot on its doorbell (target >= " + Format("%.1f", kStageTargetRatio) +
         " x threads x ref)" +
         (!r.stage.empty() && r.stage.front().zero_copy
              ? "; workers encrypt straight from source views (zero copy)"
              : "; workers copy into private staging") +
         "\n";
    table(r.stage, true, true);
    if (!r.stage_from_file.empty()) {
      o += "  the same from a dataset file in " + r.bounce_dir + " (" + r.stage_from_file_fs +
           ") through the holder agent's DatasetSource (" +
           (r.stage_from_file_mapped ? "chunks mapped from the file (by 8 MiB regions up to "
                                       "256 KiB), unmapped once released"
                                     : "each chunk read into private staging") +
           "; diagnostic):\n";
      table(r.stage_from_file, true, false);
    } else if (!r.stage_from_file_note.empty()) {
      o += "  (a) from a dataset file: not run: " + r.stage_from_file_note + "\n";
    }
    o += "\n(a') the same through H2dWriter into the in-process emulated device "
         "(streamed gRPC doorbells, device decrypts)\n";
    table(r.stage_device, false, false);
    o += "  device side alone (EmulatedGpu::SubmitH2D called directly, one thread):";
    for (const auto& c : r.device_ceiling) {
      o += Format("  %s %.0f MB/s (%.0f us/chunk)", SizeName(c.chunk_size).c_str(), c.mbps,
                  c.per_chunk_us);
    }
    o += "\n";

    const ThroughputFigure& p = r.provision;
    o += "\n(b) end-to-end provisioning, H2dWriter -> gRPC -> DeviceServiceImpl -> EmulatedGpu\n";
    o += Format("  window %s, chunk %s, %d threads: %.0f MB/s median (best %.0f) over %zu "
                "passes, %.2f CPUs busy;\n  %.2f x OpenSSL single thread (%.0f MB/s), "
                "%.2f x threads x OpenSSL; adjacent OpenSSL %.0f MB/s: %.2f x single thread, "
                "%.2f x threads x it\n",
                SizeName(p.window_bytes).c_str(), SizeName(p.chunk_size).c_str(), p.threads,
                p.mbps, p.best_mbps, p.pass_mbps.size(),
                p.seconds > 0 ? p.cpu_seconds / p.seconds : 0.0, p.ratio_single,
                p.reference_mbps, p.ratio, p.adjacent_reference_mbps,
                p.ratio_adjacent * std::max(1, p.threads), p.ratio_adjacent);
    o += Format("  target >= %.1f x threads x OpenSSL (on the lower of the two ratios, %.2f): %s\n",
                kStageTargetRatio, VerdictRatio(p),
                VerdictRatio(p) >= kStageTargetRatio ? "met" : "MISSED");
    o += Format("\n(b') end-to-end provisioning through k copy engines (k keys, k lanes, k doorbell "
                "streams, %d writer thread%s)\n",
                r.provision_engines.empty() ? 0 : r.provision_engines[0].figure.threads,
                r.provision_engines.empty() || r.provision_engines[0].figure.threads == 1 ? ""
                                                                                          : "s");
    for (const auto& e : r.provision_engines) {
      const ThroughputFigure& f = e.figure;
      o += Format("  k=%u: %.0f MB/s median over %zu passes, %.2f CPUs busy; %.2f x OpenSSL "
                  "single thread (%.0f MB/s), %.2f x the machine's limit (%d cores x it / 2 = "
                  "%.0f MB/s)",
                  e.copy_engines, f.mbps, f.pass_mbps.size(),
                  f.seconds > 0 ? f.cpu_seconds / f.seconds : 0.0,
                  f.adjacent_reference_mbps > 0 ? f.mbps / f.adjacent_reference_mbps : 0.0,
                  f.adjacent_reference_mbps, e.ratio_limit, r.machine.nproc, e.limit_mbps);
      if (e.measured_limit_mbps > 0) {
        o += Format(", %.2f x it measured (%d threads of OpenSSL at once / 2 = %.0f MB/s)",
                    e.ratio_measured_limit, r.machine.nproc, e.measured_limit_mbps);
      }
      if (f.both_sides_mbps > 0) {
        o += Format(";\n       %.2f x OpenSSL alone doing both sides (%.0f MB/s, itself %.2f x the "
                    "limit)",
                    f.ratio_both_sides, f.both_sides_mbps, e.both_sides_ratio_limit);
      }
      o += "\n";
    }
  } else {
    o += "\n(a), (a') and (b): not run (--trips_only)\n";
  }

  o += "\n(c) control plane: trips of a 4 KiB window over the multi-process stack";
  if (r.ran_trips) {
    o += r.trips.transport == "unix"
             ? " (network links over Unix sockets)"
             : " (network links over TCP on 127.0.0.1; the device's sockets are Unix sockets)";
  }
  o += "\n";
  if (r.ran_trips && !r.trips_error.empty()) {
    o += "  NOT MEASURED: " + r.trips_error + "\n";
  } else if (!r.ran_trips) {
    o += "  not run (--skip_trips)\n";
  } else {
    const TripBenchResult& t = r.trips;
    o += Format("  %llu trips (%llu failed), stack start %.2f s, campaign %.2f s (%.2f ms per "
                "trip, counting what each trip's clock leaves out: the final commit, the "
                "next trip's channel, scheduling)\n",
                (unsigned long long)t.trips, (unsigned long long)t.failed_trips,
                t.stack_start_seconds, t.campaign_seconds,
                t.trips > 0 ? 1e3 * t.campaign_seconds / t.trips : 0.0);
    o += Format("  %-28s %9s %9s %9s %9s %9s\n", "ms", "p50", "p90", "p99", "mean", "max");
    auto row = [&](const char* name, const Summary& s) {
      o += Format("  %-28s %9.2f %9.2f %9.2f %9.2f %9.2f\n", name, s.p50 * 1e3, s.p90 * 1e3,
                  s.p99 * 1e3, s.mean * 1e3, s.max * 1e3);
    };
    row("trip (trip_seconds)", t.trip_seconds);
    row("  holder Provision (seconds)", t.holder_seconds);
    row("  orchestrator side (rest)", t.orchestrator_seconds);
    row("MUX Route RPC (after)", t.mux_route_seconds);
    const std::optional<bool> met = TripTargetMet(r);
    o += Format("  target p50 <= %.0f ms: %s\n", kTripP50TargetSeconds * 1e3,
                met.has_value() ? (*met ? "met" : "MISSED")
                                : Format("no verdict (%llu trips measured; figures need %llu)",
                                         (unsigned long long)t.trip_seconds.n,
                                         (unsigned long long)kTripsForFigures)
                                      .c_str());
    o += Format("  phases from daemon logs (mean of %llu trips): setup %.2f ms, away %.2f ms, "
                "return %.2f ms\n",
                (unsigned long long)t.phase_trips, t.setup_mean * 1e3, t.away_mean * 1e3,
                t.return_mean * 1e3);
    if (!t.cpu_seconds_per_trip.empty()) {
      double total = 0;
      std::string parts;
      for (const auto& c : t.cpu_seconds_per_trip) {
        total += c.second;
        parts += Format(" %s %.2f,", c.first.c_str(), c.second * 1e3);
      }
      if (!parts.empty()) parts.pop_back();
      o += Format("  CPU per trip (user + system, ms):%s; total %.2f ms\n", parts.c_str(),
                  total * 1e3);
    }
    if (t.device_maps_readable) {
      o += Format("  bounce rings still mapped by the device after the campaign: %llu (%llu bytes)\n",
                  (unsigned long long)t.device_bounce_mappings,
                  (unsigned long long)t.device_bounce_bytes);
    } else {
      o += "  bounce rings still mapped by the device after the campaign: unknown (its "
           "/proc/PID/maps needs CAP_SYS_PTRACE: the device is not dumpable)\n";
    }
  }
  o += "\n  trip steps timed in process (p50 ms; per trip = times one trip takes the step)\n";
  double modelled = 0;
  for (const auto& c : r.components) {
    o += Format("  %-28s %8.3f ms  x%d  %s\n", c.name.c_str(), c.seconds.p50 * 1e3, c.per_trip,
                c.what.c_str());
    modelled += c.per_trip * c.seconds.p50;
  }
  if (!r.ran_trips || !r.trips_error.empty() || r.trips.mux_route_seconds.n == 0) {
    o += Format("  sum over one trip's steps: %.2f ms (MUX routes not included)\n", modelled * 1e3);
  } else {
    o += Format("  sum over one trip's steps + 2 MUX routes: %.2f ms (attested_channel and "
                "FinishTrip's commit in state_store_trip are off the trip's clock)\n",
                (modelled + 2 * r.trips.mux_route_seconds.p50) * 1e3);
  }
  o += Format("\ntotal benchmark time %.1f s\n", r.total_seconds);
  return o;
}

}  // namespace bench
}  // namespace gputravel
