#include "vfio_mux/mux_policy.h"

#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gputravel {
namespace {

constexpr absl::string_view kForCallerPayload = "type.gputravel/mux-caller-text";

bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '_' || c == '-';
}

}  // namespace

std::string LogSafe(absl::string_view text, size_t max) {
  const bool cut = text.size() > max;
  std::string out = absl::CHexEscape(text.substr(0, max));
  if (cut) absl::StrAppend(&out, "...(", text.size(), " bytes)");
  return out;
}

absl::Status ValidateMuxName(absl::string_view kind, absl::string_view name) {
  std::string why;
  if (name.empty()) {
    why = "is empty";
  } else if (name.size() > kMaxMuxNameLength) {
    why = absl::StrCat("is ", name.size(), " bytes long (at most ", kMaxMuxNameLength, ")");
  } else if (!NameChar(name[0]) || name[0] == '.' || name[0] == '_' || name[0] == '-') {
    why = "must start with a letter or digit";
  } else {
    for (char c : name) {
      if (!NameChar(c)) {
        why = "may hold only letters, digits, '.', '_' and '-'";
        break;
      }
    }
  }
  if (why.empty()) return absl::OkStatus();
  return ForCaller(absl::InvalidArgumentError(
      absl::StrCat(kind, " name '", LogSafe(name, 64), "' ", why)));
}

absl::Status DomainNotConfigured(absl::string_view domain) {
  return ForCaller(absl::PermissionDeniedError(absl::StrCat(
      "domain '", domain,
      "' is not one this MUX routes GPUs to; the host's administrator lists the "
      "domains in the MUX configuration")));
}

absl::StatusOr<std::set<std::string>> ParseMuxDomains(const nlohmann::json& config,
                                                      const std::string& where) {
  if (!config.contains("domains") || !config["domains"].is_array() ||
      config["domains"].empty()) {
    return absl::InvalidArgumentError(
        where + ": 'domains' must be a non-empty array of the domain names this MUX may "
                "route a GPU to (the campaign's TDs); the MUX refuses every other domain");
  }
  std::set<std::string> out;
  for (const auto& d : config["domains"]) {
    if (!d.is_string()) {
      return absl::InvalidArgumentError(where + ": domains[]: each must be a string");
    }
    const std::string name = d.get<std::string>();
    absl::Status s = ValidateMuxName("domain", name);
    if (!s.ok()) return absl::InvalidArgumentError(where + ": domains[]: " + std::string(s.message()));
    if (!out.insert(name).second) {
      return absl::InvalidArgumentError(where + ": domains[]: '" + name + "' is listed twice");
    }
  }
  return out;
}

absl::Status ForCaller(absl::Status status) {
  if (!status.ok()) status.SetPayload(kForCallerPayload, absl::Cord("1"));
  return status;
}

bool IsForCaller(const absl::Status& status) {
  return status.GetPayload(kForCallerPayload).has_value();
}

absl::Status CallerView(const absl::Status& status, const std::string& what) {
  if (status.ok()) return status;
  if (IsForCaller(status)) return absl::Status(status.code(), status.message());
  return absl::Status(
      status.code(),
      absl::StrCat(what, " failed at the host (", absl::StatusCodeToString(status.code()),
                   "); the host's administrator finds the cause in the MUX's log"));
}

}  // namespace gputravel
