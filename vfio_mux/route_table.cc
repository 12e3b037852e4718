#include "util/hex.h"
#include "vfio_mux/route_table.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/log.h"
#include "vfio_mux/mux_policy.h"

namespace gputravel {
namespace {

using nlohmann::json;

constexpr char kResultOk[] = "ok";
// How many of the journal's last bytes the snapshot keeps, to recognise the
// journal it was taken with.
constexpr size_t kTailBytes = 128;
// Replay reads the journal in blocks of this size.
constexpr size_t kReadBlock = size_t{1} << 20;
// No decision line is this long; a longer one is corruption.
constexpr size_t kMaxLine = size_t{1} << 20;
// A decision's result text is cut to this; names are at most
// kMaxMuxNameLength, so a line is under 2 KiB.
constexpr size_t kMaxResult = 1024;

std::string Errno(int e) { return std::strerror(e); }

// Dumps without throwing: invalid UTF-8 (from a backend's error text, say)
// is replaced rather than aborting the daemon.
std::string Dump(const json& j, int indent = -1) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

// A failure is never recorded as "ok", even if its text says so; its text is
// cut to kMaxResult bytes, so that every journal line stays far below
// kMaxLine whatever a backend reports.
std::string ResultText(const absl::Status& s) {
  if (s.ok()) return kResultOk;
  std::string m(s.message());
  if (m.empty() || m == kResultOk) m = s.ToString();
  if (m.size() > kMaxResult) m = m.substr(0, kMaxResult) + "...";
  return m;
}

// Reads exactly `len` bytes at `offset`.
absl::Status ReadAt(int fd, const std::string& path, uint64_t offset, size_t len,
                    std::string* out) {
  out->resize(len);
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, &(*out)[done], len - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError("cannot read " + path + ": " + Errno(errno));
    }
    if (n == 0) {
      return absl::UnavailableError(path + " ended at byte " + std::to_string(offset + done) +
                                    " while the MUX was reading it: is another process "
                                    "writing it?");
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Writes all of `data` (O_APPEND descriptors append every piece); returns 0
// or an errno.
int WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// One journal line, as RouteTable writes it.
struct Decision {
  std::string action;
  std::string gpu;
  std::string to;
  uint64_t token = 0;
  bool accepted = false;
};

bool ParseDecision(const std::string& line, Decision* d) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  for (const char* f : {"action", "gpu", "from", "to", "result"}) {
    if (!j.contains(f) || !j[f].is_string()) return false;
  }
  if (!j.contains("token") || !j["token"].is_number_unsigned()) return false;
  if (!j.contains("time") || !j["time"].is_number()) return false;
  d->action = j["action"].get<std::string>();
  if (d->action != "route" && d->action != "reset") return false;
  d->gpu = j["gpu"].get<std::string>();
  d->to = j["to"].get<std::string>();
  d->token = j["token"].get<uint64_t>();
  d->accepted = j["result"].get<std::string>() == kResultOk;
  return true;
}

// What an accepted decision did to the table. GPUs no longer configured are
// skipped, as in the snapshot.
void Apply(const Decision& d, Route* route) {
  if (!d.accepted) return;
  if (d.action == "route") route->domain = d.to;
  route->fencing_token = std::max(route->fencing_token, d.token);
}

void Apply(const Decision& d, std::map<std::string, Route>* routes) {
  auto it = routes->find(d.gpu);
  if (it != routes->end()) Apply(d, &it->second);
}

struct ReplayResult {
  uint64_t good_end = 0;  // end of the last well-formed line
  int decisions = 0;      // well-formed lines replayed
};

// Replays the journal's lines in [start, end) onto `routes`. Only the last
// line may be unreadable (a write torn by a crash: never answered); it is
// left out of good_end. Any other unreadable line is DATA_LOSS.
absl::StatusOr<ReplayResult> Replay(int fd, const std::string& path, uint64_t start,
                                    uint64_t end, std::map<std::string, Route>* routes) {
  ReplayResult r;
  r.good_end = start;
  std::string carry, block, pending;
  uint64_t carry_at = start, pending_at = start, pending_end = start;
  bool have_pending = false;
  auto take_pending = [&](bool last) -> absl::Status {
    Decision d;
    if (ParseDecision(pending, &d)) {
      Apply(d, routes);
      r.good_end = pending_end;
      ++r.decisions;
      return absl::OkStatus();
    }
    if (last) return absl::OkStatus();
    return absl::DataLossError(
        "MUX audit log " + path + ": the line at byte " + std::to_string(pending_at) +
        " is not a MUX decision, and lines follow it: the journal is corrupt. Restore it "
        "from a backup; only a torn last line is skipped on start-up");
  };
  for (uint64_t pos = start; pos < end;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kReadBlock, end - pos));
    absl::Status s = ReadAt(fd, path, pos, n, &block);
    if (!s.ok()) return s;
    pos += n;
    carry += block;
    size_t b = 0;
    for (size_t nl; (nl = carry.find('\n', b)) != std::string::npos; b = nl + 1) {
      if (have_pending) {
        s = take_pending(false);
        if (!s.ok()) return s;
      }
      pending.assign(carry, b, nl - b);
      pending_at = carry_at + b;
      pending_end = carry_at + nl + 1;
      have_pending = true;
    }
    carry.erase(0, b);
    carry_at += b;
    if (carry.size() > kMaxLine && pos < end) {
      return absl::DataLossError("MUX audit log " + path + ": the line at byte " +
                                 std::to_string(carry_at) +
                                 " is longer than any MUX decision: the journal is corrupt. "
                                 "Restore it from a backup");
    }
  }
  if (have_pending) {
    // A fragment without its newline after it is the torn last write.
    absl::Status s = take_pending(/*last=*/carry.empty());
    if (!s.ok()) return s;
  }
  return r;
}

