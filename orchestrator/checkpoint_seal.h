#ifndef GPUTRAVEL_ORCHESTRATOR_CHECKPOINT_SEAL_H_
#define GPUTRAVEL_ORCHESTRATOR_CHECKPOINT_SEAL_H_

// Model checkpoints at rest: the orchestrator's state database holds them
// only sealed, under a key that is not in the database.
//
//   sealed = 0x01 || IV (12 random bytes) ||
//            AES-256-GCM(key, IV, AAD, checkpoint) || tag
//   AAD    = "gputravel-checkpoint-v1", campaign, trip (keyxfer/wire.h)
//
// The trip is the one whose training wrote the checkpoint, so a checkpoint
// moved to another campaign, or put back from an earlier trip, does not open
// under its new row (the store also checks that the trip is the campaign's
// latest trained one). Random IVs: a key seals far fewer than the 2^32
// messages GCM allows with them.
//
// The key: 32 random bytes in a file (default <state_dir>/checkpoint.key),
// mode 0600, created at the first start of a database that holds no sealed
// checkpoint, durably and never over an existing file. A file rather than a
// TDX sealing key: a TD has no sealing key of its own (it would need a key
// service attesting it); a copy of the database alone (a backup, a disk the
// host reads) reveals nothing without the file, which the operator backs up
// apart from the database (docs/operations.md).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "keyxfer/secret_bytes.h"

namespace gputravel {

inline constexpr uint8_t kCheckpointSealVersion = 1;
inline constexpr size_t kCheckpointKeyBytes = 32;

class CheckpointSeal {
 public:
  // Reads the key from `key_path`: a regular file (not a link) of exactly
  // 32 bytes that only its owner may read or write (else FAILED_PRECONDITION
  // naming the file and what to do). A missing file is created (32 bytes
  // from the CSPRNG) if `may_create`, else NOT_FOUND naming it.
  static absl::StatusOr<CheckpointSeal> LoadOrCreate(const std::string& key_path,
                                                     bool may_create);

  absl::StatusOr<std::string> Seal(const std::string& campaign, uint64_t trip,
                                   absl::string_view checkpoint) const;
  // DATA_LOSS naming the campaign and trip, and the key file, when `sealed`
  // was not sealed under this key for this campaign and trip (swapped from
  // another campaign or trip, altered, or sealed under another key file).
  absl::StatusOr<std::string> Open(const std::string& campaign, uint64_t trip,
                                   absl::string_view sealed) const;

  const std::string& key_path() const { return key_path_; }

 private:
  CheckpointSeal(std::string key_path, SecretBytes key)
      : key_path_(std::move(key_path)), key_(std::move(key)) {}
  std::string key_path_;
  SecretBytes key_;
};

}  // namespace gputravel

#endif  // GPUTRAVEL_ORCHESTRATOR_CHECKPOINT_SEAL_H_
