#include "vfio_mux/libvirt/hostdev_xml.h"

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "vfio_mux/sysfs/pci_address.h"

namespace gputravel {
namespace {

constexpr absl::string_view kUserAliasPrefix = "ua-";
constexpr size_t kMaxAliasLength = 64;

bool IsAliasChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '-' || c == '.';
}

using Attrs = std::map<std::string, std::string>;

absl::Status Malformed(absl::string_view why, size_t offset) {
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot read libvirt domain XML: ", why, " at byte ", offset,
      "; refusing to guess which host devices the domain holds"));
}

// XML's five named entities and numeric character references (ASCII only:
// nothing libvirt puts in an attribute the MUX reads needs more).
absl::StatusOr<std::string> DecodeEntities(absl::string_view v, size_t at) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '&') {
      out.push_back(v[i]);
      continue;
    }
    size_t semi = v.find(';', i);
    if (semi == absl::string_view::npos) return Malformed("bad entity", at);
    absl::string_view ent = v.substr(i + 1, semi - i - 1);
    if (ent == "lt") {
      out.push_back('<');
    } else if (ent == "gt") {
      out.push_back('>');
    } else if (ent == "amp") {
      out.push_back('&');
    } else if (ent == "quot") {
      out.push_back('"');
    } else if (ent == "apos") {
      out.push_back('\'');
    } else if (absl::StartsWith(ent, "#")) {
      int base = 10;
      absl::string_view digits = ent.substr(1);
      if (absl::StartsWith(digits, "x")) {
        base = 16;
        digits.remove_prefix(1);
      }
      if (digits.empty() || digits.size() > 6) {
        return Malformed("bad character reference", at);
      }
      unsigned long code = 0;
      for (char c : digits) {
        int d;
        if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
          d = c - '0';
        } else if (base == 16 &&
                   absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
          d = absl::ascii_tolower(static_cast<unsigned char>(c)) - 'a' + 10;
        } else {
          return Malformed("bad character reference", at);
        }
        code = code * base + d;
      }
      if (code == 0 || code > 0x7f) {
        return Malformed("non-ASCII character reference", at);
      }
      out.push_back(static_cast<char>(code));
    } else {
      return Malformed(absl::StrCat("unknown entity &", ent, ";"), at);
    }
    i = semi;
  }
  return out;
}

// Reads an element's start tag from xml[pos] == '<'. Sets *end past '>'.
absl::Status ParseStartTag(absl::string_view xml, size_t pos, std::string* name,
                           Attrs* attrs, bool* self_closing, size_t* end) {
  auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  };
  size_t i = pos + 1;
  size_t start = i;
  while (i < xml.size() && !is_space(xml[i]) && xml[i] != '/' && xml[i] != '>') {
    ++i;
  }
  if (i == start) return Malformed("empty element name", pos);
  *name = std::string(xml.substr(start, i - start));
  attrs->clear();
  for (;;) {
    while (i < xml.size() && is_space(xml[i])) ++i;
    if (i >= xml.size()) return Malformed("unterminated start tag", pos);
    if (xml[i] == '>') {
      *self_closing = false;
      *end = i + 1;
      return absl::OkStatus();
    }
    if (xml[i] == '/') {
      if (i + 1 >= xml.size() || xml[i + 1] != '>') {
        return Malformed("stray '/' in start tag", i);
      }
      *self_closing = true;
      *end = i + 2;
      return absl::OkStatus();
    }
    size_t an = i;
    while (i < xml.size() && !is_space(xml[i]) && xml[i] != '=' &&
           xml[i] != '>' && xml[i] != '/') {
      ++i;
    }
    std::string attr(xml.substr(an, i - an));
    while (i < xml.size() && is_space(xml[i])) ++i;
    if (attr.empty() || i >= xml.size() || xml[i] != '=') {
      return Malformed("attribute without value", an);
    }
    ++i;
    while (i < xml.size() && is_space(xml[i])) ++i;
    if (i >= xml.size() || (xml[i] != '\'' && xml[i] != '"')) {
      return Malformed("unquoted attribute value", i);
    }
    char quote = xml[i++];
    size_t close = xml.find(quote, i);
    if (close == absl::string_view::npos) {
      return Malformed("unterminated attribute value", i);
    }
    absl::string_view raw = xml.substr(i, close - i);
    if (absl::StrContains(raw, '<')) return Malformed("'<' in attribute", i);
    absl::StatusOr<std::string> value = DecodeEntities(raw, i);
    if (!value.ok()) return value.status();
    if (!attrs->emplace(attr, *value).second) {
      return Malformed(absl::StrCat("duplicate attribute ", attr), an);
    }
    i = close + 1;
  }
}

