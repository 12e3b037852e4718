#include "tests/power_cut_image.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace gputravel {
namespace power_cut {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

bool Matches(const Config& c, const std::string& path) {
  for (const auto& p : c.prefixes) {
    if (path.compare(0, p.size(), p) == 0) return true;
  }
  return false;
}

std::set<std::string> Dirs(const Config& c) {
  std::set<std::string> out;
  for (const auto& p : c.prefixes) out.insert(DirOf(p));
  return out;
}

// An inode's identity: device, number and birth time, so that a number the
// file system reuses for a new file does not take the old file's image.
// Where the file system keeps no birth time, the number alone.
std::string Key(int dirfd, const char* path, int flags) {
  struct statx stx;
  if (::statx(dirfd, path, flags | AT_SYMLINK_NOFOLLOW, STATX_INO | STATX_BTIME, &stx) != 0) {
    return "";
  }
  std::string key = std::to_string(stx.stx_dev_major) + "." +
                    std::to_string(stx.stx_dev_minor) + "_" + std::to_string(stx.stx_ino);
  if (stx.stx_mask & STATX_BTIME) {
    key += "_" + std::to_string(stx.stx_btime.tv_sec) + "." +
           std::to_string(stx.stx_btime.tv_nsec);
  }
  return key;
}

// Copies everything readable from `in` to a new file `to` (mode `mode`),
// through a temporary and a rename, so `to` is always whole.
bool CopyInto(int in, const std::string& to, mode_t mode, std::string* error) {
  const std::string tmp = to + ".tmp";
  int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) {
    *error = Errno("creating " + tmp);
    return false;
  }
  char buf[1 << 16];
  off_t at = 0;
  bool ok = true;
  while (ok) {
    ssize_t n = ::pread(in, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = Errno("reading the file copied to " + to);
      ok = false;
      break;
    }
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(out, buf + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        *error = Errno("writing " + tmp);
        ok = false;
        break;
      }
      done += w;
    }
    at += n;
  }
  if (ok && ::fchmod(out, mode & 07777) != 0) {
    *error = Errno("chmod " + tmp);
    ok = false;
  }
  ::close(out);
  if (ok && ::rename(tmp.c_str(), to.c_str()) != 0) {
    *error = Errno("renaming " + tmp);
    ok = false;
  }
  return ok;
}

// Copies file `from` (opened read-only) to `to`.
bool CopyFile(const std::string& from, const std::string& to, std::string* error) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    *error = Errno("opening " + from);
    return false;
  }
  struct stat st;
  bool ok = ::fstat(in, &st) == 0;
  if (!ok) *error = Errno("stat " + from);
  ok = ok && CopyInto(in, to, st.st_mode, error);
  ::close(in);
  return ok;
}

// The tracked regular files in `dir`, by path, with their inode keys.
bool ListTracked(const Config& c, const std::string& dir, std::map<std::string, std::string>* out,
                 std::string* error) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return true;
    *error = Errno("listing " + dir);
    return false;
  }
  while (struct dirent* e = ::readdir(d)) {
    const std::string path = dir + "/" + e->d_name;
    if (!Matches(c, path)) continue;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const std::string key = Key(AT_FDCWD, path.c_str(), 0);
    if (!key.empty()) (*out)[path] = key;
  }
  ::closedir(d);
  return true;
}

bool WriteWhole(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    *error = Errno("creating " + tmp);
    return false;
  }
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = Errno("writing " + path);
    return false;
  }
  return true;
}

std::string ReadWhole(const std::string& path) {
  std::string out;
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t next = s.find(sep, at);
    if (next == std::string::npos) next = s.size();
    out.push_back(s.substr(at, next - at));
    at = next + 1;
  }
  return out;
}

}  // namespace

std::string FormatConfig(const Config& c) {
  std::string track;
  for (const auto& p : c.prefixes) track += (track.empty() ? "" : ",") + p;
  return "cut=" + std::to_string(c.cut_at) + ";shadow=" + c.shadow + ";track=" + track;
}

bool ParseConfig(const std::string& text, Config* out, std::string* error) {
  *out = Config();
  for (const std::string& field : Split(text, ';')) {
    const size_t eq = field.find('=');
    const std::string key = field.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : field.substr(eq + 1);
    if (key == "cut") {
      char* end = nullptr;
      out->cut_at = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || out->cut_at < 0) {
        *error = "cut=" + value + " is not a sync number";
        return false;
      }
    } else if (key == "shadow") {
      out->shadow = value;
    } else if (key == "track") {
      for (const std::string& p : Split(value, ',')) {
        if (p.empty() || p[0] != '/') {
          *error = "track prefix '" + p + "' is not an absolute path";
          return false;
        }
        out->prefixes.push_back(p);
      }
    } else {
      *error = "unknown field '" + key + "' in " + kEnv + "=" + text;
      return false;
    }
  }
  if (out->shadow.empty() || out->prefixes.empty()) {
    *error = std::string(kEnv) + "=" + text + " names no shadow directory or no tracked prefix";
    return false;
  }
  return true;
}

