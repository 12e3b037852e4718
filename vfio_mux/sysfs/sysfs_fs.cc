#include "vfio_mux/sysfs/sysfs_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gputravel {
namespace {

absl::Status ErrnoError(int err, absl::string_view what,
                        const std::string& path) {
  return SysfsErrnoError(err, what, path);
}

class RealFs : public SysfsFs {
 public:
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoError(errno, "cannot open", path);
    std::string out;
    char buf[4096];
    for (;;) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        close(fd);
        return ErrnoError(err, "cannot read", path);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return out;
  }

  absl::Status WriteFile(const std::string& path,
                         absl::string_view data) override {
    // O_TRUNC as `echo VALUE > ATTR` opens it: sysfs ignores the
    // truncation, and a tree of plain files then holds just the value.
    int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) return ErrnoError(errno, "cannot open for writing", path);
    ssize_t n;
    do {
      n = write(fd, data.data(), data.size());
    } while (n < 0 && errno == EINTR);
    int err = errno;
    // sysfs reports some failures only at close for buffered attributes.
    int close_rc = close(fd);
    int close_err = errno;
    if (n < 0) {
      return ErrnoError(
          err, absl::StrCat("writing '", absl::CHexEscape(data), "' to"), path);
    }
    if (static_cast<size_t>(n) != data.size()) {
      return absl::DataLossError(absl::StrCat(
          "short write to ", path, ": ", n, " of ", data.size(), " bytes"));
    }
    if (close_rc != 0) return ErrnoError(close_err, "closing", path);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ReadLink(const std::string& path) override {
    std::string buf(4096, '\0');
    ssize_t n = readlink(path.c_str(), buf.data(), buf.size());
    if (n < 0) return ErrnoError(errno, "cannot read link", path);
    buf.resize(static_cast<size_t>(n));
    return buf;
  }

  absl::StatusOr<std::vector<std::string>> ListDir(
      const std::string& path) override {
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return ErrnoError(errno, "cannot list", path);
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* e = readdir(dir)) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
        continue;
      }
      names.emplace_back(e->d_name);
    }
    int err = errno;
    closedir(dir);
    if (err != 0) return ErrnoError(err, "cannot list", path);
    std::sort(names.begin(), names.end());
    return names;
  }

  bool Exists(const std::string& path) override {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  }

  absl::StatusOr<uint64_t> CharDeviceNumber(const std::string& path) override {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return ErrnoError(errno, "cannot stat", path);
    if (!S_ISCHR(st.st_mode)) return uint64_t{0};
    return static_cast<uint64_t>(st.st_rdev);
  }
};

constexpr absl::string_view kErrnoPayload = "type.gputravel/errno";

}  // namespace

// strerror() is not thread-safe; the MUX runs moves for different GPUs
// concurrently. (GNU strerror_r returns the message pointer.)
std::string ErrnoText(int err) {
  char buf[256];
  return strerror_r(err, buf, sizeof(buf));
}

absl::Status SysfsErrnoError(int err, absl::string_view what,
                             absl::string_view path) {
  absl::Status s(absl::ErrnoToStatusCode(err),
                 absl::StrCat(what, " ", path, ": ", ErrnoText(err),
                              " (errno ", err, ")"));
  s.SetPayload(kErrnoPayload, absl::Cord(absl::StrCat(err)));
  return s;
}

int SysfsErrno(const absl::Status& status) {
  absl::optional<absl::Cord> p = status.GetPayload(kErrnoPayload);
  int err = 0;
  if (!p.has_value() || !absl::SimpleAtoi(std::string(*p), &err)) return 0;
  return err;
}

std::shared_ptr<SysfsFs> RealSysfsFs() {
  static const std::shared_ptr<SysfsFs>* fs =
      new std::shared_ptr<SysfsFs>(std::make_shared<RealFs>());
  return *fs;
}

}  // namespace gputravel
