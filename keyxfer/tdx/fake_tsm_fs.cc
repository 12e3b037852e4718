#include "keyxfer/tdx/fake_tsm_fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gputravel::tdx::testing {
namespace {

constexpr const char* kAttributes[] = {"provider", "generation", "inblob",
                                       "outblob"};
constexpr size_t kReportDataOffset = 0x238;
constexpr size_t kRtmr3Offset = 0x208;

bool Put(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  return static_cast<bool>(out);
}

}  // namespace

FakeConfigfsTsm::FakeConfigfsTsm(std::string root, std::string quote_template)
    : root_(std::move(root)), quote_template_(std::move(quote_template)) {}

std::string FakeConfigfsTsm::Base(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

std::string FakeConfigfsTsm::Dir(const std::string& path) {
  return path.substr(0, path.rfind('/'));
}

int FakeConfigfsTsm::MakeDir(const std::string& path) {
  absl::MutexLock l(&mu_);
  int rc = real_.MakeDir(path);
  if (rc != 0) return rc;
  dirs_made_.push_back(path);
  // configfs creates the attributes together with the directory.
  if (!Put(path + "/provider", provider_ + "\n") ||
      !Put(path + "/generation", "0\n") || !Put(path + "/inblob", "") ||
      // A dropped write leaves whatever report was there before.
      !Put(path + "/outblob", drop_writes_ ? quote_template_ : "")) {
    return EIO;
  }
  return 0;
}

int FakeConfigfsTsm::RemoveDir(const std::string& path) {
  absl::MutexLock l(&mu_);
  for (const char* a : kAttributes) ::unlink((path + "/" + a).c_str());
  return real_.RemoveDir(path);
}

int FakeConfigfsTsm::ReadFile(const std::string& path, std::string* contents) {
  absl::MutexLock l(&mu_);
  if (Base(path) == "outblob") {
    if (busy_reads_ > 0) {
      --busy_reads_;
      return EBUSY;
    }
    if (outblob_errno_ != 0) return outblob_errno_;
  }
  return real_.ReadFile(path, contents);
}

int FakeConfigfsTsm::WriteFile(const std::string& path,
                               absl::string_view data) {
  absl::MutexLock l(&mu_);
  if (Base(path) != "inblob") return EACCES;  // the others are read-only
  ++inblob_attempts_;
  if (busy_writes_ > 0) {
    --busy_writes_;
    return EBUSY;
  }
  if (data.size() != 64) return EINVAL;  // what the TDX driver answers
  if (drop_writes_) return 0;
  int rc = real_.WriteFile(path, data);
  if (rc != 0) return rc;
  const std::string dir = Dir(path);
  std::string gen_text;
  if (real_.ReadFile(dir + "/generation", &gen_text) != 0) return EIO;
  uint64_t gen = 0;
  if (!absl::SimpleAtoi(absl::StripSuffix(gen_text, "\n"), &gen)) return EIO;
  gen += 1 + racing_writes_;
  std::string quote = quote_template_;
  quote.replace(kReportDataOffset, 64, data.data(), data.size());
  if (measurements_) quote.replace(kRtmr3Offset, 48, measurements_->rtmr(3));
  if (!Put(dir + "/generation", absl::StrCat(gen, "\n")) ||
      !Put(dir + "/outblob", quote)) {
    return EIO;
  }
  return 0;
}

}  // namespace gputravel::tdx::testing
