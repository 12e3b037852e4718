#ifndef GPUTRAVEL_KEYXFER_TDX_RTMR_H_
#define GPUTRAVEL_KEYXFER_TDX_RTMR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/tdx/configfs_tsm.h"

namespace gputravel::tdx {

// The TD's runtime measurement registers through the Linux TDX guest
// driver's sysfs interface (Linux 6.16+, TSM_MEASUREMENTS;
// Documentation/ABI/testing/sysfs-devices-virtual-misc-tdx_guest):
// ROOT/rtmr[0-3]:sha384 are binary attributes of 48 bytes; a read returns
// the register, a write of exactly 48 bytes at offset 0 extends it
// (TDG.MR.RTMR.EXTEND: RTMR = SHA-384(RTMR || data)); anything else is EINVAL.
// Kernels without this interface cannot extend RTMRs from user space.
struct RtmrOptions {
  std::string root = "/sys/class/misc/tdx_guest/measurements";
  // Null: the real file system (PosixTsmFs). Tests substitute a fake.
  std::shared_ptr<TsmFs> fs;
};

class RtmrRegisters {
 public:
  explicit RtmrRegisters(RtmrOptions options = {});

  // RTMR `index` (0..3), 48 bytes. Errors name the file and what to check.
  absl::StatusOr<std::string> Read(int index);
  // Extends RTMR `index` with a 48-byte digest.
  absl::Status Extend(int index, absl::string_view digest);

  std::string PathOf(int index) const;

 private:
  RtmrOptions options_;
};

// Brings RTMR3 to `expected` = the replay of `events` onto zero:
//  - RTMR3 is zero (a fresh TD): extends each event in order, reads the
//    register back and requires `expected` (kAborted if another process
//    extended it meanwhile);
//  - RTMR3 already equals `expected` (the daemon restarted with the same
//    binary and configuration): nothing to do;
//  - anything else: kFailedPrecondition, since this TD measured another
//    binary or configuration since it booted (restart the TD).
// Errors (no interface, a refused write) name the file; the daemon must not
// serve after one, since peers could not verify what it trusts.
absl::Status MeasureIntoRtmr3(RtmrRegisters& registers, const std::vector<std::string>& events,
                              const std::string& expected);

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_RTMR_H_
