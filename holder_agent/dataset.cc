#include "holder_agent/dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "util/files.h"

namespace gputravel {
namespace {

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

// Reads the first n bytes of `fd` (EINTR retried). Returns the bytes read:
// fewer than n only at the end of the file; -1 with errno on an I/O error.
ssize_t ReadPrefix(int fd, void* dst, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, static_cast<char*>(dst) + done, n - done, static_cast<off_t>(done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

// Whether `fd` can be mapped (some file systems cannot).
bool CanMap(int fd) {
  void* p = ::mmap(nullptr, PageSize(), PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return false;
  ::munmap(p, PageSize());
  return true;
}

}  // namespace

DatasetMapping::~DatasetMapping() {
  if (base_ != nullptr) ::munmap(base_, mapped_);
}

DatasetMapping& DatasetMapping::operator=(DatasetMapping&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, mapped_);
    base_ = other.base_;
    mapped_ = other.mapped_;
    data_ = other.data_;
    size_ = other.size_;
    other.base_ = nullptr;
    other.mapped_ = 0;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

absl::StatusOr<std::unique_ptr<Dataset>> Dataset::Open(const std::string& path,
                                                       const std::string& format) {
  if (format != "llmc-tokens" && format != "raw" && format != "auto") {
    return absl::InvalidArgumentError("dataset format '" + format +
                                      "' is unknown (use llmc-tokens, raw or auto)");
  }
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
  // writer, possibly forever; it is refused below as not a regular file. On
  // a regular file the flag changes nothing, so it stays set.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return absl::NotFoundError("dataset " + path + " cannot be opened: " +
                               std::strerror(errno));
  }
  std::unique_ptr<Dataset> d(new Dataset());
  d->fd_ = fd;
  d->path_ = path;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return absl::UnavailableError("dataset " + path + " cannot be examined (fstat): " +
                                  std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError("dataset " + path +
                                      " is not a regular file (a FIFO, device, socket or "
                                      "directory cannot be a dataset)");
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  int32_t header[256] = {0};
  bool has_header = false;
  // The header decides the format ("auto") or must be valid ("llmc-tokens");
  // a raw file's first bytes are payload like the rest.
  if (format != "raw" && size >= kLlmcHeaderBytes) {
    ssize_t got = ReadPrefix(fd, header, sizeof(header));
    if (got < 0) {
      return absl::UnavailableError("dataset " + path + ": cannot read its header: " +
                                    std::strerror(errno));
    }
    if (static_cast<size_t>(got) != sizeof(header)) {
      return absl::DataLossError("dataset " + path + " shrank while it was opened (" +
                                 std::to_string(got) + " of " + std::to_string(size) +
                                 " bytes readable)");
    }
    has_header = true;
  }
  bool magic = has_header && header[0] == kLlmcMagic;
  std::string fmt = format == "auto" ? (magic ? "llmc-tokens" : "raw") : format;
  d->format_ = fmt;
  d->mappable_ = size > 0 && CanMap(fd);
  if (fmt == "raw") {
    if (size == 0) return absl::InvalidArgumentError("dataset " + path + " is empty");
    d->payload_offset_ = 0;
    d->payload_bytes_ = size;
    return d;
  }
  if (!has_header) {
    return absl::InvalidArgumentError("dataset " + path +
                                      " is too short for an llm.c header (" +
                                      std::to_string(size) + " bytes)");
  }
  if (header[0] != kLlmcMagic) {
    return absl::InvalidArgumentError("dataset " + path + ": bad llm.c magic " +
                                      std::to_string(header[0]) + " (want 20240520)");
  }
  if (header[1] != kLlmcVersion) {
    return absl::InvalidArgumentError("dataset " + path + ": unsupported llm.c version " +
                                      std::to_string(header[1]) + " (want 1)");
  }
  if (header[2] <= 0) {
    return absl::InvalidArgumentError("dataset " + path + ": token count " +
                                      std::to_string(header[2]) + " must be positive");
  }
  uint64_t want = kLlmcHeaderBytes + uint64_t(header[2]) * 2;
  if (size != want) {
    return absl::InvalidArgumentError(
        "dataset " + path + ": header says " + std::to_string(header[2]) +
        " tokens (" + std::to_string(want) + " bytes with header) but the file has " +
        std::to_string(size) + " bytes");
  }
  d->payload_offset_ = kLlmcHeaderBytes;
  d->payload_bytes_ = uint64_t(header[2]) * 2;
  return d;
}

Dataset::~Dataset() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status Dataset::Read(uint64_t offset, uint8_t* dst, size_t n) const {
  if (offset > payload_bytes_ || n > payload_bytes_ - offset) {
    return absl::OutOfRangeError("read past the end of dataset " + path_);
  }
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, dst + done, n - done,
                        static_cast<off_t>(payload_offset_ + offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return absl::DataLossError("dataset " + path_ + " shrank or cannot be read: " +
                                 (r < 0 ? std::strerror(errno) : "unexpected end"));
    }
    done += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

absl::StatusOr<DatasetMapping> Dataset::Map(uint64_t offset, size_t n) const {
  if (n == 0 || offset > payload_bytes_ || n > payload_bytes_ - offset) {
    return absl::OutOfRangeError("mapping [" + std::to_string(offset) + ", +" +
                                 std::to_string(n) + ") is outside dataset " + path_ +
                                 " (" + std::to_string(payload_bytes_) + " bytes)");
  }
  const uint64_t start = payload_offset_ + offset;
  // Mapping past the end of the file would fault on access: refuse a file
  // that shrank since Open, as Read does.
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    return absl::UnavailableError("dataset " + path_ + " cannot be examined (fstat): " +
                                  std::strerror(errno));
  }
  if (static_cast<uint64_t>(st.st_size) < start + n) {
    return absl::DataLossError("dataset " + path_ + " shrank since it was opened");
  }
  const uint64_t aligned = start / PageSize() * PageSize();
  const size_t lead = static_cast<size_t>(start - aligned);
  // Populated at once: one call instead of a fault per page, with read-ahead.
  void* p = ::mmap(nullptr, lead + n, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd_,
                   static_cast<off_t>(aligned));
  if (p == MAP_FAILED) {
    return absl::UnavailableError("dataset " + path_ + " cannot be mapped at " +
                                  std::to_string(start) + ": " + std::strerror(errno));
  }
  DatasetMapping m;
  m.base_ = p;
  m.mapped_ = lead + n;
  m.data_ = static_cast<const uint8_t*>(p) + lead;
  m.size_ = n;
  return m;
}

absl::Status WriteLlmcShard(const std::string& path, const uint16_t* tokens,
                            uint64_t count) {
  if (count == 0 || count > 0x7fffffff) {
    return absl::InvalidArgumentError("token count out of range");
  }
  std::string out(Dataset::kLlmcHeaderBytes + count * 2, '\0');
  int32_t header[256] = {0};
  header[0] = Dataset::kLlmcMagic;
  header[1] = Dataset::kLlmcVersion;
  header[2] = static_cast<int32_t>(count);
  std::memcpy(&out[0], header, sizeof(header));
  std::memcpy(&out[Dataset::kLlmcHeaderBytes], tokens, count * 2);
  return WriteFile(path, out, 0600);
}

}  // namespace gputravel
