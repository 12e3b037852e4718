#include "util/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "util/json_text.h"

namespace gputravel {

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError("cannot read " + path + ": " + std::strerror(errno));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// Writes all of `contents` to `fd`; 0 or the errno of the failed write.
int WriteAll(int fd, const std::string& contents) {
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;  // No progress: never spin.
    done += static_cast<size_t>(n);
  }
  return 0;
}

absl::Status WriteError(const std::string& path, int err) {
  return absl::UnavailableError("cannot write " + path + ": " + std::strerror(err));
}

}  // namespace

absl::Status WriteFile(const std::string& path, const std::string& contents,
                       int mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return WriteError(path, errno);
  int err = WriteAll(fd, contents);
  if (err != 0) {
    ::close(fd);
    return WriteError(path, err);
  }
  // close() is where some file systems (NFS, quotas) report a failed write.
  if (::close(fd) != 0) return WriteError(path, errno);
  return absl::OkStatus();
}

absl::Status WriteNewFile(const std::string& path, const std::string& contents, int mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  static_cast<mode_t>(mode));
  if (fd < 0) {
    int err = errno;
    // EEXIST: a file, directory or symbolic link is there. ELOOP: O_NOFOLLOW
    // met a symbolic link (kept for systems that report it so).
    if (err == EEXIST || err == ELOOP) {
      return absl::AlreadyExistsError(path + " already exists");
    }
    return WriteError(path, err);
  }
  int err = WriteAll(fd, contents);
  if (err != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    return WriteError(path, err);
  }
  if (::close(fd) != 0) {
    err = errno;
    ::unlink(path.c_str());
    return WriteError(path, err);
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<nlohmann::json> parsed = ParseJsonText(*text, path);
  if (!parsed.ok()) return parsed.status();
  nlohmann::json& j = *parsed;
  if (!j.is_object()) {
    return absl::InvalidArgumentError(path + ": top level must be a JSON object");
  }
  return std::move(j);
}

absl::StatusOr<std::string> JsonString(const nlohmann::json& j,
                                       const std::string& where,
                                       const std::string& field) {
  if (!j.is_object() || !j.contains(field)) {
    return absl::InvalidArgumentError(where + ": missing field '" + field + "'");
  }
  if (!j[field].is_string()) {
    return absl::InvalidArgumentError(where + ": field '" + field +
                                      "' must be a string");
  }
  return j[field].get<std::string>();
}

absl::StatusOr<uint64_t> JsonUint(const nlohmann::json& j, const std::string& where,
                                  const std::string& field) {
  if (!j.is_object() || !j.contains(field)) {
    return absl::InvalidArgumentError(where + ": missing field '" + field + "'");
  }
  if (!j[field].is_number_unsigned() &&
      !(j[field].is_number_integer() && j[field].get<int64_t>() >= 0)) {
    return absl::InvalidArgumentError(where + ": field '" + field +
                                      "' must be a non-negative integer");
  }
  return j[field].get<uint64_t>();
}

}  // namespace gputravel