bool DurableImage::Begin(std::string* error) {
  if (::mkdir((config_.shadow + "/inodes").c_str(), 0700) != 0 && errno != EEXIST) {
    *error = Errno("creating " + config_.shadow + "/inodes");
    return false;
  }
  names_.clear();
  for (const std::string& dir : Dirs(config_)) {
    if (!ListTracked(config_, dir, &names_, error)) return false;
  }
  for (const auto& [path, key] : names_) {
    if (!CopyFile(path, config_.shadow + "/inodes/" + key, error)) return false;
  }
  return SaveNames(error);
}

bool DurableImage::Tracked(int fd, std::string* path, bool* is_dir) const {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[4096];
  ssize_t n = ::readlink(link, target, sizeof target - 1);
  if (n <= 0) return false;
  *path = std::string(target, n);
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  *is_dir = S_ISDIR(st.st_mode);
  if (*is_dir) return Dirs(config_).count(*path) > 0;
  return S_ISREG(st.st_mode) && st.st_nlink > 0 && Matches(config_, *path);
}

bool DurableImage::LogSync(long n, const std::string& path, std::string* error) {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const long long ms = static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
  const std::string line = std::to_string(n) + "\t" + std::to_string(ms) + "\t" + path + "\n";
  int fd = ::open((config_.shadow + "/syncs").c_str(),
                  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    *error = Errno("logging to " + config_.shadow + "/syncs");
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::close(fd);
  return true;
}

void DurableImage::MarkCut(long n, const std::string& path) {
  std::string ignored;
  (void)WriteWhole(config_.shadow + "/cut", std::to_string(n) + "\t" + path + "\n", &ignored);
}

bool DurableImage::Synced(int fd, const std::string& path, bool is_dir, std::string* error) {
  if (is_dir) {
    for (auto it = names_.begin(); it != names_.end();) {
      it = DirOf(it->first) == path ? names_.erase(it) : std::next(it);
    }
    std::map<std::string, std::string> now;
    if (!ListTracked(config_, path, &now, error)) return false;
    names_.insert(now.begin(), now.end());
    return SaveNames(error);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    *error = Errno("stat " + path);
    return false;
  }
  // A descriptor may be write-only: read the file through /proc instead.
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  int in = ::open(link, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    *error = Errno("reopening " + path);
    return false;
  }
  const std::string key = Key(fd, "", AT_EMPTY_PATH);
  if (key.empty()) {
    *error = Errno("statx " + path);
    ::close(in);
    return false;
  }
  bool ok = CopyInto(in, config_.shadow + "/inodes/" + key, st.st_mode, error);
  ::close(in);
  return ok;
}

bool DurableImage::SaveNames(std::string* error) {
  std::string text;
  for (const auto& [path, key] : names_) text += path + "\t" + key + "\n";
  return WriteWhole(config_.shadow + "/names", text, error);
}

bool Restore(const Config& config, std::string* error) {
  std::map<std::string, std::string> present;
  for (const std::string& dir : Dirs(config)) {
    if (!ListTracked(config, dir, &present, error)) return false;
  }
  for (const auto& [path, key] : present) {
    if (::unlink(path.c_str()) != 0) {
      *error = Errno("removing " + path);
      return false;
    }
  }
  for (const std::string& line : Split(ReadWhole(config.shadow + "/names"), '\n')) {
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      *error = "bad line in " + config.shadow + "/names: " + line;
      return false;
    }
    const std::string path = line.substr(0, tab);
    if (!Matches(config, path)) continue;
    const std::string image = config.shadow + "/inodes/" + line.substr(tab + 1);
    if (::access(image.c_str(), F_OK) == 0) {
      if (!CopyFile(image, path, error)) return false;
    } else {
      // Durable name, content never synced: empty.
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) {
        *error = Errno("creating " + path);
        return false;
      }
      ::close(fd);
    }
  }
  return true;
}

std::vector<SyncRecord> ReadSyncLog(const std::string& shadow) {
  std::vector<SyncRecord> out;
  for (const std::string& line : Split(ReadWhole(shadow + "/syncs"), '\n')) {
    std::vector<std::string> f = Split(line, '\t');
    if (f.size() != 3) continue;
    SyncRecord r;
    r.n = std::strtol(f[0].c_str(), nullptr, 10);
    r.realtime_ms = std::strtoll(f[1].c_str(), nullptr, 10);
    r.path = f[2];
    out.push_back(r);
  }
  return out;
}

SyncRecord CutAt(const std::string& shadow) {
  SyncRecord r;
  std::vector<std::string> f = Split(ReadWhole(shadow + "/cut"), '\t');
  if (f.size() != 2) return r;
  r.n = std::strtol(f[0].c_str(), nullptr, 10);
  r.path = f[1].substr(0, f[1].find('\n'));
  return r;
}

std::string PreloadLibrary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/gputravel/tests/power_cut_preload.so";
}

int RunSelfUnderPowerCut(const Config& config, const std::string& child_env,
                         const std::string& child_value) {
  const std::string preload = PreloadLibrary();
  const std::string spec = FormatConfig(config);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("LD_PRELOAD", preload.c_str(), 1);
    ::setenv(kEnv, spec.c_str(), 1);
    ::setenv(child_env.c_str(), child_value.c_str(), 1);
    ::execl("/proc/self/exe", "power-cut-child", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

}  // namespace power_cut
}  // namespace gputravel
