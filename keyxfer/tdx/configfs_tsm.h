#ifndef GPUTRAVEL_KEYXFER_TDX_CONFIGFS_TSM_H_
#define GPUTRAVEL_KEYXFER_TDX_CONFIGFS_TSM_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gputravel::tdx {

// The file operations the configfs-tsm protocol needs, with syscall results
// (0 or an errno) so that EBUSY stays distinguishable. configfs attributes
// react to writes (generation, outblob), which plain files cannot imitate;
// tests substitute a fake that does. Implementations must be thread-safe.
class TsmFs {
 public:
  virtual ~TsmFs() = default;
  virtual int MakeDir(const std::string& path) = 0;
  virtual int RemoveDir(const std::string& path) = 0;
  // Reads the whole file into `contents`.
  virtual int ReadFile(const std::string& path, std::string* contents) = 0;
  // Opens, writes `data` in one write(2), closes. configfs commits binary
  // attributes such as inblob only on close, so the close is part of it.
  virtual int WriteFile(const std::string& path, absl::string_view data) = 0;
};

// TsmFs on the real file system (open/read/write/close, mkdir, rmdir).
class PosixTsmFs : public TsmFs {
 public:
  int MakeDir(const std::string& path) override;
  int RemoveDir(const std::string& path) override;
  int ReadFile(const std::string& path, std::string* contents) override;
  int WriteFile(const std::string& path, absl::string_view data) override;
};

struct ConfigfsTsmOptions {
  std::string root = "/sys/kernel/config/tsm/report";
  // Value `provider` must hold: anything else is not a TDX guest.
  std::string expected_provider = "tdx_guest";
  // EBUSY backoff: doubles from initial to max, within `timeout` overall.
  absl::Duration initial_backoff = absl::Milliseconds(10);
  absl::Duration max_backoff = absl::Milliseconds(500);
  // The kernel itself waits up to 30 s for the host's quoting service, so the
  // whole request gets twice that.
  absl::Duration timeout = absl::Seconds(60);
  // Null: PosixTsmFs.
  std::shared_ptr<TsmFs> fs;
};

// Obtains TDX quotes through configfs-tsm (Linux
// Documentation/ABI/testing/configfs-tsm-report). Each request uses its own
// report directory, so concurrent requests (threads or processes) do not
// overwrite each other's inblob; the generation check catches anyone who
// writes into it anyway. Thread-safe.
class ConfigfsTsmQuoteProvider {
 public:
  explicit ConfigfsTsmQuoteProvider(ConfigfsTsmOptions options = {});

  // mkdir ROOT/NAME; check `provider`; read `generation`; write the 64 bytes
  // to `inblob`; read `outblob`; check `generation` advanced by exactly one;
  // rmdir. Returns outblob as read (configfs-tsm may zero-pad it).
  // Errors: kNotFound (no configfs-tsm), kFailedPrecondition (not a TDX
  // guest), kPermissionDenied, kDeadlineExceeded (EBUSY past the timeout),
  // kAborted (generation raced), others mapped from errno, each naming the
  // file and what to check.
  absl::StatusOr<std::string> GetQuote(
      const std::array<uint8_t, 64>& report_data);

  const ConfigfsTsmOptions& options() const { return options_; }

 private:
  ConfigfsTsmOptions options_;
  std::atomic<uint64_t> sequence_{0};
};

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_CONFIGFS_TSM_H_
