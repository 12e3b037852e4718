#include "keyxfer/counter_window.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "keyxfer/cc_channel.h"

namespace gputravel {

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::string& contents) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError("cannot write " + tmp + ": " + std::strerror(errno));
  }
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return absl::UnavailableError("cannot write " + tmp + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    return absl::UnavailableError("cannot fsync " + tmp + ": " + std::strerror(e));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError("cannot rename " + tmp + " to " + path + ": " +
                                  std::strerror(errno));
  }
  std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos
                                       ? 0 : path.find_last_of('/'));
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<CounterWindowAllocator> CounterWindowAllocator::Open(
    std::string state_path, std::string key_id) {
  uint64_t next = kFirstMessageCounter;
  std::ifstream in(state_path);
  if (in) {
    std::string stored_id;
    uint64_t stored_next = 0;
    if (!(in >> stored_id >> stored_next) || stored_next < kFirstMessageCounter) {
      return absl::DataLossError("counter state " + state_path +
                                 " is corrupt; refusing to guess a counter (P4)");
    }
    if (stored_id != key_id) {
      return absl::FailedPreconditionError(
          "counter state " + state_path + " belongs to key " + stored_id +
          ", not " + key_id);
    }
    next = stored_next;
  }
  // A missing file needs no write here: nothing was handed out yet, and
  // Allocate persists before it hands anything out.
  return CounterWindowAllocator(std::move(state_path), std::move(key_id), next);
}

absl::Status CounterWindowAllocator::Persist(uint64_t next) {
  std::ostringstream os;
  os << key_id_ << " " << next << "\n";
  return WriteFileAtomically(path_, os.str());
}

absl::StatusOr<CounterWindow> CounterWindowAllocator::Allocate(uint32_t count) {
  if (count == 0) return absl::InvalidArgumentError("counter window of size 0");
  absl::MutexLock l(&mu_);
  uint64_t end = next_ + count;
  if (end > uint64_t{kLastMessageCounter} + 1) {
    return absl::ResourceExhaustedError(
        "message counters of key " + key_id_ + " exhausted (" +
        std::to_string(uint64_t{kLastMessageCounter} + 1 - next_) +
        " left, " + std::to_string(count) + " asked): re-key the channel");
  }
  absl::Status s = Persist(end);
  if (!s.ok()) return s;
  CounterWindow w{static_cast<uint32_t>(next_), count};
  next_ = end;
  return w;
}

uint64_t CounterWindowAllocator::high_water_mark() const {
  absl::MutexLock l(&mu_);
  return next_;
}

}  // namespace gputravel