// Where the journal's last complete line ends (0 if it has none).
absl::StatusOr<uint64_t> EndOfLastLine(int fd, const std::string& path, uint64_t size) {
  std::string block;
  uint64_t end = size;
  while (end > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(4096, end));
    absl::Status s = ReadAt(fd, path, end - n, n, &block);
    if (!s.ok()) return s;
    size_t nl = block.find_last_of('\n');
    if (nl != std::string::npos) return end - n + nl + 1;
    end -= n;
  }
  return 0;
}

// Flushes the directory holding `path`, so that a file created or renamed
// in it survives a crash. Filesystems that cannot flush a directory (EINVAL)
// need no flush.
absl::Status SyncDirOf(const std::string& path, const std::function<int(int)>& sync,
                       const std::string& what) {
  const std::string dir = DirectoryOf(path);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    return absl::UnavailableError("cannot open " + dir + " (the directory of " + what + " " +
                                  path + "): " + Errno(errno));
  }
  int rc = sync(dfd);
  int e = errno;
  ::close(dfd);
  if (rc != 0 && e != EINVAL) {
    return absl::UnavailableError("cannot flush " + dir + " (the directory of " + what + " " +
                                  path + "): " + Errno(e));
  }
  return absl::OkStatus();
}

}  // namespace

RouteTable::RouteTable(RoutingBackend* backend, std::string state_path,
                       std::string audit_path, RouteTableOptions options)
    : backend_(backend), state_path_(std::move(state_path)),
      audit_path_(std::move(audit_path)), options_([&] {
        if (!options.sync) options.sync = [](int fd) { return ::fdatasync(fd); };
        return std::move(options);
      }()) {}

RouteTable::~RouteTable() {
  absl::MutexLock l(&mu_);
  if (journal_fd_ >= 0) ::close(journal_fd_);
  journal_fd_ = -1;
}

