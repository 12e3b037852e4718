#include "trainer/training_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "util/json_fields.h"

namespace gputravel {
namespace {

const std::set<std::string>& KnownKinds() {
  static const std::set<std::string> kKinds = {"next-token", "none", "external"};
  return kKinds;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

absl::Status Denied(const std::string& holder, const std::string& what) {
  return absl::PermissionDeniedError(what + " (holder '" + holder + "''s training policy)");
}

// Range checks shared by the parser and ValidateTrainingPolicy; `where`
// prefixes every message.
absl::Status Validate(const v1::TrainingPolicy& p, const std::string& where) {
  auto bad = [&](const std::string& field, const std::string& rule) {
    return absl::InvalidArgumentError(where + ": '" + field + "' must be " + rule);
  };
  if (p.min_window_bytes() < 32) return bad("min_window_bytes", "an integer >= 32");
  if (p.trainer_kinds().empty()) {
    return bad("trainer_kinds", "a non-empty array of \"next-token\", \"none\", \"external\"");
  }
  for (const std::string& k : p.trainer_kinds()) {
    if (KnownKinds().count(k) == 0) {
      return bad("trainer_kinds", "an array of \"next-token\", \"none\", \"external\" (got \"" + k + "\")");
    }
  }
  if (p.min_vocab() < 2 || p.min_vocab() > 65536) return bad("min_vocab", "2..65536");
  if (p.min_batch_tokens() < 2) return bad("min_batch_tokens", "an integer >= 2");
  if (!(p.max_learning_rate() > 0) || !std::isfinite(p.max_learning_rate())) {
    return bad("max_learning_rate", "a number > 0");
  }
  if (p.loss_decimals() > kMaxLossDecimals) {
    return bad("loss_decimals", "0.." + std::to_string(kMaxLossDecimals));
  }
  if (p.min_windows_per_loss() < 1 || p.min_windows_per_loss() > kMaxWindowsPerLoss) {
    return bad("min_windows_per_loss", "1.." + std::to_string(kMaxWindowsPerLoss));
  }
  return absl::OkStatus();
}

}  // namespace

v1::TrainingPolicy DefaultTrainingPolicy() {
  v1::TrainingPolicy p;
  p.set_min_window_bytes(kDefaultMinWindowBytes);
  p.add_trainer_kinds("next-token");
  p.add_trainer_kinds("none");
  p.set_min_vocab(kDefaultMinVocab);
  p.set_min_batch_tokens(kDefaultMinBatchTokens);
  p.set_max_learning_rate(kDefaultMaxLearningRate);
  p.set_loss_decimals(kDefaultLossDecimals);
  p.set_min_windows_per_loss(kDefaultMinWindowsPerLoss);
  return p;
}

absl::StatusOr<v1::TrainingPolicy> ParseTrainingPolicy(const nlohmann::json& j,
                                                       const std::string& where) {
  if (!j.is_object()) return absl::InvalidArgumentError(where + ": must be an object");
  absl::Status known = RefuseUnknownFields(
      j,
      {"min_window_bytes", "trainer_kinds", "min_vocab", "min_batch_tokens",
       "max_learning_rate", "loss_decimals", "min_windows_per_loss"},
      where);
  if (!known.ok()) return known;
  v1::TrainingPolicy p = DefaultTrainingPolicy();
  // Integers must be JSON integers (not 1.5, "8" or negative).
  auto uint_field = [&](const char* f, uint64_t* out) -> absl::Status {
    if (!j.contains(f)) return absl::OkStatus();
    const auto& v = j[f];
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      return absl::InvalidArgumentError(where + ": '" + f + "' must be a non-negative integer");
    }
    *out = v.get<uint64_t>();
    return absl::OkStatus();
  };
  uint64_t v = p.min_window_bytes();
  if (auto s = uint_field("min_window_bytes", &v); !s.ok()) return s;
  p.set_min_window_bytes(v);
  v = p.min_vocab();
  if (auto s = uint_field("min_vocab", &v); !s.ok()) return s;
  if (v > 65536) return absl::InvalidArgumentError(where + ": 'min_vocab' must be 2..65536");
  p.set_min_vocab(static_cast<uint32_t>(v));
  v = p.min_batch_tokens();
  if (auto s = uint_field("min_batch_tokens", &v); !s.ok()) return s;
  p.set_min_batch_tokens(v);
  v = p.loss_decimals();
  if (auto s = uint_field("loss_decimals", &v); !s.ok()) return s;
  if (v > kMaxLossDecimals) {
    return absl::InvalidArgumentError(where + ": 'loss_decimals' must be 0.." +
                                      std::to_string(kMaxLossDecimals));
  }
  p.set_loss_decimals(static_cast<uint32_t>(v));
  v = p.min_windows_per_loss();
  if (auto s = uint_field("min_windows_per_loss", &v); !s.ok()) return s;
  if (v > kMaxWindowsPerLoss) {
    return absl::InvalidArgumentError(where + ": 'min_windows_per_loss' must be 1.." +
                                      std::to_string(kMaxWindowsPerLoss));
  }
  p.set_min_windows_per_loss(static_cast<uint32_t>(v));
  if (j.contains("max_learning_rate")) {
    if (!j["max_learning_rate"].is_number()) {
      return absl::InvalidArgumentError(where + ": 'max_learning_rate' must be a number > 0");
    }
    p.set_max_learning_rate(j["max_learning_rate"].get<double>());
  }
  if (j.contains("trainer_kinds")) {
    const auto& kinds = j["trainer_kinds"];
    if (!kinds.is_array()) {
      return absl::InvalidArgumentError(
          where + ": 'trainer_kinds' must be a non-empty array of \"next-token\", \"none\", \"external\"");
    }
    p.clear_trainer_kinds();
    for (const auto& k : kinds) {
      if (!k.is_string()) {
        return absl::InvalidArgumentError(where + ": 'trainer_kinds' must hold strings");
      }
      p.add_trainer_kinds(k.get<std::string>());
    }
  }
  absl::Status ok = Validate(p, where);
  if (!ok.ok()) return ok;
  return p;
}

absl::Status ValidateTrainingPolicy(const v1::TrainingPolicy& policy, const std::string& who) {
  return Validate(policy, who + ": training_policy");
}

absl::Status CheckTerms(const v1::TrainingPolicy& p, const v1::TrainingTerms& t,
                        const std::string& holder) {
  if (std::find(p.trainer_kinds().begin(), p.trainer_kinds().end(), t.trainer_kind()) ==
      p.trainer_kinds().end()) {
    std::string kinds;
    for (const auto& k : p.trainer_kinds()) kinds += (kinds.empty() ? "" : ", ") + k;
    return Denied(holder, "trainer.kind is \"" + t.trainer_kind() + "\"; allowed: " + kinds);
  }
  if (t.vocab() < p.min_vocab()) {
    return Denied(holder, absl::StrCat("trainer.vocab is ", t.vocab(), "; at least ",
                                       p.min_vocab(), " allowed (min_vocab)"));
  }
  if (t.batch_tokens() < p.min_batch_tokens()) {
    return Denied(holder, absl::StrCat("trainer.batch_tokens is ", t.batch_tokens(),
                                       "; at least ", p.min_batch_tokens(),
                                       " allowed (min_batch_tokens)"));
  }
  if (!(t.learning_rate() <= p.max_learning_rate())) {
    return Denied(holder, "trainer.learning_rate is " + Num(t.learning_rate()) + "; at most " +
                              Num(p.max_learning_rate()) + " allowed (max_learning_rate)");
  }
  if (t.min_window_bytes() < p.min_window_bytes()) {
    return Denied(holder, absl::StrCat("the terms' minimum window is ", t.min_window_bytes(),
                                       " bytes; at least ", p.min_window_bytes(),
                                       " allowed (min_window_bytes)"));
  }
  if (t.loss_decimals() > p.loss_decimals()) {
    return Denied(holder, absl::StrCat("losses reported with ", t.loss_decimals(),
                                       " decimals; at most ", p.loss_decimals(),
                                       " allowed (loss_decimals)"));
  }
  if (t.min_windows_per_loss() < p.min_windows_per_loss()) {
    return Denied(holder, absl::StrCat("a loss reported per ", t.min_windows_per_loss(),
                                       " windows; at least ", p.min_windows_per_loss(),
                                       " allowed (min_windows_per_loss)"));
  }
  return absl::OkStatus();
}

absl::Status CheckWindow(const v1::TrainingPolicy& p, uint64_t window_length,
                         const std::string& holder) {
  if (window_length < p.min_window_bytes()) {
    return Denied(holder, absl::StrCat("a window of ", window_length, " bytes; at least ",
                                       p.min_window_bytes(), " allowed (min_window_bytes)"));
  }
  return absl::OkStatus();
}

v1::TrainingTerms Strictest(v1::TrainingTerms terms,
                            const std::vector<v1::TrainingPolicy>& policies) {
  std::vector<v1::TrainingPolicy> ps = policies;
  if (ps.empty()) ps.push_back(DefaultTrainingPolicy());
  uint64_t min_window = 0;
  uint32_t decimals = kMaxLossDecimals;
  uint32_t per_loss = 1;
  for (const auto& p : ps) {
    min_window = std::max<uint64_t>(min_window, p.min_window_bytes());
    decimals = std::min(decimals, p.loss_decimals());
    per_loss = std::max(per_loss, p.min_windows_per_loss());
  }
  terms.set_min_window_bytes(min_window);
  terms.set_loss_decimals(decimals);
  terms.set_min_windows_per_loss(per_loss);
  return terms;
}

double RoundLoss(double loss, uint32_t decimals) {
  const double scale = std::pow(10.0, static_cast<double>(decimals));
  return std::round(loss * scale) / scale;
}

std::optional<double> ReportedLoss(const std::vector<double>& block_losses,
                                   const v1::TrainingTerms& terms) {
  const size_t need = std::max<uint32_t>(1, terms.min_windows_per_loss());
  if (block_losses.size() < need) return std::nullopt;
  double sum = 0;
  for (double l : block_losses) sum += l;
  return RoundLoss(sum / static_cast<double>(block_losses.size()), terms.loss_decimals());
}

std::string DescribeTerms(const v1::TrainingTerms& t) {
  return absl::StrCat(t.trainer_kind(), " vocab ", t.vocab(), " dim ", t.dim(), " lr ",
                      Num(t.learning_rate()), " batch ", t.batch_tokens(), " seed ", t.seed(),
                      "; windows >= ", t.min_window_bytes(), " B; loss per ",
                      t.min_windows_per_loss(), " window",
                      t.min_windows_per_loss() == 1 ? "" : "s", ", ", t.loss_decimals(),
                      " decimals");
}

}  // namespace gputravel
