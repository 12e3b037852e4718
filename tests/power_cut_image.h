#ifndef GPUTRAVEL_TESTS_POWER_CUT_IMAGE_H_
#define GPUTRAVEL_TESTS_POWER_CUT_IMAGE_H_

// What a power cut leaves on disk, for the power-cut tests: the durable image
// of a set of files, made durable only by the process's own fsync(2) and
// fdatasync(2) calls, kept in a shadow directory so that it outlives the
// process; after the process died, Restore puts the tracked files back as
// the image has them, which is what the disk would hold after the power came
// back.
//
// The model (what a cut drops):
//   - A file's content and size are those it had at its last successful
//     sync (fsync or fdatasync of any descriptor of it); every write,
//     truncation and extension since is lost. A file never synced in this
//     process keeps what it had when the process started, or is empty if
//     the process created it (the data of a name made durable without its
//     own sync).
//   - A directory's entries (creation, removal, rename of a tracked name)
//     are those it had at its last sync; a file created and not followed by
//     a sync of its directory vanishes, a removed one comes back, a rename
//     is undone. Entries present when the process started are durable.
//   - Files a process never syncs lose everything since it started: SQLite's
//     shared-memory index (-shm, written through mmap) is such a file, which
//     SQLite rebuilds from the WAL on the next open.
//   - Only fsync(2) and fdatasync(2) are barriers: sync(2), syncfs(2),
//     O_SYNC or msync(2) are not modelled (the product uses none of them;
//     were it to, the model would drop more than a disk would, never less).
//   - No torn writes: what a sync made durable is kept whole, what it did
//     not is dropped whole (the harshest case for code that relies on
//     unsynced data; SQLite's WAL checksums cover torn frames).
//   - Files are identified by device, inode number and birth time (statx),
//     so a number the file system reuses for a new file (a replaced
//     snapshot's, say) starts empty; on a file system without birth times
//     a reused number would take the old file's durable content.
//
// The tracked files are those whose absolute path starts with one of the
// configured prefixes (e.g. ".../state/orchestrator." for the state
// database, its -wal, -shm and lock); the tracked directories are the
// prefixes' directories. Used by tests/power_cut_preload.cc (in the process
// that loses power) and by the tests (Restore, ReadSyncLog). No Abseil: the
// preload library must not carry a second copy of the daemon's libraries.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gputravel {
namespace power_cut {

// The environment variable that configures tests/power_cut_preload.so.
inline constexpr char kEnv[] = "GPUTRAVEL_POWER_CUT";

struct Config {
  std::string shadow;                 // the shadow directory (created by the test)
  std::vector<std::string> prefixes;  // absolute path prefixes of the tracked files
  // The tracked sync (1-based, counted across every tracked file and
  // directory of the process) at which the power is cut: the process dies
  // with SIGKILL when it asks for it, before the sync is done. 0: never
  // (the image is still kept, so any death can be restored as a power cut).
  long cut_at = 0;
};

// "cut=N;shadow=DIR;track=PREFIX[,PREFIX...]" (no ';' or ',' in paths).
std::string FormatConfig(const Config& c);
bool ParseConfig(const std::string& text, Config* out, std::string* error);

// One tracked sync, as the image logged it (SHADOW/syncs).
struct SyncRecord {
  long n = 0;                // 1-based, in the order the process asked
  int64_t realtime_ms = 0;   // CLOCK_REALTIME when it was asked for
  std::string path;          // the file or directory synced
};

// The durable image of one process's tracked files. Not thread-safe: the
// caller serializes (the preload library holds a mutex).
class DurableImage {
 public:
  explicit DurableImage(Config config) : config_(std::move(config)) {}

  // Records every tracked file present now, with its content, as durable.
  bool Begin(std::string* error);
  // Whether descriptor `fd` is tracked: a regular file under a prefix, or a
  // prefix's directory. Sets its path and kind.
  bool Tracked(int fd, std::string* path, bool* is_dir) const;
  // Logs sync `n` of `path` (SHADOW/syncs), before it is done.
  bool LogSync(long n, const std::string& path, std::string* error);
  // Records the power cut at sync `n` (SHADOW/cut), before the process dies.
  void MarkCut(long n, const std::string& path);
  // After a successful sync of tracked `fd`: its content (a file) or its
  // tracked names (a directory) are durable from now on.
  bool Synced(int fd, const std::string& path, bool is_dir, std::string* error);

 private:
  bool SaveNames(std::string* error);
  Config config_;
  std::map<std::string, std::string> names_;  // durable path -> inode key
};

// After the process died: replaces every tracked file by the image (the
// durable names with their durable content); tracked files not in the image
// are removed.
bool Restore(const Config& config, std::string* error);

// The syncs the process asked for (SHADOW/syncs), in order.
std::vector<SyncRecord> ReadSyncLog(const std::string& shadow);

// The sync at which the power was cut (SHADOW/cut; its realtime_ms is not
// recorded), or n = 0 if it was not.
SyncRecord CutAt(const std::string& shadow);

// The preload library in the test's runfiles (tests/power_cut_preload.so).
std::string PreloadLibrary();

// Runs this test binary again in a child process under the preload with
// `config`, and `child_env`=`child_value` set so that the child knows its
// part (it runs it from a static initializer, before main); returns its
// wait status.
int RunSelfUnderPowerCut(const Config& config, const std::string& child_env,
                         const std::string& child_value);

}  // namespace power_cut
}  // namespace gputravel

#endif  // GPUTRAVEL_TESTS_POWER_CUT_IMAGE_H_
