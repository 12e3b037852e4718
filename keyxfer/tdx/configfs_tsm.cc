#include "keyxfer/tdx/configfs_tsm.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace gputravel::tdx {
namespace {

// configfs-tsm's outblob is at most a few KiB; anything near this is not a
// quote and must not be buffered without bound.
constexpr size_t kMaxAttributeBytes = 1 << 20;

std::string ErrnoText(int err) {
  return absl::StrCat(std::strerror(err), " (errno ", err, ")");
}

absl::Status Busy(const std::string& path, absl::Duration waited) {
  return absl::DeadlineExceededError(absl::StrFormat(
      "configfs-tsm: %s still busy (EBUSY) after %s: another quote request is "
      "in flight or the host's quote generation service does not answer",
      path, absl::FormatDuration(waited)));
}

}  // namespace

int PosixTsmFs::MakeDir(const std::string& path) {
  return ::mkdir(path.c_str(), 0700) == 0 ? 0 : errno;
}

int PosixTsmFs::RemoveDir(const std::string& path) {
  return ::rmdir(path.c_str()) == 0 ? 0 : errno;
}

int PosixTsmFs::ReadFile(const std::string& path, std::string* contents) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno;
  contents->clear();
  char buf[8192];
  int err = 0;
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    if (n == 0) break;
    if (contents->size() + static_cast<size_t>(n) > kMaxAttributeBytes) {
      err = EFBIG;
      break;
    }
    contents->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return err;
}

int PosixTsmFs::WriteFile(const std::string& path, absl::string_view data) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return errno;
  int err = 0;
  // One write(2): configfs binary attributes accumulate writes, and a short
  // write of a 64-byte blob would be a kernel bug worth surfacing, not
  // papering over with a second write.
  ssize_t n;
  do {
    n = ::write(fd, data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    err = errno;
  } else if (static_cast<size_t>(n) != data.size()) {
    err = EIO;
  }
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  return err;
}

ConfigfsTsmQuoteProvider::ConfigfsTsmQuoteProvider(ConfigfsTsmOptions options)
    : options_(std::move(options)) {
  if (!options_.fs) options_.fs = std::make_shared<PosixTsmFs>();
}