absl::StatusOr<std::unique_ptr<RouteTable>> RouteTable::Open(
    RoutingBackend* backend, std::string state_path, std::string audit_path,
    RouteTableOptions options) {
  std::unique_ptr<RouteTable> t(new RouteTable(backend, std::move(state_path),
                                               std::move(audit_path), std::move(options)));
  auto gpus = backend->ListGpus();
  if (!gpus.ok()) return gpus.status();
  absl::MutexLock l(&t->mu_);
  for (const auto& g : *gpus) t->routes_[g.name] = Route{};
  absl::Status s = t->LoadLocked();
  if (!s.ok()) return s;
  return t;
}

absl::Status RouteTable::LoadLocked() {
  // 1. The snapshot, if any.
  struct stat st;
  const bool have_snapshot = ::stat(state_path_.c_str(), &st) == 0;
  if (!have_snapshot && errno != ENOENT) {
    return absl::UnavailableError("cannot read MUX state " + state_path_ + ": " + Errno(errno));
  }
  bool legacy = false, complete = false;
  uint64_t covered = 0;
  std::string tail, covered_path;
  if (have_snapshot) {
    auto j = ReadJsonFile(state_path_);
    if (!j.ok()) {
      return absl::DataLossError("MUX state " + state_path_ +
                                 " is unreadable; refusing to forget fencing tokens: " +
                                 std::string(j.status().message()));
    }
    if (j->contains("gpus") && (*j)["gpus"].is_object()) {
      for (auto it = (*j)["gpus"].begin(); it != (*j)["gpus"].end(); ++it) {
        auto r = routes_.find(it.key());
        if (r == routes_.end()) continue;  // GPU no longer configured
        const auto& v = it.value();
        if (v.contains("domain") && v["domain"].is_string()) {
          r->second.domain = v["domain"].get<std::string>();
        }
        if (v.contains("token") && v["token"].is_number_unsigned()) {
          r->second.fencing_token = v["token"].get<uint64_t>();
        }
      }
    }
    if (!j->contains("journal")) {
      // Written by a MUX that rewrote this file after every decision: it is
      // complete, and the audit log holds nothing newer.
      legacy = true;
    } else {
      const json& jj = (*j)["journal"];
      bool ok = jj.is_object() && jj.contains("bytes") && jj["bytes"].is_number_unsigned() &&
                jj.contains("tail_hex") && jj["tail_hex"].is_string() &&
                jj.contains("complete") && jj["complete"].is_boolean();
      if (ok) {
        covered = jj["bytes"].get<uint64_t>();
        complete = jj["complete"].get<bool>();
        if (jj.contains("path") && jj["path"].is_string()) {
          covered_path = jj["path"].get<std::string>();
        }
        auto t = HexDecode(jj["tail_hex"].get<std::string>());
        ok = t.ok() && t->size() == std::min<uint64_t>(covered, kTailBytes) &&
             (covered == 0 || t->back() == '\n');
        if (ok) tail = *t;
      }
      if (!ok) {
        return absl::DataLossError("MUX state " + state_path_ +
                                   ": malformed \"journal\" section; refusing to forget "
                                   "fencing tokens. Restore the file from a backup");
      }
    }
  }

  auto not_continued = [&](uint64_t size) {
    return absl::DataLossError(
        "MUX audit log " + audit_path_ + " (" + std::to_string(size) +
        " bytes) does not continue the journal that the route snapshot " + state_path_ +
        " was taken with (" + std::to_string(covered) + " bytes of " +
        (covered_path.empty() ? audit_path_ : covered_path) +
        "): it was truncated, rotated or replaced after the MUX last started, so the "
        "routes and fencing tokens accepted since then would be forgotten. Put that "
        "journal back. If it is lost, raise every GPU's \"token\" in " + state_path_ +
        " above any token the orchestrator may have used (its trip counter), set "
        "\"complete\": true under \"journal\", and start again");
  };

  // 2. The journal, kept open for appending.
  const bool journal_existed = ::access(audit_path_.c_str(), F_OK) == 0;
  if (!journal_existed && have_snapshot && !legacy && covered > 0 && !complete) {
    return not_continued(0);  // refused before creating an empty one
  }
  journal_fd_ = ::open(audit_path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  // 0600 whatever mode a restored or rotated copy has.
  if (journal_fd_ >= 0 && ::fchmod(journal_fd_, 0600) != 0) {
    const int e = errno;
    ::close(journal_fd_);
    journal_fd_ = -1;
    errno = e;
  }
  if (journal_fd_ < 0) {
    return absl::UnavailableError("cannot open MUX audit log " + audit_path_ + ": " +
                                  Errno(errno) + " (check audit_log in the MUX configuration "
                                  "and its directory's permissions)");
  }
  if (::fstat(journal_fd_, &st) != 0) {
    return absl::UnavailableError("cannot stat MUX audit log " + audit_path_ + ": " +
                                  Errno(errno));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);

  // 3. Where replay starts: after what the snapshot covers.
  uint64_t start = 0;
  if (legacy) {
    auto e = EndOfLastLine(journal_fd_, audit_path_, size);
    if (!e.ok()) return e.status();
    start = *e;
  } else if (have_snapshot) {
    bool continues = size >= covered;
    if (continues && covered > 0) {
      std::string got;
      absl::Status s = ReadAt(journal_fd_, audit_path_, covered - tail.size(), tail.size(), &got);
      if (!s.ok()) return s;
      continues = got == tail;
    }
    if (continues) {
      start = covered;
    } else if (complete) {
      GT_LOG(0, "MUX audit log ", audit_path_, " is not the journal the route snapshot ",
             state_path_, " was taken with (rotated while the MUX was stopped?); the "
             "snapshot was written at a clean shutdown, so it is complete: starting from it");
      auto e = EndOfLastLine(journal_fd_, audit_path_, size);
      if (!e.ok()) return e.status();
      start = *e;
    } else {
      return not_continued(size);
    }
  }

  // 4. Replay, then cut a torn last line so that appends start on a line.
  auto r = Replay(journal_fd_, audit_path_, start, size, &routes_);
  if (!r.ok()) return r.status();
  if (r->good_end < size) {
    std::string torn;
    size_t show = static_cast<size_t>(std::min<uint64_t>(size - r->good_end, 200));
    if (!ReadAt(journal_fd_, audit_path_, r->good_end, show, &torn).ok()) torn.clear();
    GT_LOG(0, "MUX audit log ", audit_path_, ": cutting a torn last line (",
           size - r->good_end, " bytes at byte ", r->good_end,
           ", written when the MUX stopped and never answered): \"",
           absl::CHexEscape(torn), "\"");
    if (::ftruncate(journal_fd_, static_cast<off_t>(r->good_end)) != 0 ||
        options_.sync(journal_fd_) != 0) {
      return absl::UnavailableError("cannot cut the torn last line of MUX audit log " +
                                    audit_path_ + ": " + Errno(errno));
    }
  }
  journal_bytes_ = r->good_end;
  if (!journal_existed) {
    // The new file's directory entry must outlive a crash, as its lines will.
    absl::Status s = SyncDirOf(audit_path_, options_.sync, "MUX audit log");
    if (!s.ok()) return s;
  }
  if (r->decisions > 0) {
    GT_LOG(1, "route table: ", r->decisions, " decision(s) replayed from ", audit_path_,
           " after the snapshot ", have_snapshot ? state_path_ : "(none)");
  }

  // 5. A fresh snapshot covering the whole journal: the next start replays
  // only what follows.
  return WriteSnapshotLocked(/*complete=*/false);
}

absl::Status RouteTable::WriteSnapshotLocked(bool complete, uint64_t covered) {
  std::string tail;
  size_t n = static_cast<size_t>(std::min<uint64_t>(covered, kTailBytes));
  absl::Status s = ReadAt(journal_fd_, audit_path_, covered - n, n, &tail);
  if (!s.ok()) return s;
  json j;
  j["gpus"] = json::object();
  for (const auto& r : routes_) {
    // What the journal holds, not a decision it could not record.
    auto u = unjournaled_.find(r.first);
    const Route& route = u == unjournaled_.end() ? r.second : u->second;
    j["gpus"][r.first] = {{"domain", route.domain}, {"token", route.fencing_token}};
  }
  j["journal"] = {{"path", audit_path_},
                  {"bytes", covered},
                  {"tail_hex", HexEncode(tail)},
                  {"complete", complete}};
  const std::string text = Dump(j, 2) + "\n";
  const std::string tmp = state_path_ + ".tmp";
  // A leftover is removed, never written into: the new file is the MUX's own.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    return absl::UnavailableError("cannot remove " + tmp + ": " + Errno(errno));
  }
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || ::fchmod(fd, 0600) != 0) {  // whatever the umask
    const int e = errno;
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError("cannot write MUX state " + tmp + ": " + Errno(e));
  }
  int e = WriteAll(fd, text);
  if (e == 0 && options_.sync(fd) != 0) e = errno;
  ::close(fd);
  if (e != 0) {
    return absl::UnavailableError("cannot write MUX state " + tmp + ": " + Errno(e));
  }
  if (::rename(tmp.c_str(), state_path_.c_str()) != 0) {
    return absl::UnavailableError("cannot rename " + tmp + " to " + state_path_ + ": " +
                                  Errno(errno));
  }
  return SyncDirOf(state_path_, options_.sync, "MUX state");
}

