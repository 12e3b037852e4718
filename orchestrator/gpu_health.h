#ifndef GPUTRAVEL_ORCHESTRATOR_GPU_HEALTH_H_
#define GPUTRAVEL_ORCHESTRATOR_GPU_HEALTH_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gputravel {

// What the orchestrator last saw of one GPU it drives.
struct GpuHealth {
  enum class Reach {
    kUnknown,      // no contact tried yet
    kReachable,    // the last contact (home through the MUX, key exchange) worked
    kUnreachable,  // it failed: `error` says where
  };
  Reach reach = Reach::kUnknown;
  std::string error;
  absl::Time checked = absl::InfinitePast();  // the last contact
  // The device met, as its verified certificate names it ("" until met).
  std::string serial;
  // A CC session with the device is in force at this end.
  bool session = false;
  // Device memory the device declared with its identity (0 until met).
  uint64_t memory_bytes = 0;
};

// The health of every GPU, written by each GPU's worker after each contact
// with its device and read by API threads (ListGpus, Create's size check).
// Thread-safe.
class GpuHealthBoard {
 public:
  // After a contact with `gpu`'s device, whose outcome is `outcome`; `seen`
  // is what the session knows now. What a failed contact cannot say (the
  // serial, the memory) stays as last seen; `checked` is set here.
  void Record(const std::string& gpu, const absl::Status& outcome, GpuHealth seen);
  // kUnknown for a GPU never recorded.
  GpuHealth Get(const std::string& gpu) const;
  // INVALID_ARGUMENT, naming the field, the GPU and its memory, when the
  // device met on `gpu` declared less memory than `buffer_bytes`; OK when it
  // fits or the memory is not known yet (the campaign's start then finds
  // out).
  absl::Status CheckBufferFits(const std::string& gpu, uint64_t buffer_bytes) const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, GpuHealth> gpus_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_GPU_HEALTH_H_
