#include "bench/headline_table.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "orchestrator/campaign_spec.h"

namespace gputravel {
namespace bench {
namespace {

using json = nlohmann::json;

const SeedPoint* SeedFor(uint64_t rate) {
  for (const auto& p : SeedNetworkPoints()) {
    if (p.rate_bits_per_second == rate) return &p;
  }
  return nullptr;
}

const TravelCost* TravelAt(const HeadlineInputs& in, uint64_t bytes) {
  for (const auto& t : in.travel) {
    if (t.bytes == bytes) return &t;
  }
  return nullptr;
}

// Seconds at table_bytes for one cap (-1: neither measured nor extrapolated).
double CapSeconds(const CapResult& c, uint64_t bytes, bool* extrapolated) {
  for (size_t i = 0; i < c.sizes.size(); ++i) {
    if (c.sizes[i] == bytes) {
      *extrapolated = c.extrapolated[i];
      return c.total_seconds[i];
    }
  }
  *extrapolated = false;
  return -1;
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

const TrainingTime* TrainingAt(const HeadlineInputs& in, uint64_t bytes) {
  for (const auto& t : in.training) {
    if (t.bytes == bytes) return &t;
  }
  return nullptr;
}

// The table's rows for one training time; the seed's columns with `seed`.
json Rows(const HeadlineInputs& in, double training_seconds, bool seed) {
  json rows = json::array();
  for (const auto& c : in.caps) {
    bool extrapolated = false;
    const double s = CapSeconds(c, in.table_bytes, &extrapolated);
    json row = {{"design", "network"},
                {"cap", c.label},
                {"rate_bits_per_second", c.rate_bits_per_second},
                {"training_seconds", training_seconds},
                {"transmission_seconds", s >= 0 ? json(s) : json(nullptr)},
                {"transmission_share",
                 s >= 0 ? json(TransmissionShare(s, training_seconds)) : json(nullptr)},
                {"extrapolated", extrapolated}};
    if (seed) {
      const SeedPoint* p = SeedFor(c.rate_bits_per_second);
      row["seed_seconds"] = p ? json(p->seconds) : json(nullptr);
      row["seed_share"] =
          p ? json(TransmissionShare(p->seconds, kSeedTrainingSeconds)) : json(nullptr);
    }
    rows.push_back(row);
  }
  if (const TravelCost* t = TravelAt(in, in.table_bytes)) {
    json row = {{"design", "travelling"},
                {"cap", "any"},
                {"training_seconds", training_seconds},
                {"transmission_seconds", t->trip_seconds},
                {"transmission_share", TransmissionShare(t->trip_seconds, training_seconds)},
                {"extrapolated", false}};
    if (seed) {
      row["seed_seconds"] = {kSeedTravelMinSeconds, kSeedTravelMaxSeconds};
      row["seed_share"] = {TransmissionShare(kSeedTravelMinSeconds, kSeedTrainingSeconds),
                           TransmissionShare(kSeedTravelMaxSeconds, kSeedTrainingSeconds)};
    }
    rows.push_back(row);
  }
  return rows;
}

// The table as Markdown; the seed's columns with `seed`. Returns whether a
// row was extrapolated.
bool TableText(const HeadlineInputs& in, double training_seconds, bool seed,
               std::ostringstream& o) {
  o << "| design | link | training s | transmission s | share |"
    << (seed ? " seed s | seed share |" : "") << "\n"
    << "|---|---|---:|---:|---:|" << (seed ? "---:|---:|" : "") << "\n";
  const std::string training = Fmt(training_seconds < 100 ? "%.2f" : "%.0f", training_seconds);
  bool any_extrapolated = false;
  for (const auto& c : in.caps) {
    bool ex = false;
    const double s = CapSeconds(c, in.table_bytes, &ex);
    any_extrapolated |= ex;
    o << "| network (gRPC+mTLS) | " << c.label << " | " << training << " | "
      << (s >= 0 ? Fmt("%.2f", s) + (ex ? " (extrapolated)" : "") : "not linear: none") << " | "
      << (s >= 0 ? Fmt("%.2f%%", 100 * TransmissionShare(s, training_seconds)) : "-") << " |";
    if (seed) {
      const SeedPoint* p = SeedFor(c.rate_bits_per_second);
      o << " " << (p ? Fmt("%.2f", p->seconds) : "-") << " | "
        << (p ? Fmt("%.2f%%", 100 * TransmissionShare(p->seconds, kSeedTrainingSeconds)) : "-")
        << " |";
    }
    o << "\n";
  }
  if (const TravelCost* t = TravelAt(in, in.table_bytes)) {
    o << "| travelling | any | " << training << " | " << Fmt("%.3f", t->trip_seconds) << " | "
      << Fmt("%.3f%%", 100 * TransmissionShare(t->trip_seconds, training_seconds)) << " |";
    if (seed) {
      o << " " << Fmt("%.2f", kSeedTravelMinSeconds) << "-" << Fmt("%.2f", kSeedTravelMaxSeconds)
        << " | " << Fmt("%.2f%%", 100 * TransmissionShare(1.0, kSeedTrainingSeconds)) << " |";
    }
    o << "\n";
  }
  return any_extrapolated;
}

json Provisioning(const HeadlineInputs& in) {
  const TravelCost* t = TravelAt(in, in.table_bytes);
  if (t == nullptr && !in.travel.empty()) t = &in.travel.back();
  if (t == nullptr) return nullptr;
  const double limit = in.cores * in.openssl_single_mbps / 2;
  return {{"window_bytes", t->bytes},
          {"mbps", t->provision_mbps},
          {"openssl_single_thread_mbps", in.openssl_single_mbps},
          {"cores", in.cores},
          {"machine_limit_mbps", limit},
          {"ratio_to_machine_limit", limit > 0 ? t->provision_mbps / limit : 0},
          {"ratio_to_openssl_single_thread",
           in.openssl_single_mbps > 0 ? t->provision_mbps / in.openssl_single_mbps : 0},
          {"note",
           "limit = cores x single-thread OpenSSL / 2: the holder's encryption and the "
           "emulated GPU's decryption share the cores; a target above it (e.g. 1.8 x "
           "single-thread) can only be met on a machine with more cores"}};
}

}  // namespace

const std::vector<SeedPoint>& SeedNetworkPoints() {
  static const std::vector<SeedPoint> points = {
      {4000000ull, 1115.88}, {20000000ull, 230.84}, {100000000ull, 60.36},
      {500000000ull, 15.86}, {0, 7.34}};
  return points;
}

double TransmissionShare(double seconds, double training_seconds) {
  return seconds / (training_seconds + seconds);
}

json HeadlineJson(const HeadlineInputs& in) {
  json caps = json::array();
  for (const auto& c : in.caps) caps.push_back(ToJson(c));
  json travel = json::array();
  for (const auto& t : in.travel) travel.push_back(ToJson(t));
  json seed = json::array();
  for (const auto& p : SeedNetworkPoints()) {
    seed.push_back({{"rate_bits_per_second", p.rate_bits_per_second}, {"seconds", p.seconds}});
  }
  json training = nullptr;
  json measured_rows = nullptr;
  if (!in.training.empty()) {
    const TrainerSpec spec;
    json sizes = json::array();
    for (const auto& t : in.training) sizes.push_back(ToJson(t));
    const double linearity = TrainingLinearity(in.training);
    const TrainingTime* at = TrainingAt(in, in.table_bytes);
    training = {{"trainer",
                 {{"kind", spec.kind},
                  {"vocab", spec.vocab},
                  {"dim", spec.dim},
                  {"learning_rate", spec.learning_rate},
                  {"batch_tokens", spec.batch_tokens}}},
                {"window_bytes", in.table_bytes},
                {"seconds", at ? json(at->seconds) : json(nullptr)},
                {"sizes", sizes},
                {"linearity", in.training.size() >= 2 ? json(linearity) : json(nullptr)},
                {"linear", in.training.size() >= 2 &&
                               std::abs(linearity - 1) <= kLinearTolerance}};
    if (at) measured_rows = Rows(in, at->seconds, /*seed=*/false);
  }
  return {{"table_bytes", in.table_bytes},
          {"training_seconds", in.training_seconds},
          {"table", Rows(in, in.training_seconds, /*seed=*/true)},
          {"training_measured", training},
          {"table_measured_training", measured_rows},
          {"baseline", caps},
          {"travelling", travel},
          {"provisioning", Provisioning(in)},
          {"seed", {{"training_seconds", kSeedTrainingSeconds},
                    {"network", seed},
                    {"travelling_seconds", {kSeedTravelMinSeconds, kSeedTravelMaxSeconds}}}},
          {"machine", in.machine}};
}

std::string HeadlineText(const HeadlineInputs& in) {
  std::ostringstream o;
  o << "Transmission per training run of " << Fmt("%.0f", in.training_seconds)
    << " s (the seed's), one " << Mib(in.table_bytes)
    << " window (\"window requested\" .. \"in device memory and verified\")\n\n";
  const bool any_extrapolated = TableText(in, in.training_seconds, /*seed=*/true, o);
  if (const TrainingTime* t = TrainingAt(in, in.table_bytes)) {
    const TrainerSpec spec;
    o << "\nThe same per training run of " << Fmt("%.2f", t->seconds)
      << " s, measured here: the built-in trainer (" << spec.kind << ", vocab " << spec.vocab
      << ", dim " << spec.dim << ", " << spec.batch_tokens
      << "-token batches, as the orchestrator trains each trip's window) on this "
      << Mib(in.table_bytes) << " window, " << t->tokens << " tokens in " << t->batches
      << " batches\n\n";
    TableText(in, t->seconds, /*seed=*/false, o);
  }
  if (any_extrapolated) {
    o << "\n(extrapolated): not measured at this size; from the line through the two "
         "largest measured sizes at that cap, whose cost was shown proportional to the "
         "size (linearity below).\n";
  }
  o << "\nNetwork baseline per cap (total s per size; * = extrapolated; network part of "
       "each measured run vs. its floor bytes x 8 / rate):\n";
  for (const auto& c : in.caps) {
    o << "  " << c.label << ":";
    for (size_t i = 0; i < c.sizes.size(); ++i) {
      o << " " << (c.sizes[i] >> 20) << "M="
        << (c.total_seconds[i] >= 0 ? Fmt("%.2f", c.total_seconds[i]) : "?")
        << (c.extrapolated[i] ? "*" : "");
    }
    o << "\n    linearity " << Fmt("%.3f", c.linearity) << (c.linear ? " (linear)" : " (NOT linear)")
      << "; floor " << (c.above_floor ? "respected" : "VIOLATED (shaping did not hold)");
    if (!c.measured.empty()) {
      const BaselineRun& m = c.measured.back();
      o << "; at " << Mib(m.bytes) << ": network " << Fmt("%.3f", m.network_seconds)
        << " s, GPU load " << Fmt("%.3f", m.load_seconds) << " s, verify "
        << Fmt("%.3f", m.verify_seconds) << " s";
    }
    o << "\n";
  }
  o << "\nTravelling per size (median trip; parts):\n";
  for (const auto& t : in.travel) {
    o << "  " << Mib(t.bytes) << ": trip " << Fmt("%.3f", t.trip_seconds) << " s = routing "
      << Fmt("%.4f", t.routing_seconds) << " + hand-off " << Fmt("%.4f", t.handoff_seconds)
      << " + provisioning " << Fmt("%.3f", t.provisioning_seconds) << " (" 
      << Fmt("%.0f", t.provision_mbps) << " MB/s) + re-key " << Fmt("%.4f", t.rekey_seconds)
      << " + scrub " << Fmt("%.3f", t.scrub_seconds) << " + read-back/digest/rest "
      << Fmt("%.3f", t.readback_and_rest_seconds) << " (" << t.trips << " trips)\n";
  }
  if (!in.training.empty()) {
    o << "\nTraining per size (built-in trainer, one fresh model per window):\n";
    for (const auto& t : in.training) {
      o << "  " << Mib(t.bytes) << ": " << Fmt("%.3f", t.seconds) << " s, "
        << Fmt("%.2f", t.tokens_per_second / 1e6) << " M tokens/s, mean loss "
        << Fmt("%.3f", t.mean_loss) << " nats\n";
    }
    if (in.training.size() >= 2) {
      const double l = TrainingLinearity(in.training);
      o << "  linearity " << Fmt("%.3f", l)
        << (std::abs(l - 1) <= kLinearTolerance ? " (linear)" : " (NOT linear)") << "\n";
    }
  }
  json p = Provisioning(in);
  if (!p.is_null()) {
    o << "\nProvisioning " << Fmt("%.0f", p["mbps"].get<double>()) << " MB/s = "
      << Fmt("%.2f", p["ratio_to_machine_limit"].get<double>())
      << " x this machine's limit (" << in.cores << " cores x "
      << Fmt("%.0f", in.openssl_single_mbps) << " MB/s OpenSSL single-thread / 2 = "
      << Fmt("%.0f", p["machine_limit_mbps"].get<double>()) << " MB/s), "
      << Fmt("%.2f", p["ratio_to_openssl_single_thread"].get<double>())
      << " x OpenSSL single-thread. Targets above the limit need more cores.\n";
  }
  o << "\nOn real hardware the PCIe re-binding (routing) dominates the seed's ~1 s; here "
       "routing is the emulated MUX.\n";
  return o.str();
}

}  // namespace bench
}  // namespace gputravel