namespace {

// What identifies a failed decision for deduplication: all of its journal
// line but the time.
std::string FailureKey(const std::string& action, const std::string& from,
                       const std::string& to, uint64_t token, const absl::Status& result) {
  return Dump(json{{"action", action}, {"from", from}, {"to", to}, {"token", token},
                   {"result", ResultText(result)}});
}

}  // namespace

absl::Status RouteTable::JournalLocked(const std::string& action, const std::string& gpu,
                                       const std::string& from, const std::string& to,
                                       uint64_t token, const absl::Status& result) {
  if (journal_fd_ < 0) {
    return absl::FailedPreconditionError("the route table is closed (the MUX is stopping)");
  }
  json j = {
      {"time", std::chrono::duration<double>(
                   std::chrono::system_clock::now().time_since_epoch()).count()},
      {"action", action}, {"gpu", gpu}, {"from", from}, {"to", to},
      {"token", token},
      {"result", ResultText(result)}};
  const std::string line = Dump(j) + "\n";
  int e = WriteAll(journal_fd_, line);
  if (e != 0) {
    // Take back a partial line, so that the next one starts on its own line.
    if (::ftruncate(journal_fd_, static_cast<off_t>(journal_bytes_)) != 0) {
      unwritable_ = "could not take back a partial line of MUX audit log " + audit_path_ +
                    " (" + Errno(errno) + ") after a failed append (" + Errno(e) + ")";
    }
    return absl::UnavailableError("cannot append to MUX audit log " + audit_path_ + ": " +
                                  Errno(e) + " (free space on its filesystem?)");
  }
  if (options_.sync(journal_fd_) != 0) {
    e = errno;
    // After a failed flush the kernel may have dropped the data: only a
    // restart (which re-reads the journal) knows what is durable.
    unwritable_ = "could not flush MUX audit log " + audit_path_ + " (" + Errno(e) + ")";
    return absl::UnavailableError("cannot flush MUX audit log " + audit_path_ + ": " +
                                  Errno(e));
  }
  journal_bytes_ += line.size();
  if (result.ok()) {
    last_failure_.erase(gpu);
  } else {
    last_failure_[gpu] = FailureKey(action, from, to, token, result);
  }
  // The journal's own view of a GPU whose table is ahead of it follows this
  // line as a replay would, before any snapshot below is taken of it.
  auto behind = unjournaled_.find(gpu);
  if (behind != unjournaled_.end()) {
    Apply(Decision{action, gpu, to, token, result.ok()}, &behind->second);
    const Route& table = routes_[gpu];
    if (behind->second.domain == table.domain &&
        behind->second.fencing_token == table.fencing_token) {
      unjournaled_.erase(behind);
    }
  }
  CompactJournalLocked();
  return absl::OkStatus();
}

