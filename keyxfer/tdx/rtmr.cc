#include "keyxfer/tdx/rtmr.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/hex.h"

namespace gputravel::tdx {
namespace {

constexpr size_t kRtmrBytes = 48;

std::string ErrnoText(int err) { return absl::StrCat(std::strerror(err), " (errno ", err, ")"); }

std::string Hex(absl::string_view bytes) {
  return HexEncode(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

absl::Status FromErrno(int err, const std::string& what) {
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(absl::StrCat(
          what, ": ", ErrnoText(err),
          ": this kernel offers no RTMR extension (the TDX guest driver of Linux 6.16+ "
          "with CONFIG_TSM_MEASUREMENTS exposes it), or this is not a TDX guest"));
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(
          absl::StrCat(what, ": ", ErrnoText(err), ": the daemon needs write access to it"));
    case EINVAL:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ", ErrnoText(err), ": the kernel refused the write"));
    default:
      return absl::UnavailableError(absl::StrCat(what, ": ", ErrnoText(err)));
  }
}

}  // namespace

RtmrRegisters::RtmrRegisters(RtmrOptions options) : options_(std::move(options)) {
  if (!options_.fs) options_.fs = std::make_shared<PosixTsmFs>();
}

std::string RtmrRegisters::PathOf(int index) const {
  return absl::StrCat(options_.root, "/rtmr", index, ":sha384");
}

absl::StatusOr<std::string> RtmrRegisters::Read(int index) {
  const std::string path = PathOf(index);
  std::string value;
  int err = options_.fs->ReadFile(path, &value);
  if (err != 0) return FromErrno(err, "reading " + path);
  if (value.size() != kRtmrBytes) {
    return absl::DataLossError(absl::StrCat("reading ", path, ": ", value.size(),
                                            " bytes, expected ", kRtmrBytes));
  }
  return value;
}

absl::Status RtmrRegisters::Extend(int index, absl::string_view digest) {
  const std::string path = PathOf(index);
  if (digest.size() != kRtmrBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("extending ", path, ": a digest must be 48 bytes, not ", digest.size()));
  }
  int err = options_.fs->WriteFile(path, digest);
  if (err != 0) return FromErrno(err, "extending " + path);
  return absl::OkStatus();
}

absl::Status MeasureIntoRtmr3(RtmrRegisters& registers, const std::vector<std::string>& events,
                              const std::string& expected) {
  auto before = registers.Read(3);
  if (!before.ok()) return before.status();
  if (*before == expected) return absl::OkStatus();
  if (*before != std::string(kRtmrBytes, '\0')) {
    return absl::FailedPreconditionError(absl::StrCat(
        registers.PathOf(3), " holds ", Hex(*before), ", neither zero (a fresh TD) nor ",
        Hex(expected),
        " (this daemon's binary and configuration): the TD measured another binary or "
        "configuration since it booted; restart the TD to run this one"));
  }
  for (const std::string& e : events) {
    absl::Status s = registers.Extend(3, e);
    if (!s.ok()) return s;
  }
  auto after = registers.Read(3);
  if (!after.ok()) return after.status();
  if (*after != expected) {
    return absl::AbortedError(absl::StrCat(
        registers.PathOf(3), " is ", Hex(*after), " after extending, expected ",
        Hex(expected), ": another process extended RTMR3 meanwhile; restart the TD"));
  }
  return absl::OkStatus();
}

}  // namespace gputravel::tdx
