// A power cut for one process, as an LD_PRELOAD library (tests only): with
// GPUTRAVEL_POWER_CUT set (tests/power_cut_image.h: shadow directory,
// tracked prefixes, cut point), it wraps fsync(2) and fdatasync(2). Every
// sync of a tracked file or directory is counted and logged; once done, it
// makes what it synced durable in the shadow image (tests/power_cut_image.h
// says what the model keeps and drops). The sync numbered `cut` is never
// done: the process is killed with SIGKILL when it asks for it, and the test
// then restores the image over the tracked files, so everything the process
// wrote without a sync since is gone. Any other death of the process (a
// failpoint, an external SIGKILL) can be turned into a power cut the same
// way.
//
// It covers every writer in the process (SQLite calls fdatasync from
// libsqlite3 through the dynamic linker, the daemon's own files call
// fsync), so SQLite's database, WAL, shared-memory index and directory
// entries are all modelled without an SQLite VFS.
//
// Never part of a daemon: the library is a test-only target, nothing links
// it, and a daemon configured for TDX attestation refuses to start with
// LD_PRELOAD set (keyxfer/attestation_config.cc). Unset, the wrappers call
// straight through.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "tests/power_cut_image.h"

namespace {

using gputravel::power_cut::Config;
using gputravel::power_cut::DurableImage;

using SyncFn = int (*)(int);

struct PowerCut {
  SyncFn real_fsync = nullptr;
  SyncFn real_fdatasync = nullptr;
  Config config;
  std::unique_ptr<DurableImage> image;  // null: inactive
  std::mutex mu;
  long syncs = 0;
};

PowerCut& The() {
  static PowerCut* p = new PowerCut;  // never destroyed: syncs may run at exit
  return *p;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "power-cut preload: %s\n", what.c_str());
  std::abort();
}

SyncFn Real(const char* name) {
  SyncFn f = reinterpret_cast<SyncFn>(::dlsym(RTLD_NEXT, name));
  if (f == nullptr) Fail(std::string("no ") + name + " after this library");
  return f;
}

__attribute__((constructor)) void Init() {
  PowerCut& p = The();
  p.real_fsync = Real("fsync");
  p.real_fdatasync = Real("fdatasync");
  const char* v = std::getenv(gputravel::power_cut::kEnv);
  if (v == nullptr) return;
  std::string error;
  if (!gputravel::power_cut::ParseConfig(v, &p.config, &error)) Fail(error);
  auto image = std::make_unique<DurableImage>(p.config);
  if (!image->Begin(&error)) Fail(error);
  std::lock_guard<std::mutex> l(p.mu);
  p.image = std::move(image);
}

int Sync(int fd, bool data_only) {
  PowerCut& p = The();
  SyncFn real = data_only ? p.real_fdatasync : p.real_fsync;
  if (real == nullptr) real = Real(data_only ? "fdatasync" : "fsync");
  if (p.image == nullptr) return real(fd);
  std::string path;
  bool is_dir = false;
  if (!p.image->Tracked(fd, &path, &is_dir)) return real(fd);
  std::lock_guard<std::mutex> l(p.mu);
  const long n = ++p.syncs;
  std::string error;
  if (!p.image->LogSync(n, path, &error)) Fail(error);
  if (n == p.config.cut_at) {
    p.image->MarkCut(n, path);
    std::fprintf(stderr, "power-cut preload: power cut at sync %ld (%s)\n", n, path.c_str());
    ::kill(::getpid(), SIGKILL);
    ::_exit(137);  // not reached
  }
  const int rc = real(fd);
  if (rc == 0 && !p.image->Synced(fd, path, is_dir, &error)) Fail(error);
  return rc;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int fsync(int fd) { return Sync(fd, false); }
extern "C" __attribute__((visibility("default"))) int fdatasync(int fd) {
  return Sync(fd, true);
}