void RouteTable::CompactJournalLocked() {
  if (options_.journal_max_bytes == 0 || journal_bytes_ < options_.journal_max_bytes) return;
  // 1. A snapshot of the table as it is, covering none of the journal: a
  // crash before step 3 replays the old journal whole on top of it, which
  // ends where the snapshot is.
  absl::Status s = WriteSnapshotLocked(/*complete=*/false, /*covered=*/0);
  if (!s.ok()) {
    GT_LOG(0, "MUX audit log ", audit_path_, " not compacted (", journal_bytes_,
           " bytes; retried at the next decision): ", s.message());
    return;
  }
  // 2. The journal steps aside; a crash now leaves no journal and a snapshot
  // that covers none, which Open accepts.
  const std::string previous = audit_path_ + ".1";
  if (::rename(audit_path_.c_str(), previous.c_str()) != 0) {
    GT_LOG(0, "MUX audit log ", audit_path_, " not compacted: cannot rename it to ", previous,
           ": ", Errno(errno), "; appends continue (replay from the start is equivalent)");
    return;
  }
  // 3. A new journal.
  int fd = ::open(audit_path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd >= 0 && ::fchmod(fd, 0600) != 0) {
    const int e = errno;
    ::close(fd);
    fd = -1;
    errno = e;
  }
  if (fd < 0) {
    unwritable_ = "could not start a new MUX audit log " + audit_path_ + " after moving the " +
                  "old one to " + previous + " (" + Errno(errno) + ")";
    return;
  }
  ::close(journal_fd_);
  journal_fd_ = fd;
  journal_bytes_ = 0;
  s = SyncDirOf(audit_path_, options_.sync, "MUX audit log");
  if (!s.ok()) {
    unwritable_ = "could not flush the directory of the new MUX audit log " + audit_path_ +
                  ": " + std::string(s.message());
    return;
  }
  GT_LOG(1, "MUX audit log compacted: the table is in ", state_path_, ", earlier decisions in ",
         previous);
}

