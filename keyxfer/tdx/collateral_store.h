#ifndef GPUTRAVEL_KEYXFER_TDX_COLLATERAL_STORE_H_
#define GPUTRAVEL_KEYXFER_TDX_COLLATERAL_STORE_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "keyxfer/tdx/collateral.h"

namespace gputravel::tdx {

// Collateral bundles (collateral.h's JSON form) from local files: one file,
// or a directory whose *.json files are one bundle each (one per platform
// FMSPC, e.g. refreshed by a cron job from Intel's PCS or a PCCS). Nothing is
// fetched over the network. Every lookup re-stats the path (and each *.json
// file: inode, size, modification time) and rereads when anything changed,
// so a daemon picks up refreshed collateral without a restart; a file being
// replaced should be written elsewhere and renamed in. Bundles are only
// parsed here; VerifyCollateral verifies them at each use. Thread-safe.
class CollateralStore {
 public:
  // Fails if `path` is neither a readable file nor a directory, or (for a
  // file) does not parse.
  static absl::StatusOr<std::shared_ptr<CollateralStore>> Open(
      std::string path);

  // The bundle whose TCB info is for `fmspc`. Errors name the path and, for
  // a directory, the FMSPCs it holds and any file that did not parse.
  absl::StatusOr<std::shared_ptr<const CollateralBundle>> ForFmspc(
      const std::array<uint8_t, 6>& fmspc);

  const std::string& path() const { return path_; }

 private:
  explicit CollateralStore(std::string path) : path_(std::move(path)) {}
  absl::Status RefreshLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  std::string fingerprint_ ABSL_GUARDED_BY(mu_);
  std::map<std::array<uint8_t, 6>, std::shared_ptr<const CollateralBundle>>
      by_fmspc_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> problems_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_COLLATERAL_STORE_H_
