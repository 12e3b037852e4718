#include "util/json_fields.h"

#include <algorithm>
#include <vector>

namespace gputravel {
namespace {

// A near miss is at most this many single-character edits away.
constexpr size_t kMaxHintDistance = 2;

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

absl::Status RefuseUnknownFields(const nlohmann::json& j, const std::set<std::string>& known,
                                 const std::string& where) {
  if (!j.is_object()) return absl::OkStatus();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (known.count(key) != 0) continue;
    std::string hint;
    size_t best = kMaxHintDistance + 1;
    std::string accepted;
    for (const std::string& k : known) {
      accepted += (accepted.empty() ? "" : ", ") + k;
      const size_t d = EditDistance(key, k);
      if (d < best) {
        best = d;
        hint = "did you mean '" + k + "'? ";
      }
    }
    return absl::InvalidArgumentError((where.empty() ? "" : where + ": ") + "unknown field '" +
                                      key + "' (" + hint + "accepted: " + accepted + ")");
  }
  return absl::OkStatus();
}

}  // namespace gputravel
