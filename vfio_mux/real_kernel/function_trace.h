#ifndef GPUTRAVEL_VFIO_MUX_REAL_KERNEL_FUNCTION_TRACE_H_
#define GPUTRAVEL_VFIO_MUX_REAL_KERNEL_FUNCTION_TRACE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gputravel {

// Counts calls of named kernel functions with ftrace's function tracer
// (tracefs at /sys/kernel/tracing), to see which resets the kernel really
// performs. One at a time per machine. Test-only (the real-kernel guest).
class FunctionTrace {
 public:
  // Clears the trace buffer and adds `functions` to the filter (empty at
  // boot: start one trace per boot for exactly these).
  static absl::StatusOr<FunctionTrace> Start(const std::vector<std::string>& functions);
  // Stops tracing; calls per function since Start (0 for none, -1 for a
  // function the kernel cannot trace: inlined or notrace).
  absl::StatusOr<std::map<std::string, int>> Stop();

 private:
  FunctionTrace(std::vector<std::string> functions, std::vector<std::string> traced)
      : functions_(std::move(functions)), traced_(std::move(traced)) {}
  std::vector<std::string> functions_;
  std::vector<std::string> traced_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_REAL_KERNEL_FUNCTION_TRACE_H_
