#include "util/flags.h"

#include <string>
#include <utility>

#include "absl/strings/numbers.h"

namespace gputravel {

void Flags::String(const std::string& name, std::string default_value,
                   const std::string& help) {
  decls_[name] = Decl{std::move(default_value), help, false, false};
  order_.push_back(name);
}

void Flags::Bool(const std::string& name, const std::string& help) {
  decls_[name] = Decl{"false", help, true, false};
  order_.push_back(name);
}

void Flags::Int(const std::string& name, int default_value, int min_value, int max_value,
                const std::string& help) {
  Decl d{std::to_string(default_value), help, false, false};
  d.is_int = true;
  d.min_value = min_value;
  d.max_value = max_value;
  decls_[name] = d;
  order_.push_back(name);
}

absl::Status Flags::Parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = decls_.find(name);
    if (it == decls_.end()) {
      return absl::InvalidArgumentError("unknown flag --" + name + " (see --help)");
    }
    if (it->second.is_bool) {
      if (has_value && value != "true" && value != "false") {
        return absl::InvalidArgumentError("flag --" + name + " is a switch: give it alone, or as --" +
                                          name + "=true or --" + name + "=false, not '" + value +
                                          "'");
      }
      it->second.value = has_value ? value : "true";
    } else {
      if (!has_value) {
        if (i + 1 >= argc) {
          return absl::InvalidArgumentError("flag --" + name + " needs a value");
        }
        value = argv[++i];
      }
      if (it->second.is_int) {
        int n = 0;
        if (!absl::SimpleAtoi(value, &n) || n < it->second.min_value ||
            n > it->second.max_value) {
          return absl::InvalidArgumentError(
              "flag --" + name + " must be an integer in " +
              std::to_string(it->second.min_value) + ".." +
              std::to_string(it->second.max_value) + ", not '" + value + "'");
        }
      }
      it->second.value = value;
    }
    it->second.set = true;
  }
  return absl::OkStatus();
}

std::string Flags::Get(const std::string& name) const {
  auto it = decls_.find(name);
  return it == decls_.end() ? "" : it->second.value;
}

bool Flags::IsSet(const std::string& name) const {
  auto it = decls_.find(name);
  if (it == decls_.end()) return false;
  return it->second.is_bool ? it->second.value == "true" : it->second.set;
}

int Flags::GetInt(const std::string& name) const {
  int n = 0;
  if (!absl::SimpleAtoi(Get(name), &n)) return 0;
  return n;
}

std::string Flags::Help() const {
  std::string out = "Usage: " + program_ + " [flags]\n\n" + summary_ + "\n\nFlags:\n";
  for (const auto& n : order_) {
    const Decl& d = decls_.at(n);
    out += "  --" + n + (d.is_bool ? "" : d.is_int ? "=N" : "=VALUE") + "\n      " + d.help;
    if (d.is_int) {
      out += " (" + std::to_string(d.min_value) + ".." + std::to_string(d.max_value) +
             ", default: " + d.value + ")";
    } else if (!d.is_bool && !d.value.empty()) {
      out += " (default: " + d.value + ")";
    }
    out += "\n";
  }
  out += "  --help\n      Print this help and exit.\n";
  return out;
}

absl::Status Flags::OnePositional(const std::string& what) const {
  if (positional_.size() == 1) return absl::OkStatus();
  if (positional_.empty()) return absl::InvalidArgumentError("missing " + what);
  return absl::InvalidArgumentError("one argument only (" + what + "), not '" + positional_[1] +
                                    "' as well");
}

}  // namespace gputravel
