#ifndef GPUTRAVEL_BENCH_NETNS_LINK_H_
#define GPUTRAVEL_BENCH_NETNS_LINK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gputravel {
namespace bench {

// A network link between two TDs, emulated by two network namespaces made
// for the benchmark ("gtbench-<pid>-h", the holder's, and "gtbench-<pid>-o",
// the orchestrator's) joined by one veth pair. The addresses (a /30) exist
// only inside the two namespaces; nothing is added to the caller's. Traffic
// control on the holder's end (tbf, the direction the window travels) sets
// the link rate; netem on the orchestrator's end adds a delay to every
// packet going back (the acknowledgements), i.e. to the round trip.
//
// Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and the `ip` and `tc` tools.
// The destructor deletes both namespaces (the veth pair goes with them), and
// Create first deletes the namespaces of earlier runs whose process is gone
// (a run that was SIGKILLed). InstallSignalCleanup makes SIGINT, SIGTERM and
// SIGHUP delete them too before the process exits.
class NetnsLink {
 public:
  static absl::StatusOr<std::unique_ptr<NetnsLink>> Create();
  ~NetnsLink();
  NetnsLink(const NetnsLink&) = delete;
  NetnsLink& operator=(const NetnsLink&) = delete;

  // Shapes the holder -> orchestrator direction to `rate_bits_per_second`
  // (tbf; 0: unshaped, no qdisc) and the round trip with `delay_ms` of
  // netem on the way back (0: none). Replaces what was there.
  absl::Status Shape(uint64_t rate_bits_per_second, double delay_ms);
  // Bytes the holder end's root qdisc has sent so far (`tc -s`); 0 when
  // unshaped.
  absl::StatusOr<uint64_t> ShapedBytesSent() const;
  // The tbf bucket Shape uses at a rate: bytes that may leave at line rate
  // before the rate holds.
  static uint64_t BurstBytes(uint64_t rate_bits_per_second);

  const std::string& holder_ns() const { return holder_ns_; }
  const std::string& orchestrator_ns() const { return orchestrator_ns_; }
  static constexpr char kHolderAddress[] = "10.231.0.2";
  static constexpr char kOrchestratorAddress[] = "10.231.0.1";

  // Deletes the namespaces of the current link (if any) on SIGINT, SIGTERM
  // and SIGHUP, then exits with 128 + the signal.
  static void InstallSignalCleanup();

 private:
  NetnsLink() = default;
  std::string holder_ns_, orchestrator_ns_;
};

// The `ip` tool's absolute path (for launchers that do not search PATH).
std::string IpBinary();

// Runs `argv` (no shell) to the end; its stdout in `*out` when given. An
// error names the command and holds its stderr's tail.
absl::Status RunCommand(const std::vector<std::string>& argv, std::string* out = nullptr);

}  // namespace bench
}  // namespace gputravel

#endif  // GPUTRAVEL_BENCH_NETNS_LINK_H_
