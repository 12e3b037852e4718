#include "keyxfer/tdx/collateral_store.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/hex.h"
#include "keyxfer/tdx/tcb_info.h"

namespace gputravel::tdx {
namespace {

// Collateral files are a few tens of KiB; anything far larger is not one.
constexpr off_t kMaxBundleBytes = 4 << 20;

std::string StatKey(const struct stat& st) {
  return absl::StrCat(st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".",
                      st.st_mtim.tv_nsec, ";");
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The files to read and the fingerprint of what they are now.
absl::Status List(const std::string& path, std::vector<std::string>* files,
                  std::string* fingerprint) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("TDX collateral ", path, ": does not exist"));
  }
  *fingerprint = StatKey(st);
  if (S_ISREG(st.st_mode)) {
    files->push_back(path);
    return absl::OkStatus();
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TDX collateral ", path, ": neither a file nor a directory"));
  }
  DIR* d = opendir(path.c_str());
  if (d == nullptr) {
    return absl::PermissionDeniedError(
        absl::StrCat("TDX collateral ", path, ": cannot read the directory"));
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (absl::EndsWith(name, ".json") && name[0] != '.') names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    std::string file = absl::StrCat(path, "/", name);
    struct stat fst;
    if (stat(file.c_str(), &fst) != 0 || !S_ISREG(fst.st_mode)) continue;
    absl::StrAppend(fingerprint, name, "=", StatKey(fst));
    files->push_back(file);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<CollateralStore>> CollateralStore::Open(
    std::string path) {
  std::shared_ptr<CollateralStore> store(new CollateralStore(std::move(path)));
  absl::MutexLock lock(&store->mu_);
  if (absl::Status s = store->RefreshLocked(); !s.ok()) return s;
  struct stat st;
  if (stat(store->path_.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      !store->problems_.empty()) {
    return absl::InvalidArgumentError(store->problems_.front());
  }
  return store;
}

absl::Status CollateralStore::RefreshLocked() {
  std::vector<std::string> files;
  std::string fingerprint;
  if (absl::Status s = List(path_, &files, &fingerprint); !s.ok()) return s;
  if (fingerprint == fingerprint_) return absl::OkStatus();
  by_fmspc_.clear();
  problems_.clear();
  std::map<std::array<uint8_t, 6>, TcbInfo> newest;
  for (const std::string& file : files) {
    struct stat st;
    if (stat(file.c_str(), &st) == 0 && st.st_size > kMaxBundleBytes) {
      problems_.push_back(absl::StrCat(file, ": larger than ",
                                       kMaxBundleBytes, " bytes"));
      continue;
    }
    auto text = ReadSmallFile(file);
    if (!text.ok()) {
      problems_.push_back(std::string(text.status().message()));
      continue;
    }
    auto bundle = ParseCollateralBundle(*text, file);
    if (!bundle.ok()) {
      problems_.push_back(std::string(bundle.status().message()));
      continue;
    }
    // Indexing only; the signature is checked when the bundle is used.
    auto info = ParseTcbInfo(bundle->tcb_info);
    if (!info.ok()) {
      problems_.push_back(absl::StrCat(file, ": ", info.status().message()));
      continue;
    }
    // Two bundles for one platform (a refresh written beside the old file):
    // the newer TCB info wins, whatever the files' names, so a stale bundle
    // cannot shadow a TCB recovery or a newer PCK CRL.
    auto held = newest.find(info->fmspc);
    if (held != newest.end() &&
        std::make_pair(held->second.tcb_evaluation_data_number,
                       held->second.issue_date) >=
            std::make_pair(info->tcb_evaluation_data_number,
                           info->issue_date)) {
      continue;
    }
    newest[info->fmspc] = *info;
    by_fmspc_[info->fmspc] =
        std::make_shared<const CollateralBundle>(std::move(*bundle));
  }
  fingerprint_ = fingerprint;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const CollateralBundle>>
CollateralStore::ForFmspc(const std::array<uint8_t, 6>& fmspc) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = RefreshLocked(); !s.ok()) return s;
  auto it = by_fmspc_.find(fmspc);
  if (it != by_fmspc_.end()) return it->second;
  std::vector<std::string> held;
  for (const auto& [f, b] : by_fmspc_) {
    held.push_back(absl::AsciiStrToUpper(HexEncode(f)));
  }
  return absl::NotFoundError(absl::StrCat(
      "TDX collateral ", path_, ": no bundle for FMSPC ",
      absl::AsciiStrToUpper(HexEncode(fmspc)), " (holds: ",
      held.empty() ? "none" : absl::StrJoin(held, ", "), ")",
      problems_.empty() ? ""
                        : absl::StrCat("; unreadable: ",
                                       absl::StrJoin(problems_, "; "))));
}

}  // namespace gputravel::tdx
