#include "orchestrator/checkpoint_seal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "keyxfer/aes_gcm.h"
#include "keyxfer/random.h"
#include "keyxfer/wire.h"
#include "util/files.h"
#include "util/private_files.h"

namespace gputravel {
namespace {

std::string Aad(const std::string& campaign, uint64_t trip) {
  WireWriter w;
  w.Bytes("gputravel-checkpoint-v1");
  w.Bytes(campaign);
  w.U64(trip);
  return w.Take();
}

std::string Mode(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Reads the whole key file into `key`; errno-style failures as statuses.
absl::Status ReadKeyFile(const std::string& path, SecretBytes* key) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return absl::NotFoundError("checkpoint key file " + path + " is missing");
    return absl::FailedPreconditionError("cannot open checkpoint key file " + path + ": " +
                                         std::strerror(e) +
                                         (e == ELOOP ? " (a symbolic link is not followed)" : ""));
  }
  struct stat st;
  absl::Status s;
  if (::fstat(fd, &st) != 0) {
    s = absl::FailedPreconditionError("cannot stat checkpoint key file " + path + ": " +
                                      std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    s = absl::FailedPreconditionError("checkpoint key file " + path + " is not a regular file");
  } else if (!IsTrustedOwner(st.st_uid)) {
    s = absl::FailedPreconditionError(
        "checkpoint key file " + path + " is owned by uid " + std::to_string(st.st_uid) +
        ", not by this orchestrator's user (uid " + std::to_string(::geteuid()) +
        ") or root: its owner knows the key; restore the key from its backup as this user");
  } else if ((st.st_mode & 077) != 0) {
    s = absl::FailedPreconditionError(
        "checkpoint key file " + path + " may be read or written by group or others (mode " +
        Mode(st.st_mode) + "); it must be its owner's alone: chmod 600 " + path);
  } else if (st.st_size != static_cast<off_t>(kCheckpointKeyBytes)) {
    s = absl::FailedPreconditionError(absl::StrCat(
        "checkpoint key file ", path, " holds ", st.st_size, " bytes, not the ",
        kCheckpointKeyBytes, " of a key: restore it from its backup"));
  } else {
    SecretBytes k(kCheckpointKeyBytes);
    size_t done = 0;
    while (done < k.size()) {
      const ssize_t n = ::read(fd, k.data() + done, k.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        s = absl::FailedPreconditionError("cannot read checkpoint key file " + path);
        break;
      }
      done += static_cast<size_t>(n);
    }
    if (s.ok()) *key = std::move(k);
  }
  ::close(fd);
  return s;
}

}  // namespace

absl::StatusOr<CheckpointSeal> CheckpointSeal::LoadOrCreate(const std::string& key_path,
                                                            bool may_create) {
  // Whoever may change the key's directory could take the key away, or put
  // back an older one (a key that leaked), and the next checkpoints would be
  // sealed under it.
  absl::Status dir = RequirePrivateDirectory(DirectoryOf(key_path),
                                             "the directory of checkpoint key file " + key_path);
  if (!dir.ok()) return dir;
  SecretBytes key;
  absl::Status read = ReadKeyFile(key_path, &key);
  if (read.ok()) return CheckpointSeal(key_path, std::move(key));
  if (read.code() != absl::StatusCode::kNotFound || !may_create) return read;
  key = SecretBytes(kCheckpointKeyBytes);
  RandomBytes(key.data(), key.size());
  absl::Status made = CreatePrivateFileDurably(
      key_path, absl::string_view(reinterpret_cast<const char*>(key.data()), key.size()));
  if (!made.ok()) {
    return absl::Status(made.code(),
                        "cannot create the checkpoint key file: " + std::string(made.message()));
  }
  return CheckpointSeal(key_path, std::move(key));
}

absl::StatusOr<std::string> CheckpointSeal::Seal(const std::string& campaign, uint64_t trip,
                                                 absl::string_view checkpoint) const {
  auto gcm = AesGcm::Create(key_);
  if (!gcm.ok()) return gcm.status();
  uint8_t iv[kGcmIvSize];
  RandomBytes(iv, sizeof(iv));
  auto body = (*gcm)->Seal(iv, Aad(campaign, trip), checkpoint);
  if (!body.ok()) return body.status();
  std::string sealed(1, static_cast<char>(kCheckpointSealVersion));
  sealed.append(reinterpret_cast<const char*>(iv), sizeof(iv));
  sealed += *body;
  return sealed;
}

absl::StatusOr<std::string> CheckpointSeal::Open(const std::string& campaign, uint64_t trip,
                                                 absl::string_view sealed) const {
  const std::string whose =
      absl::StrCat("the checkpoint of campaign \"", campaign, "\" (trip ", trip, ")");
  if (sealed.size() < 1 + kGcmIvSize + kGcmTagSize ||
      static_cast<uint8_t>(sealed[0]) != kCheckpointSealVersion) {
    return absl::DataLossError(whose + " is not a sealed checkpoint");
  }
  auto gcm = AesGcm::Create(key_);
  if (!gcm.ok()) return gcm.status();
  const auto* iv = reinterpret_cast<const uint8_t*>(sealed.data() + 1);
  auto plain = (*gcm)->Open(iv, Aad(campaign, trip), sealed.substr(1 + kGcmIvSize));
  if (!plain.ok()) {
    return absl::DataLossError(
        whose + " does not authenticate: it was swapped from another campaign or trip, or " +
        "altered, or sealed under another key than " + key_path_ +
        " (restore the key file the database was written with)");
  }
  return plain;
}

}  // namespace gputravel
