// piece_bench: what the size of AesGcm's private pieces costs when
// encrypting into, and decrypting out of, shared memory, next to OpenSSL's
// own in-place AES-256-GCM loop. See docs/performance.md.
//
//   bazel run -c opt //bench:piece_bench -- [--json] [--quick] [--rounds N] [--bounce_dir DIR]
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "bench/piece_sizes.h"
#include "keyxfer/aes_gcm.h"
#include "nlohmann/json.hpp"
#include "util/flags.h"

namespace {

using gputravel::bench::PieceTable;

std::string Table(const std::vector<PieceTable>& tables) {
  std::string o =
      "AesGcm::EncryptToShared (large buffer -> /dev/shm ring) and DecryptFromShared (ring ->\n"
      "large buffer) by private piece size; ratio: median over rounds of MB/s / OpenSSL's\n"
      "in-place single-thread loop measured at the start of the same round.\n";
  for (const PieceTable& t : tables) {
    o += absl::StrFormat("\n%zu KiB messages, OpenSSL in place %.0f MB/s (median)\n",
                         t.message_bytes >> 10, t.reference_median);
    o += absl::StrFormat("  %-8s %-10s %10s %8s %10s %8s\n", "piece", "", "encrypt", "ratio",
                         "decrypt", "ratio");
    for (const auto& f : t.figures) {
      std::string note;
      if (f.piece == gputravel::AesGcm::kEncryptPiece) note += "encrypt";
      if (f.piece == gputravel::AesGcm::kDecryptPiece) note += note.empty() ? "decrypt" : "+dec";
      o += absl::StrFormat("  %-8zu %-10s %10.0f %8.3f %10.0f %8.3f\n", f.piece,
                           note.empty() ? "" : "(" + note + ")", f.encrypt_median,
                           f.encrypt_ratio, f.decrypt_median, f.decrypt_ratio);
    }
  }
  o += absl::StrFormat("\n(in use: encrypting %zu-byte pieces, decrypting %zu-byte pieces)\n",
                       gputravel::AesGcm::kEncryptPiece, gputravel::AesGcm::kDecryptPiece);
  return o;
}

std::string Json(const std::vector<PieceTable>& tables, const gputravel::bench::PieceOptions& o) {
  nlohmann::json j;
  j["rounds"] = o.rounds;
  j["seconds_per_figure"] = o.seconds;
  j["large_bytes"] = o.large_bytes;
  j["slots"] = o.slots;
  j["encrypt_piece_in_use"] = gputravel::AesGcm::kEncryptPiece;
  j["decrypt_piece_in_use"] = gputravel::AesGcm::kDecryptPiece;
  j["tables"] = nlohmann::json::array();
  for (const PieceTable& t : tables) {
    nlohmann::json figs = nlohmann::json::array();
    for (const auto& f : t.figures) {
      figs.push_back({{"piece_bytes", f.piece},
                      {"encrypt_mbps_median", f.encrypt_median},
                      {"encrypt_ratio", f.encrypt_ratio},
                      {"encrypt_mbps", f.encrypt_mbps},
                      {"decrypt_mbps_median", f.decrypt_median},
                      {"decrypt_ratio", f.decrypt_ratio},
                      {"decrypt_mbps", f.decrypt_mbps}});
    }
    j["tables"].push_back({{"message_bytes", t.message_bytes},
                           {"reference_mbps_median", t.reference_median},
                           {"reference_mbps", t.reference_mbps},
                           {"figures", figs}});
  }
  return j.dump(2) + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gputravel;
  Flags flags("piece_bench",
              "Measures what the size of AesGcm's private pieces costs: encrypting 64 KiB and\n"
              "2 MiB messages from a 256 MiB buffer into a shared-memory bounce ring, and\n"
              "decrypting them back out, by piece size, next to OpenSSL's in-place\n"
              "AES-256-GCM loop measured in the same rounds. Run it with -c opt.");
  flags.Bool("json", "Print one JSON object instead of tables.");
  flags.Bool("quick", "Tiny sizes and short loops (a smoke run, not figures).");
  flags.String("rounds", "", "Rounds, 1..100 (default: 5, or 2 with --quick).");
  flags.String("bounce_dir", "/dev/shm", "Where the bounce ring is created (a tmpfs).");
  absl::Status s = flags.Parse(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "piece_bench: %s (see --help)\n", std::string(s.message()).c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (!flags.positional().empty()) {
    std::fprintf(stderr, "piece_bench: unexpected argument '%s' (see --help)\n",
                 flags.positional()[0].c_str());
    return 2;
  }
  bench::PieceOptions options =
      flags.IsSet("quick") ? bench::PieceOptions::Quick() : bench::PieceOptions::Full();
  options.bounce_dir = flags.Get("bounce_dir");
  if (!flags.Get("rounds").empty()) {
    int rounds = 0;
    if (!absl::SimpleAtoi(flags.Get("rounds"), &rounds) || rounds < 1 || rounds > 100) {
      std::fprintf(stderr, "piece_bench: --rounds must be a whole number from 1 to 100\n");
      return 2;
    }
    options.rounds = rounds;
  }
  auto tables = bench::MeasurePieceSizes(options);
  if (!tables.ok()) {
    std::fprintf(stderr, "piece_bench: %s\n", std::string(tables.status().message()).c_str());
    return 1;
  }
  std::string out = flags.IsSet("json") ? Json(*tables, options) : Table(*tables);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