absl::StatusOr<std::string> ConfigfsTsmQuoteProvider::GetQuote(
    const std::array<uint8_t, 64>& report_data) {
  TsmFs& fs = *options_.fs;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.timeout;
  absl::Duration backoff = options_.initial_backoff;

  // Runs `op` until it returns something other than EBUSY/EAGAIN, sleeping
  // with exponential backoff; *timed_out reports running out of time.
  auto with_retry = [&](const std::function<int()>& op, bool* timed_out) {
    *timed_out = false;
    while (true) {
      int rc = op();
      if (rc != EBUSY && rc != EAGAIN && rc != EINTR) return rc;
      if (absl::Now() + backoff > deadline) {
        *timed_out = true;
        return rc;
      }
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, options_.max_backoff);
    }
  };

  // A report directory of our own: name from pid, sequence and randomness so
  // that neither other threads nor other processes (or a crashed earlier
  // run's leftovers) collide with it.
  std::string dir;
  int rc = EEXIST;
  for (int attempt = 0; attempt < 4 && rc == EEXIST; ++attempt) {
    std::random_device rd;
    dir = absl::StrFormat("%s/gputravel-%d-%d-%08x", options_.root, ::getpid(),
                          sequence_.fetch_add(1), rd());
    rc = fs.MakeDir(dir);
  }
  if (rc == ENOENT) {
    return absl::NotFoundError(absl::StrFormat(
        "configfs-tsm report root %s does not exist: mount configfs (mount -t "
        "configfs none /sys/kernel/config) and run in a TDX guest with a "
        "kernel built with CONFIG_TSM_REPORTS and the tdx_guest driver (6.7 "
        "or later)",
        options_.root));
  }
  if (rc == EACCES || rc == EPERM) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "configfs-tsm: cannot create report directory %s: %s; quote requests "
        "need root (or write access to %s)",
        dir, ErrnoText(rc), options_.root));
  }
  if (rc != 0) {
    return absl::ErrnoToStatus(
        rc, absl::StrFormat("configfs-tsm: mkdir %s", dir));
  }

  auto request = [&]() -> absl::StatusOr<std::string> {
    bool timed_out = false;
    std::string provider;
    const std::string provider_path = dir + "/provider";
    rc = with_retry([&] { return fs.ReadFile(provider_path, &provider); },
                    &timed_out);
    if (timed_out) return Busy(provider_path, absl::Now() - start);
    if (rc != 0) {
      return absl::ErrnoToStatus(
          rc, absl::StrFormat("configfs-tsm: reading %s", provider_path));
    }
    absl::string_view provider_name = absl::StripAsciiWhitespace(provider);
    if (provider_name != options_.expected_provider) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "configfs-tsm provider is \"%s\", expected \"%s\": this is not a "
          "TDX guest (or the tdx_guest driver is not loaded)",
          provider_name, options_.expected_provider));
    }

    const std::string generation_path = dir + "/generation";
    auto read_generation = [&]() -> absl::StatusOr<uint64_t> {
      std::string text;
      int grc = with_retry(
          [&] { return fs.ReadFile(generation_path, &text); }, &timed_out);
      if (timed_out) return Busy(generation_path, absl::Now() - start);
      if (grc != 0) {
        return absl::ErrnoToStatus(
            grc, absl::StrFormat("configfs-tsm: reading %s", generation_path));
      }
      uint64_t value = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) {
        return absl::InternalError(absl::StrFormat(
            "configfs-tsm: %s holds \"%s\", not a number", generation_path,
            absl::CHexEscape(text)));
      }
      return value;
    };

    auto before = read_generation();
    if (!before.ok()) return before.status();

    const std::string inblob_path = dir + "/inblob";
    absl::string_view blob(reinterpret_cast<const char*>(report_data.data()),
                           report_data.size());
    rc = with_retry([&] { return fs.WriteFile(inblob_path, blob); },
                    &timed_out);
    if (timed_out) return Busy(inblob_path, absl::Now() - start);
    if (rc != 0) {
      return absl::ErrnoToStatus(
          rc, absl::StrFormat("configfs-tsm: writing 64 bytes to %s%s",
                              inblob_path,
                              rc == EINVAL ? " (TDX requires exactly 64)" : ""));
    }

    const std::string outblob_path = dir + "/outblob";
    std::string outblob;
    rc = with_retry([&] { return fs.ReadFile(outblob_path, &outblob); },
                    &timed_out);
    if (timed_out) return Busy(outblob_path, absl::Now() - start);
    if (rc != 0) {
      std::string hint;
      if (rc == EIO || rc == ETIMEDOUT || rc == ENODEV) {
        hint =
            ": quote generation failed on the host; check that the host's "
            "quote generation service (QGS) runs and the TD was started with "
            "a quote-generation socket";
      }
      return absl::ErrnoToStatus(
          rc, absl::StrFormat("configfs-tsm: reading %s%s", outblob_path,
                              hint));
    }
    if (outblob.empty()) {
      return absl::InternalError(
          absl::StrFormat("configfs-tsm: %s is empty", outblob_path));
    }

    // The kernel bumps generation on every inblob write. Anything but one
    // bump means the outblob may answer somebody else's report data (or our
    // write was refused and the kernel handed out a stale report).
    auto after = read_generation();
    if (!after.ok()) return after.status();
    if (*after != *before + 1) {
      return absl::AbortedError(absl::StrFormat(
          "configfs-tsm: generation of %s went from %d to %d across one "
          "inblob write (expected %d): another writer raced on this report "
          "directory or the write was not applied; quote discarded",
          dir, *before, *after, *before + 1));
    }
    return outblob;
  };

  absl::StatusOr<std::string> result = request();
  // The directory is a kernel object; leaving it would leak one per request.
  // A failed rmdir does not invalidate a quote that was already read.
  int rm = fs.RemoveDir(dir);
  if (!result.ok() && rm != 0) {
    return absl::Status(
        result.status().code(),
        absl::StrCat(result.status().message(), "; also could not remove ",
                     dir, ": ", ErrnoText(rm)));
  }
  return result;
}

}  // namespace gputravel::tdx
