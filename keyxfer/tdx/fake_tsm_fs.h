#ifndef GPUTRAVEL_KEYXFER_TDX_FAKE_TSM_FS_H_
#define GPUTRAVEL_KEYXFER_TDX_FAKE_TSM_FS_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "keyxfer/tdx/configfs_tsm.h"
#include "keyxfer/tdx/fake_rtmr_fs.h"

namespace gputravel::tdx::testing {

// Behaves like configfs-tsm on top of a real directory: mkdir populates the
// report directory's attributes (provider, generation, inblob, outblob); an
// inblob write bumps generation and makes outblob the template quote with
// REPORTDATA replaced by the written bytes; rmdir removes the attributes
// first, as configfs does. Knobs inject the kernel's failure modes.
class FakeConfigfsTsm : public TsmFs {
 public:
  // `root` must exist (or not, to simulate a missing configfs-tsm).
  // `quote_template` is a v4 quote (at least 0x278 bytes).
  FakeConfigfsTsm(std::string root, std::string quote_template);

  void set_provider(std::string provider) {
    absl::MutexLock l(&mu_);
    provider_ = std::move(provider);
  }
  // The next `n` inblob writes / outblob reads fail with EBUSY.
  void set_busy_writes(int n) {
    absl::MutexLock l(&mu_);
    busy_writes_ = n;
  }
  void set_busy_reads(int n) {
    absl::MutexLock l(&mu_);
    busy_reads_ = n;
  }
  // Each inblob write also counts `n` writes by someone else.
  void set_racing_writes(int n) {
    absl::MutexLock l(&mu_);
    racing_writes_ = n;
  }
  // Inblob writes report success but change nothing (a refused write whose
  // error configfs swallowed at close); outblob holds a stale report.
  void set_drop_writes(bool drop) {
    absl::MutexLock l(&mu_);
    drop_writes_ = drop;
  }
  // Quotes carry the RTMR3 `measurements` holds when they are made (as the
  // TDX module reports the live registers), instead of the template's. Such
  // a quote no longer verifies against its signature; its body shows what a
  // real quote would report.
  void set_measurements(std::shared_ptr<FakeTdxMeasurements> measurements) {
    absl::MutexLock l(&mu_);
    measurements_ = std::move(measurements);
  }
  // Outblob reads fail with this errno (0: succeed).
  void set_outblob_errno(int err) {
    absl::MutexLock l(&mu_);
    outblob_errno_ = err;
  }

  int inblob_attempts() const {
    absl::MutexLock l(&mu_);
    return inblob_attempts_;
  }
  std::vector<std::string> dirs_made() const {
    absl::MutexLock l(&mu_);
    return dirs_made_;
  }

  int MakeDir(const std::string& path) override;
  int RemoveDir(const std::string& path) override;
  int ReadFile(const std::string& path, std::string* contents) override;
  int WriteFile(const std::string& path, absl::string_view data) override;

 private:
  static std::string Base(const std::string& path);
  static std::string Dir(const std::string& path);

  const std::string root_;
  const std::string quote_template_;
  PosixTsmFs real_;
  mutable absl::Mutex mu_;
  std::string provider_ ABSL_GUARDED_BY(mu_) = "tdx_guest";
  int busy_writes_ ABSL_GUARDED_BY(mu_) = 0;
  int busy_reads_ ABSL_GUARDED_BY(mu_) = 0;
  int racing_writes_ ABSL_GUARDED_BY(mu_) = 0;
  bool drop_writes_ ABSL_GUARDED_BY(mu_) = false;
  int outblob_errno_ ABSL_GUARDED_BY(mu_) = 0;
  int inblob_attempts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> dirs_made_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<FakeTdxMeasurements> measurements_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel::tdx::testing

#endif  // GPUTRAVEL_KEYXFER_TDX_FAKE_TSM_FS_H_