// "0x98" (libvirt's spelling) or "98".
bool ParseHexAttr(const std::string& s, uint32_t max, uint32_t* out) {
  absl::string_view v = s;
  if (absl::StartsWith(v, "0x") || absl::StartsWith(v, "0X")) v.remove_prefix(2);
  if (v.empty() || v.size() > 8) return false;
  uint64_t n = 0;
  for (char c : v) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
    n = n * 16 + (absl::ascii_isdigit(static_cast<unsigned char>(c))
                      ? c - '0'
                      : absl::ascii_tolower(static_cast<unsigned char>(c)) -
                            'a' + 10);
  }
  if (n > max) return false;
  *out = static_cast<uint32_t>(n);
  return true;
}

bool PathIs(const std::vector<std::string>& stack,
            std::initializer_list<absl::string_view> want) {
  if (stack.size() != want.size()) return false;
  size_t i = 0;
  for (absl::string_view w : want) {
    if (stack[i++] != w) return false;
  }
  return true;
}

}  // namespace

absl::Status ValidateHostdevAlias(absl::string_view alias) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid hostdev alias '", absl::CHexEscape(alias), "': ", why,
        "; use 'ua-' followed by letters, digits, '_', '-' or '.' (at most ",
        kMaxAliasLength, " characters), e.g. ua-gpu0"));
  };
  if (!absl::StartsWith(alias, kUserAliasPrefix)) {
    return bad("libvirt keeps only user aliases that start with 'ua-'");
  }
  if (alias.size() == kUserAliasPrefix.size()) return bad("nothing after 'ua-'");
  if (alias.size() > kMaxAliasLength) return bad("too long");
  for (char c : alias) {
    if (!IsAliasChar(c)) return bad("character outside [A-Za-z0-9_.-]");
  }
  return absl::OkStatus();
}

std::string DefaultHostdevAlias(absl::string_view gpu_name) {
  std::string alias = "ua-gputravel-";
  for (char c : gpu_name) alias.push_back(IsAliasChar(c) ? c : '-');
  if (alias.size() > kMaxAliasLength) alias.resize(kMaxAliasLength);
  return alias;
}

absl::StatusOr<std::string> HostdevXml(absl::string_view bdf,
                                       absl::string_view alias) {
  absl::StatusOr<PciAddress> a = ParsePciAddress(bdf);
  if (!a.ok()) return a.status();
  std::string alias_line;
  if (!alias.empty()) {
    absl::Status s = ValidateHostdevAlias(alias);
    if (!s.ok()) return s;
    alias_line = absl::StrCat("  <alias name='", alias, "'/>\n");
  }
  return absl::StrFormat(
      "<hostdev mode='subsystem' type='pci' managed='no'>\n"
      "  <source>\n"
      "    <address domain='0x%04x' bus='0x%02x' slot='0x%02x' "
      "function='0x%x'/>\n"
      "  </source>\n"
      "%s"
      "</hostdev>\n",
      a->domain, a->bus, a->slot, a->function, alias_line);
}

