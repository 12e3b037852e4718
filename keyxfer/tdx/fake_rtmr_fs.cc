#include "keyxfer/tdx/fake_rtmr_fs.h"

#include <openssl/sha.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace gputravel::tdx::testing {
namespace {

std::string Extend(const std::string& rtmr, absl::string_view digest) {
  std::string in = rtmr + std::string(digest);
  unsigned char out[SHA384_DIGEST_LENGTH];
  SHA384(reinterpret_cast<const unsigned char*>(in.data()), in.size(), out);
  return std::string(reinterpret_cast<char*>(out), sizeof(out));
}

}  // namespace

int FakeTdxMeasurements::IndexOf(const std::string& path) const {
  for (int i = 0; i < 4; ++i) {
    if (path == absl::StrCat(root_, "/rtmr", i, ":sha384")) return i;
  }
  return -1;
}

int FakeTdxMeasurements::ReadFile(const std::string& path, std::string* contents) {
  absl::MutexLock l(&mu_);
  const int i = IndexOf(path);
  if (missing_ || i < 0) return ENOENT;
  *contents = rtmr_[i];
  return 0;
}

int FakeTdxMeasurements::WriteFile(const std::string& path, absl::string_view data) {
  absl::MutexLock l(&mu_);
  const int i = IndexOf(path);
  if (missing_ || i < 0) return ENOENT;
  if (data.size() != 48) return EINVAL;  // partial writes are refused
  if (write_errno_ != 0) return write_errno_;
  rtmr_[i] = Extend(rtmr_[i], data);
  ++extends_;
  if (interloper_ && i == 3) rtmr_[i] = Extend(rtmr_[i], std::string(48, 'x'));
  return 0;
}

}  // namespace gputravel::tdx::testing
