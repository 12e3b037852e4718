#ifndef GPUTRAVEL_KEYXFER_TDX_FAKE_RTMR_FS_H_
#define GPUTRAVEL_KEYXFER_TDX_FAKE_RTMR_FS_H_

#include <array>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "keyxfer/tdx/configfs_tsm.h"

namespace gputravel::tdx::testing {

// Behaves like the TDX guest driver's measurements directory
// (keyxfer/tdx/rtmr.h) under any root: ROOT/rtmrN:sha384 reads return the
// register, a 48-byte write extends it, any other size is EINVAL. Registers
// start at zero. FakeConfigfsTsm can put RTMR3 into the quotes it makes.
class FakeTdxMeasurements : public TsmFs {
 public:
  explicit FakeTdxMeasurements(std::string root) : root_(std::move(root)) {}

  // The interface is absent (every access: ENOENT), as on older kernels.
  void set_missing(bool missing) {
    absl::MutexLock l(&mu_);
    missing_ = missing;
  }
  // Extensions fail with this errno (0: succeed).
  void set_write_errno(int err) {
    absl::MutexLock l(&mu_);
    write_errno_ = err;
  }
  // Someone else extends RTMR3 right after each of our extensions.
  void set_interloper(bool on) {
    absl::MutexLock l(&mu_);
    interloper_ = on;
  }
  std::string rtmr(int index) const {
    absl::MutexLock l(&mu_);
    return rtmr_[index];
  }
  int extends() const {
    absl::MutexLock l(&mu_);
    return extends_;
  }

  int MakeDir(const std::string&) override { return EPERM; }
  int RemoveDir(const std::string&) override { return EPERM; }
  int ReadFile(const std::string& path, std::string* contents) override;
  int WriteFile(const std::string& path, absl::string_view data) override;

 private:
  int IndexOf(const std::string& path) const;

  const std::string root_;
  mutable absl::Mutex mu_;
  std::array<std::string, 4> rtmr_ ABSL_GUARDED_BY(mu_) = {
      std::string(48, '\0'), std::string(48, '\0'), std::string(48, '\0'),
      std::string(48, '\0')};
  bool missing_ ABSL_GUARDED_BY(mu_) = false;
  bool interloper_ ABSL_GUARDED_BY(mu_) = false;
  int write_errno_ ABSL_GUARDED_BY(mu_) = 0;
  int extends_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gputravel::tdx::testing

#endif  // GPUTRAVEL_KEYXFER_TDX_FAKE_RTMR_FS_H_