bool RouteTable::RepeatsLastFailureLocked(const std::string& action, const std::string& gpu,
                                          const std::string& from, const std::string& to,
                                          uint64_t token, const absl::Status& result) {
  auto it = last_failure_.find(gpu);
  return it != last_failure_.end() && it->second == FailureKey(action, from, to, token, result);
}

absl::Status RouteTable::CheckWritableLocked() {
  if (unwritable_.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError("the MUX accepts no route or reset: " + unwritable_ +
                                       "; restart the MUX (it recovers from its journal)");
}

namespace {

// A failure whose journal line could not be written says both.
absl::Status NotJournaled(const absl::Status& decision, const absl::Status& journal) {
  if (journal.ok()) return decision;
  return absl::Status(decision.code(), std::string(decision.message()) +
                                           " (and this refusal was not journaled: " +
                                           std::string(journal.message()) + ")");
}

}  // namespace

namespace {

constexpr absl::string_view kFencingRefusalPayload = "type.gputravel/mux-fencing-refusal";

// A refusal of the request's token, for the caller (it names only the
// request's GPU and token) and marked so the metrics can tell it.
absl::Status FencingRefusal(absl::Status status) {
  status = ForCaller(std::move(status));
  status.SetPayload(kFencingRefusalPayload, absl::Cord("1"));
  return status;
}

}  // namespace

bool IsFencingRefusal(const absl::Status& status) {
  return status.GetPayload(kFencingRefusalPayload).has_value();
}

absl::Status RouteTable::CheckKnownLocked(const std::string& gpu) {
  // Neither the other GPUs' names nor the configuration's path: the caller
  // learns only that its own name is unknown.
  if (routes_.count(gpu) == 0) {
    return ForCaller(absl::NotFoundError("unknown GPU '" + gpu + "' at this MUX"));
  }
  return absl::OkStatus();
}

absl::Status RouteTable::BeginLocked(const std::string& gpu) {
  if (busy_.count(gpu) != 0) {
    return ForCaller(absl::UnavailableError(
        "another route or reset of GPU " + gpu + " is in progress at the MUX; retry when it "
        "has been answered"));
  }
  busy_.insert(gpu);
  return absl::OkStatus();
}

void RouteTable::EndLocked(const std::string& gpu) { busy_.erase(gpu); }

absl::StatusOr<std::string> RouteTable::BeginDecisionLocked(const std::string& gpu,
                                                             uint64_t fencing_token,
                                                             const char* what) {
  absl::Status known = CheckKnownLocked(gpu);
  if (!known.ok()) return known;
  absl::Status writable = CheckWritableLocked();
  if (!writable.ok()) return writable;
  const Route& cur = routes_[gpu];
  if (fencing_token < cur.fencing_token) {
    return FencingRefusal(absl::FailedPreconditionError(
        "stale fencing token " + std::to_string(fencing_token) + " for " + what + gpu +
        ": token " + std::to_string(cur.fencing_token) + " was already accepted"));
  }
  if (fencing_token > kMaxFencingToken ||
      fencing_token - cur.fencing_token > kMaxFencingTokenStep) {
    return FencingRefusal(absl::OutOfRangeError(
        "fencing token " + std::to_string(fencing_token) + " for " + what + gpu +
        " is too far ahead of the last accepted token " +
        std::to_string(cur.fencing_token) + ": a token may be at most 2^32 above it and "
        "never above 2^63-1"));
  }
  absl::Status begun = BeginLocked(gpu);
  if (!begun.ok()) return begun;
  return cur.domain;
}

absl::StatusOr<Route> RouteTable::RouteTo(const std::string& gpu,
                                          const std::string& domain,
                                          uint64_t fencing_token) {
  // Checked before the lock and before any journal line: a refused request
  // leaves no trace but the MUX's log.
  absl::Status valid = ValidateMuxName("GPU", gpu);
  if (!valid.ok()) return valid;
  if (!domain.empty()) {
    valid = ValidateMuxName("domain", domain);
    if (!valid.ok()) return valid;
    if (options_.domains.count(domain) == 0) return DomainNotConfigured(domain);
  }
  std::string from;
  {
    absl::MutexLock l(&mu_);
    auto begun = BeginDecisionLocked(gpu, fencing_token, "");
    if (!begun.ok()) return begun.status();
    from = *std::move(begun);
  }
  GT_LOG(3, "route ", gpu, ": moving from '", from, "' to '", domain, "' (token ",
         fencing_token, ")");
  // The move runs without the table's lock (a detach may wait for a guest
  // for tens of seconds): reads and other GPUs go on meanwhile, and the GPU
  // is marked busy, so no other decision about it can interleave. Even when
  // the table already names `domain`: the table can be behind the GPU (a
  // move that took effect but was reported failed, or a crash between a
  // move and its journal line), and a route home that trusted it would
  // leave the GPU with a holder while every later step fails. A backend
  // asked to move from a domain to itself confirms the GPU is there and
  // repairs what it can (RoutingBackend::Move).
  absl::Status moved = backend_->Move(gpu, from, domain);
  GT_LOG(3, "route ", gpu, ": backend move: ", moved.ToString());
  absl::MutexLock l(&mu_);
  EndLocked(gpu);
  if (!moved.ok()) {
    // An attempted move is journaled with its (bounded) result: the GPU may
    // have changed state on the way. The same failure again, with nothing
    // journaled for the GPU in between, adds nothing to the record.
    if (RepeatsLastFailureLocked("route", gpu, from, domain, fencing_token, moved)) {
      return moved;
    }
    return NotJournaled(moved, JournalLocked("route", gpu, from, domain, fencing_token, moved));
  }
  // The GPU is where it was asked to be; the table follows it even if the
  // journal fails below (the caller then gets an error, not an acceptance).
  Route& cur = routes_[gpu];
  // Nothing to make durable: the owner and the token (fencing) are as
  // journaled before.
  if (cur.domain == domain && fencing_token <= cur.fencing_token &&
      unjournaled_.count(gpu) == 0) {
    return cur;
  }
  const Route journaled = cur;
  cur.domain = domain;
  cur.fencing_token = std::max(cur.fencing_token, fencing_token);
  absl::Status j = JournalLocked("route", gpu, from, domain, fencing_token, moved);
  if (!j.ok()) {
    unjournaled_.emplace(gpu, journaled);  // keeps an earlier journaled route
    return absl::Status(j.code(), "moved " + gpu + " from '" + from + "' to '" + domain +
                                      "' but could not record it durably: " +
                                      std::string(j.message()));
  }
  return cur;
}

absl::StatusOr<Route> RouteTable::Get(const std::string& gpu) {
  absl::Status valid = ValidateMuxName("GPU", gpu);
  if (!valid.ok()) return valid;
  absl::MutexLock l(&mu_);
  absl::Status known = CheckKnownLocked(gpu);
  if (!known.ok()) return known;
  return routes_[gpu];
}

absl::Status RouteTable::Reset(const std::string& gpu, uint64_t fencing_token) {
  absl::Status valid = ValidateMuxName("GPU", gpu);
  if (!valid.ok()) return valid;
  std::string domain;
  {
    absl::MutexLock l(&mu_);
    auto begun = BeginDecisionLocked(gpu, fencing_token, "reset of ");
    if (!begun.ok()) return begun.status();
    domain = *std::move(begun);
  }
  // As for a move: the reset's sysfs writes run without the lock.
  absl::Status r = backend_->Reset(gpu);
  absl::MutexLock l(&mu_);
  EndLocked(gpu);
  if (!r.ok()) {
    if (RepeatsLastFailureLocked("reset", gpu, domain, domain, fencing_token, r)) return r;
    return NotJournaled(r, JournalLocked("reset", gpu, domain, domain, fencing_token, r));
  }
  Route& cur = routes_[gpu];
  const Route journaled = cur;
  cur.fencing_token = std::max(cur.fencing_token, fencing_token);
  absl::Status j = JournalLocked("reset", gpu, domain, domain, fencing_token, r);
  if (!j.ok()) {
    // Its token is ahead of the journal now: a route repeating it must be
    // journaled before it is answered.
    unjournaled_.emplace(gpu, journaled);
    return absl::Status(j.code(), "reset " + gpu + " but could not record it durably: " +
                                      std::string(j.message()));
  }
  return absl::OkStatus();
}

std::map<std::string, Route> RouteTable::All() {
  absl::MutexLock l(&mu_);
  return routes_;
}

absl::Status RouteTable::Close() {
  absl::MutexLock l(&mu_);
  // A move or reset in flight is answered (and journaled) first.
  mu_.Await(absl::Condition(
      +[](std::set<std::string>* busy) { return busy->empty(); }, &busy_));
  if (journal_fd_ < 0) return absl::OkStatus();
  absl::Status s = absl::OkStatus();
  if (unwritable_.empty()) {
    s = WriteSnapshotLocked(/*complete=*/true);
  } else {
    s = absl::FailedPreconditionError("no final MUX snapshot written: " + unwritable_ +
                                      "; the next start replays the journal");
  }
  ::close(journal_fd_);
  journal_fd_ = -1;
  if (unwritable_.empty()) unwritable_ = "the route table is closed (the MUX is stopping)";
  return s;
}

}  // namespace gputravel
