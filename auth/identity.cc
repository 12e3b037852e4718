#include "auth/identity.h"

#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "keyxfer/x509.h"

namespace gputravel {
namespace {

constexpr Role kAllRoles[] = {Role::kOrchestrator, Role::kHolder, Role::kOperator,
                              Role::kScheduler,    Role::kMux,    Role::kTrainer};
constexpr char kUriPrefix[] = "gputravel://";
constexpr char kDnsSuffix[] = ".gputravel";

struct GeneralNamesDeleter {
  void operator()(GENERAL_NAMES* g) const { GENERAL_NAMES_free(g); }
};

std::string Asn1ToString(const ASN1_STRING* s) {
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                     static_cast<size_t>(ASN1_STRING_length(s)));
}

// The single value of `nid` in the subject; errors if absent or repeated.
absl::StatusOr<std::string> SubjectField(X509* cert, int nid, const char* label) {
  X509_NAME* subject = X509_get_subject_name(cert);
  int idx = X509_NAME_get_index_by_NID(subject, nid, -1);
  if (idx < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate subject has no ", label,
                     " (not a GPU Travelling identity certificate; issue one with "
                     "`gputravel pki issue`)"));
  }
  if (X509_NAME_get_index_by_NID(subject, nid, idx) >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate subject has more than one ", label));
  }
  unsigned char* utf8 = nullptr;
  int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(
                                         X509_NAME_get_entry(subject, idx)));
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate subject ", label, " is not a valid string"));
  }
  std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kOrchestrator:
      return kRoleOrchestrator;
    case Role::kHolder:
      return kRoleHolder;
    case Role::kOperator:
      return kRoleOperator;
    case Role::kScheduler:
      return kRoleScheduler;
    case Role::kMux:
      return kRoleMux;
    case Role::kTrainer:
      return kRoleTrainer;
  }
  return "unknown";
}

std::vector<std::string> AllRoleNames() {
  std::vector<std::string> out;
  for (Role r : kAllRoles) out.push_back(RoleName(r));
  return out;
}

absl::StatusOr<Role> ParseRole(absl::string_view role) {
  for (Role r : kAllRoles) {
    if (role == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown role '", role,
                   "'; valid roles: ", absl::StrJoin(AllRoleNames(), ", ")));
}

bool operator==(const Identity& a, const Identity& b) {
  return a.role == b.role && a.name == b.name;
}
bool operator!=(const Identity& a, const Identity& b) { return !(a == b); }

std::string DescribeIdentity(const Identity& id) {
  return absl::StrCat(id.role, " '", id.name, "'");
}

absl::Status ValidateName(absl::string_view name) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid name '", name, "': ", why,
                     " (names are 1-63 characters of a-z, 0-9, '.', '_', '-', "
                     "starting with a letter or digit)"));
  };
  if (name.empty()) return bad("empty");
  if (name.size() > 63) return bad("longer than 63 characters");
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name[0])) return bad("must start with a lowercase letter or digit");
  for (char c : name) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') {
      return bad(c >= 'A' && c <= 'Z' ? "uppercase letters are not allowed"
                                       : "contains a character that is not allowed");
    }
  }
  if (absl::StrContains(name, "..")) return bad("contains '..'");
  return absl::OkStatus();
}

absl::Status ValidateIdentity(const Identity& id) {
  absl::StatusOr<Role> role = ParseRole(id.role);
  if (!role.ok()) return role.status();
  return ValidateName(id.name);
}

std::string ServerNameFor(const Identity& id) {
  return absl::StrCat(id.name, ".", id.role, kDnsSuffix);
}

std::string IdentityUri(const Identity& id) {
  return absl::StrCat(kUriPrefix, id.role, "/", id.name);
}

absl::StatusOr<Identity> IdentityFromCertificate(absl::string_view pem_or_der) {
  X509Ptr cert = ParseCertificate(pem_or_der);
  if (!cert) {
    return absl::InvalidArgumentError("not a PEM or DER X.509 certificate");
  }
  absl::StatusOr<std::string> cn = SubjectField(cert.get(), NID_commonName, "CN");
  if (!cn.ok()) return cn.status();
  absl::StatusOr<std::string> ou =
      SubjectField(cert.get(), NID_organizationalUnitName, "OU");
  if (!ou.ok()) return ou.status();

  int critical = 0;
  std::unique_ptr<GENERAL_NAMES, GeneralNamesDeleter> sans(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(
          cert.get(), NID_subject_alt_name, &critical, nullptr)));
  if (!sans && critical == -2) {
    return absl::InvalidArgumentError(
        "certificate has more than one subjectAltName extension");
  }
  std::vector<std::string> uris, dns_names;
  for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans.get()); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(sans.get(), i);
    if (gn->type == GEN_URI) {
      uris.push_back(Asn1ToString(gn->d.uniformResourceIdentifier));
    } else if (gn->type == GEN_DNS) {
      dns_names.push_back(Asn1ToString(gn->d.dNSName));
    } else {
      return absl::InvalidArgumentError(
          "certificate has a subjectAltName that is neither a DNS name nor a URI "
          "(GPU Travelling certificates carry only <name>.<role>.gputravel and "
          "gputravel://<role>/<name>)");
    }
  }
  if (uris.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "certificate has ", uris.size(), " SAN URIs; an identity has exactly one"));
  }

  Identity id;
  if (uris.size() == 1) {
    absl::string_view rest = uris[0];
    if (!absl::ConsumePrefix(&rest, kUriPrefix)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "certificate SAN URI '", uris[0], "' is not of the form gputravel://<role>/<name>"));
    }
    size_t slash = rest.find('/');
    if (slash == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "certificate SAN URI '", uris[0], "' is not of the form gputravel://<role>/<name>"));
    }
    id.role = std::string(rest.substr(0, slash));
    id.name = std::string(rest.substr(slash + 1));
    if (id.name != *cn || id.role != *ou) {
      return absl::InvalidArgumentError(absl::StrCat(
          "certificate SAN URI '", uris[0], "' disagrees with its subject (CN='", *cn,
          "', OU='", *ou, "')"));
    }
  } else {
    id.role = *ou;
    id.name = *cn;
  }
  absl::Status valid = ValidateIdentity(id);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("certificate identity is not valid: ", valid.message()));
  }
  std::string want_dns = ServerNameFor(id);
  for (const std::string& d : dns_names) {
    if (d != want_dns) {
      return absl::InvalidArgumentError(absl::StrCat(
          "certificate SAN DNS name '", d, "' does not match its identity ",
          DescribeIdentity(id), " (want '", want_dns, "')"));
    }
  }
  return id;
}

}  // namespace gputravel