namespace {

// Reads a domain's XML once: its PCI hostdevs into `out_hostdevs` and the
// type of its <domain><launchSecurity> ("" when absent) into `launch`.
absl::Status ReadDomainXml(absl::string_view xml,
                           std::vector<PciHostdev>* out_hostdevs,
                           std::string* launch) {
  std::vector<PciHostdev>& out = *out_hostdevs;
  launch->clear();
  std::vector<std::string> stack;
  bool seen_root = false;

  // State of the <hostdev> being read.
  bool in_hostdev = false;
  Attrs hostdev_attrs;
  Attrs source_address;
  std::string alias;
  size_t hostdev_at = 0;

  auto on_start = [&](const std::string& name, const Attrs& attrs,
                      size_t at) -> absl::Status {
    if (name == "launchSecurity" && PathIs(stack, {"domain"})) {
      auto it = attrs.find("type");
      *launch = it != attrs.end() ? it->second : "";
    }
    if (name == "hostdev" && PathIs(stack, {"domain", "devices"})) {
      in_hostdev = true;
      hostdev_attrs = attrs;
      source_address.clear();
      alias.clear();
      hostdev_at = at;
    } else if (in_hostdev && name == "address" &&
               PathIs(stack, {"domain", "devices", "hostdev", "source"})) {
      source_address = attrs;
    } else if (in_hostdev && name == "alias" &&
               PathIs(stack, {"domain", "devices", "hostdev"})) {
      auto it = attrs.find("name");
      if (it != attrs.end()) alias = it->second;
    }
    return absl::OkStatus();
  };
  auto on_end = [&](const std::string& name) -> absl::Status {
    if (!(in_hostdev && name == "hostdev" &&
          PathIs(stack, {"domain", "devices"}))) {
      return absl::OkStatus();
    }
    in_hostdev = false;
    if (hostdev_attrs["mode"] != "subsystem" || hostdev_attrs["type"] != "pci") {
      return absl::OkStatus();
    }
    PciAddress a;
    if (!ParseHexAttr(source_address["domain"], 0xffffffffu, &a.domain) ||
        !ParseHexAttr(source_address["bus"], 0xff, &a.bus) ||
        !ParseHexAttr(source_address["slot"], 0x1f, &a.slot) ||
        !ParseHexAttr(source_address["function"], 7, &a.function)) {
      return Malformed("PCI hostdev without a valid <source><address>",
                       hostdev_at);
    }
    PciHostdev h;
    h.bdf = a.ToString();
    h.alias = alias;
    h.managed = hostdev_attrs["managed"] == "yes";
    out.push_back(std::move(h));
    return absl::OkStatus();
  };

  size_t i = 0;
  while (i < xml.size()) {
    size_t lt = xml.find('<', i);
    if (lt == absl::string_view::npos) break;
    absl::string_view rest = xml.substr(lt);
    auto skip_to = [&](absl::string_view close, absl::string_view what) {
      size_t j = xml.find(close, lt);
      if (j == absl::string_view::npos) {
        return Malformed(absl::StrCat("unterminated ", what), lt);
      }
      i = j + close.size();
      return absl::OkStatus();
    };
    absl::Status s;
    if (absl::StartsWith(rest, "<!--")) {
      s = skip_to("-->", "comment");
    } else if (absl::StartsWith(rest, "<![CDATA[")) {
      s = skip_to("]]>", "CDATA section");
    } else if (absl::StartsWith(rest, "<?")) {
      s = skip_to("?>", "processing instruction");
    } else if (absl::StartsWith(rest, "<!")) {
      s = skip_to(">", "declaration");
    } else if (absl::StartsWith(rest, "</")) {
      size_t gt = xml.find('>', lt);
      if (gt == absl::string_view::npos) return Malformed("unterminated end tag", lt);
      std::string name(absl::StripAsciiWhitespace(xml.substr(lt + 2, gt - lt - 2)));
      if (stack.empty() || stack.back() != name) {
        return Malformed(absl::StrCat("unexpected </", name, ">"), lt);
      }
      stack.pop_back();
      s = on_end(name);
      i = gt + 1;
    } else {
      std::string name;
      Attrs attrs;
      bool self_closing = false;
      size_t end = lt + 1;
      s = ParseStartTag(xml, lt, &name, &attrs, &self_closing, &end);
      if (!s.ok()) return s;
      if (stack.empty()) {
        if (seen_root) return Malformed("second root element", lt);
        seen_root = true;
      }
      s = on_start(name, attrs, lt);
      if (!s.ok()) return s;
      if (self_closing) {
        s = on_end(name);
      } else {
        stack.push_back(name);
      }
      i = end;
    }
    if (!s.ok()) return s;
  }
  if (!stack.empty()) {
    return Malformed(absl::StrCat("unclosed <", stack.back(), ">"), xml.size());
  }
  if (!seen_root) return Malformed("no root element", 0);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<PciHostdev>> ParsePciHostdevs(
    absl::string_view xml) {
  std::vector<PciHostdev> out;
  std::string launch;
  absl::Status s = ReadDomainXml(xml, &out, &launch);
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::string> LaunchSecurityType(absl::string_view xml) {
  std::vector<PciHostdev> hostdevs;
  std::string launch;
  absl::Status s = ReadDomainXml(xml, &hostdevs, &launch);
  if (!s.ok()) return s;
  return launch;
}

}  // namespace gputravel
