#ifndef GPUTRAVEL_BENCH_NETWORK_BASELINE_H_
#define GPUTRAVEL_BENCH_NETWORK_BASELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/tls_config.h"
#include "nlohmann/json.hpp"

namespace gputravel {
namespace bench {

// The design GPU travelling replaces: the holder's TD streams its window to
// the orchestrator's TD over the network (gRPC with the campaign's mTLS;
// gRPC with OpenSSL 3 negotiates TLS 1.3), and the orchestrator loads it into
// the GPU over its own CC channel. Measured from "window requested" (the
// orchestrator's Fetch) to "window in device memory and verified" (read
// back and its digest matched, as a trip verifies it), over a link that
// NetnsLink emulates and traffic control shapes.
//
// Process layout. Each TD's side runs as its own process inside its own
// namespace (`ip netns exec NS <this binary> --role=...`), so every socket,
// and every thread gRPC starts, is in that namespace from birth. The
// alternative, setns(2) on threads of one process, does not hold for gRPC:
// its pollers and executor threads are created lazily by whichever thread
// first needs them and would land in the wrong namespace. The driver (in
// the caller's namespace) only runs `ip` and `tc` and the two helpers.

// The holder's side: serves WindowSource.Fetch on `listen` (host:port) with
// server mTLS from `tls`, from an in-memory window of `max_bytes`
// pseudo-random bytes made before it reports ready by creating
// `ready_file`. Runs until the process is signalled.
absl::Status ServeHolderWindow(const std::string& listen, const TlsFiles& tls,
                               uint64_t max_bytes, const std::string& ready_file);

// One window through the baseline, on the orchestrator's side.
struct BaselineRun {
  uint64_t bytes = 0;
  double handshake_seconds = 0;  // TCP + TLS connect, before "requested" (not counted)
  double network_seconds = 0;    // Fetch sent .. last byte received
  double load_seconds = 0;       // key, buffer, H2dWriter over the orchestrator's CC channel
  double verify_seconds = 0;     // read back in 8 MiB pieces, window digest
  double total_seconds = 0;      // requested .. in device memory and verified
  bool verified = false;         // digest matched and read-back == received
};
nlohmann::json ToJson(const BaselineRun& r);

// The orchestrator's side: connects to the holder at `holder_endpoint`
// (mTLS as the orchestrator, the server must be holder `holder_name`) and,
// for each size in turn, fetches a window and loads it into an emulated GPU
// of this process. `deadline_seconds` bounds each fetch.
absl::StatusOr<std::vector<BaselineRun>> FetchAndLoad(
    const std::string& holder_endpoint, const TlsFiles& tls, const std::string& holder_name,
    const std::vector<uint64_t>& sizes, double deadline_seconds);

// One link rate of the sweep.
struct CapResult {
  std::string label;            // "4 Mbit/s", ..., "unshaped"
  uint64_t rate_bits_per_second = 0;  // 0: unshaped
  double delay_ms = 0;
  std::vector<BaselineRun> measured;
  uint64_t qdisc_bytes = 0;     // bytes the shaping qdisc passed (0: unshaped)
  // Linearity of the two largest measured sizes: t2/t1 over s2/s1 (1: the
  // cost is proportional to the size). Extrapolation only when within
  // kLinearTolerance of 1.
  double linearity = 0;
  bool linear = false;
  // Seconds for every requested size: measured, or from the line through
  // the two largest measured sizes (extrapolated[i]).
  std::vector<uint64_t> sizes;
  std::vector<double> total_seconds;
  std::vector<bool> extrapolated;
  // The link's physical floor for each measured run: window bytes x 8 /
  // rate (the bucket tbf lets out at line rate is smaller than the TCP, TLS
  // and gRPC headers the window adds). A shaped run whose network part was
  // faster than this was not shaped (a wrong tc set-up).
  std::vector<double> floor_seconds;
  bool above_floor = true;
};
inline constexpr double kLinearTolerance = 0.15;

struct SweepOptions {
  std::vector<uint64_t> rates_bits_per_second;  // 0: unshaped
  std::vector<uint64_t> sizes;                  // ascending
  // A size is measured when its physical time at the cap is at most this
  // (the two smallest always are); larger ones are extrapolated.
  double max_measure_seconds = 40;
  double delay_ms = 0;          // netem on the way back, every cap
  std::string self_binary;      // this program, run as the two helpers
  std::string work_dir;         // PKI and ready file (removed by the caller)
};

// Makes the namespaces, the PKI and the holder's helper, and measures each
// cap in turn (one orchestrator helper per cap); the namespaces and helpers
// are gone when it returns, whatever happened.
absl::StatusOr<std::vector<CapResult>> RunBaselineSweep(const SweepOptions& options);
nlohmann::json ToJson(const CapResult& r);

// "4 Mbit/s", "1 Gbit/s", "unshaped".
std::string RateLabel(uint64_t rate_bits_per_second);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_NETWORK_BASELINE_H_
