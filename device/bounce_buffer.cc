#include "device/bounce_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gputravel {
namespace {

absl::Status CheckGeometry(uint32_t slots, uint32_t slot_size) {
  if (slots == 0 || slots > 64) {
    return absl::InvalidArgumentError("bounce buffer needs 1..64 slots, got " +
                                      std::to_string(slots));
  }
  if (slot_size == 0 || slot_size % 32 != 0 || slot_size > (64u << 20)) {
    return absl::InvalidArgumentError(
        "bounce slot size must be a non-zero multiple of 32 bytes up to 64 MiB, got " +
        std::to_string(slot_size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BounceBuffer>> BounceBuffer::Create(
    const std::string& path, uint32_t slots, uint32_t slot_size) {
  absl::Status g = CheckGeometry(slots, slot_size);
  if (!g.ok()) return g;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError("cannot create bounce buffer " + path + ": " +
                                  std::strerror(errno));
  }
  const size_t len = FileBytes(slots, slot_size);
  // Space reserved now, not only the size set: on a full tmpfs a sparse
  // ring would be created and mapped without complaint, and the first write
  // into it would kill the holder with SIGBUS.
  if (int e = ::posix_fallocate(fd, 0, static_cast<off_t>(len)); e != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    return absl::ResourceExhaustedError("cannot reserve " + std::to_string(len) +
                                        " bytes for bounce buffer " + path + ": " +
                                        std::strerror(e));
  }
  // Populated up front: one call instead of a page fault per 4 KiB on the
  // ring's first pass.
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    ::unlink(path.c_str());
    return absl::ResourceExhaustedError("cannot map bounce buffer " + path);
  }
  std::unique_ptr<BounceBuffer> b(new BounceBuffer());
  b->path_ = path;
  b->base_ = static_cast<uint8_t*>(p);
  b->length_ = len;
  b->slots_ = slots;
  b->slot_size_ = slot_size;
  b->owner_ = true;
  return b;
}

absl::StatusOr<std::unique_ptr<BounceBuffer>> BounceBuffer::OpenReadOnly(
    int dir_fd, const std::string& dir, const std::string& path, uint32_t slots,
    uint32_t slot_size) {
  absl::Status g = CheckGeometry(slots, slot_size);
  if (!g.ok()) return g;
  std::string base = dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (base.empty() || base[0] != '/') {
    return absl::FailedPreconditionError("the shared memory directory '" + dir +
                                         "' is not an absolute path");
  }
  const std::string prefix = base == "/" ? base : base + "/";
  std::string name = path.compare(0, prefix.size(), prefix) == 0 ? path.substr(prefix.size())
                                                                 : std::string();
  name.erase(0, name.find_first_not_of('/'));  // "dir//name" is "dir/name"
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return absl::PermissionDeniedError("bounce buffer " + path +
                                       " is not a file directly in this domain's shared "
                                       "memory " + base + "; the device reaches no other");
  }
  // Not through a symbolic link, and only a regular file (no device or
  // FIFO that would block or map something else).
  int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ELOOP) {
    return absl::PermissionDeniedError("bounce buffer " + path +
                                       " is a symbolic link; the device follows none");
  }
  if (fd < 0) {
    return absl::NotFoundError("cannot open bounce buffer " + path + ": " +
                               std::strerror(errno));
  }
  struct stat st;
  const size_t len = FileBytes(slots, slot_size);
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError("bounce buffer " + path + " is not a regular file");
  }
  // One name only: a hard link would let a domain announce, from its own
  // directory, a file that also lies in another domain's (the IOMMU gives a
  // device no page two TDs share). Checked when the ring is mapped; a link
  // made later reaches nothing new, as that domain would have to attach it
  // (and the device drops its rings at the next key exchange).
  if (st.st_nlink == 0) {
    ::close(fd);
    return absl::NotFoundError("bounce buffer " + path + " was removed while it was opened");
  }
  if (st.st_nlink != 1) {
    ::close(fd);
    return absl::PermissionDeniedError(
        "bounce buffer " + path + " has " + std::to_string(st.st_nlink) +
        " names (hard links): the device maps only a file that is its domain's alone");
  }
  if (static_cast<size_t>(st.st_size) != len) {
    ::close(fd);
    return absl::InvalidArgumentError(
        "bounce buffer " + path + " has " + std::to_string(st.st_size) + " bytes, not the " +
        std::to_string(len) + " of " + std::to_string(slots) + " slots of " +
        std::to_string(slot_size) + " bytes and their tags announced");
  }
  // Not populated: each lane of a write maps the whole ring but reads only
  // its own slots, so its pages are mapped as the copy engine first reads
  // them (16 at a time, the kernel's fault-around), not all of them per lane
  // (k lanes would each map, and then unmap, the whole ring).
  void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return absl::ResourceExhaustedError("cannot map " + path);
  // The owner can truncate the file while the device reads it (GuardReads).
  absl::Status guard = TruncationGuard::Install();
  if (!guard.ok()) {
    ::munmap(p, len);
    return guard;
  }
  std::unique_ptr<BounceBuffer> b(new BounceBuffer());
  b->path_ = path;
  b->base_ = static_cast<uint8_t*>(p);
  b->length_ = len;
  b->slots_ = slots;
  b->slot_size_ = slot_size;
  return b;
}

BounceBuffer::~BounceBuffer() {
  if (base_ != nullptr) ::munmap(base_, length_);
  if (owner_) Unlink();
}

void BounceBuffer::Unlink() {
  if (!path_.empty()) ::unlink(path_.c_str());
  owner_ = false;
}

}  // namespace gputravel
