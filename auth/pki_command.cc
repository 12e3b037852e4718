#include "auth/pki_command.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "auth/identity.h"
#include "auth/pki.h"
#include "nlohmann/json.hpp"
#include "util/files.h"
#include "util/flags.h"

namespace gputravel {
namespace {

constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kUsage = 2;

constexpr int kDefaultCaDays = 3650;
constexpr int kDefaultIdentityDays = 365;

std::string PkiUsage() {
  return absl::StrCat(
      "Usage: gputravel pki SUBCOMMAND [flags]\n"
      "\n"
      "The campaign PKI for mutual TLS between the daemons and clients of GPU\n"
      "Travelling. Every connection presents a certificate from the campaign CA;\n"
      "servers authorize each call by the caller's role and name.\n"
      "\n"
      "Subcommands:\n"
      "  init    Create the campaign CA: DIR/ca.pem and DIR/ca.key (ECDSA P-384).\n"
      "  issue   Issue a certificate and a key for one identity (development: the\n"
      "          key is made next to the CA): DIR/<role>-<name>.pem and .key.\n"
      "  csr     Make a key and a certificate signing request where the key will\n"
      "          live (inside the TD); the key never leaves that machine.\n"
      "  sign    Sign a request at the CA, as the identity the CA's operator names.\n"
      "  revoke  Revoke every certificate of an identity: publishes DIR/crl.pem.\n"
      "  crl     Publish DIR/crl.pem again with fresh dates (before nextUpdate).\n"
      "  show    Print the role, name, issuer and expiry of a certificate.\n"
      "  mux-kit What the host's administrator installs for the MUX: its TLS files\n"
      "          and the caller certificates to pin (never the CA's key).\n"
      "\n"
      "Roles: ", absl::StrJoin(AllRoleNames(), ", "), "\n"
      "Names: 1-63 characters of a-z, 0-9, '.', '_', '-', starting with a letter or\n"
      "digit. Private keys are written with mode 0600; existing files are never\n"
      "overwritten (except DIR/crl.pem, replaced whole). Daemons name the CRL in\n"
      "their \"tls\": {\"crl\": PATH} and reread it when it changes.\n"
      "Exit status: 0 success, 1 failure, 2 usage error.\n"
      "\n"
      "Run `gputravel pki SUBCOMMAND --help` for the flags of a subcommand.\n");
}

int UsageError(const std::string& cmd, const std::string& msg) {
  std::fprintf(stderr, "%s: %s (see %s --help)\n", cmd.c_str(), msg.c_str(), cmd.c_str());
  return kUsage;
}

int Failure(const std::string& cmd, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", cmd.c_str(), std::string(s.message()).c_str());
  return kFailure;
}

// Parses; returns -1 to continue, or an exit status (help printed, bad usage).
int ParseFlags(Flags& flags, const std::string& cmd, int argc, char** argv) {
  absl::Status ps = flags.Parse(argc, argv, 3);
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return kOk;
  }
  if (!ps.ok()) return UsageError(cmd, std::string(ps.message()));
  if (!flags.positional().empty()) {
    return UsageError(cmd, "unexpected argument '" + flags.positional()[0] + "'");
  }
  return -1;
}

int RequireFlags(const Flags& flags, const std::string& cmd,
                 std::initializer_list<const char*> names) {
  for (const char* n : names) {
    if (!flags.IsSet(n) || flags.Get(n).empty()) {
      return UsageError(cmd, std::string("--") + n + " is required");
    }
  }
  return -1;
}

// --days: an integer in [kMinValidDays, kMaxValidDays].
bool ParseDays(const Flags& flags, const std::string& cmd, int* days, int* status) {
  if (!absl::SimpleAtoi(flags.Get("days"), days) || *days < kMinValidDays ||
      *days > kMaxValidDays) {
    *status = UsageError(cmd, absl::StrCat("--days must be an integer in ", kMinValidDays,
                                           "..", kMaxValidDays, ", not '",
                                           flags.Get("days"), "'"));
    return false;
  }
  return true;
}

// --role and --name as an identity; -1 to continue or a usage exit status.
int ParseIdentityFlags(const Flags& flags, const std::string& cmd, Identity* id) {
  *id = Identity{flags.Get("role"), flags.Get("name")};
  absl::StatusOr<Role> role = ParseRole(id->role);
  if (!role.ok()) return UsageError(cmd, "--role: " + std::string(role.status().message()));
  absl::Status valid = ValidateName(id->name);
  if (!valid.ok()) return UsageError(cmd, "--name: " + std::string(valid.message()));
  return -1;
}

// The common start of a pki command: parses, requires `required`, and
// reads --days into `*days` and --role/--name into `*id` when not null.
// -1 to go on, else the exit status.
int ParseCommand(Flags& flags, const std::string& cmd, int argc, char** argv,
                 std::initializer_list<const char*> required, int* days, Identity* id) {
  int rc = ParseFlags(flags, cmd, argc, argv);
  if (rc >= 0) return rc;
  if ((rc = RequireFlags(flags, cmd, required)) >= 0) return rc;
  if (days != nullptr && !ParseDays(flags, cmd, days, &rc)) return rc;
  if (id != nullptr && (rc = ParseIdentityFlags(flags, cmd, id)) >= 0) return rc;
  return -1;
}

int Init(int argc, char** argv) {
  const std::string cmd = "gputravel pki init";
  Flags flags(cmd,
              "Creates the campaign CA: DIR/ca.pem (certificate) and DIR/ca.key\n"
              "(private key, mode 0600), ECDSA P-384, self-signed, X.509 v3 with\n"
              "basicConstraints CA:TRUE, and the first CRL DIR/crl.pem (empty, valid\n"
              "30 days). Creates DIR (mode 0700) if missing. Refuses to\n"
              "overwrite an existing CA. Keep ca.key offline: whoever holds it can\n"
              "issue any identity. Exit status: 0 success, 1 failure, 2 usage error.");
  flags.String("dir", "", "Directory of the campaign PKI (required).");
  flags.String("campaign", "", "Campaign name, the CA's CN (required; same rules as names).");
  flags.String("days", std::to_string(kDefaultCaDays), "Validity of the CA in days.");
  int days = 0;
  int rc = ParseCommand(flags, cmd, argc, argv, {"dir", "campaign"}, &days, nullptr);
  if (rc >= 0) return rc;
  absl::Status valid = ValidateName(flags.Get("campaign"));
  if (!valid.ok()) return UsageError(cmd, "--campaign: " + std::string(valid.message()));
  const std::string dir = flags.Get("dir");
  absl::Status s = InitCampaignCa(dir, flags.Get("campaign"), days);
  if (!s.ok()) return Failure(cmd, s);
  std::printf("Created the CA of campaign '%s' (valid %d days).\n",
              flags.Get("campaign").c_str(), days);
  std::printf("Wrote %s\n", CaCertPath(dir).c_str());
  std::printf("Wrote %s (private key, mode 0600)\n", CaKeyPath(dir).c_str());
  std::printf("Wrote %s (the CRL, empty)\n", CrlPath(dir).c_str());
  return kOk;
}

int Issue(int argc, char** argv) {
  const std::string cmd = "gputravel pki issue";
  Flags flags(cmd,
              "Issues a certificate for one identity, signed by the campaign CA in DIR:\n"
              "DIR/<role>-<name>.pem and DIR/<role>-<name>.key (mode 0600). The\n"
              "certificate carries Subject CN=<name>, OU=<role> and the SANs\n"
              "DNS:<name>.<role>.gputravel (the server name clients verify) and\n"
              "URI:gputravel://<role>/<name>; it is valid for TLS client and server\n"
              "authentication. Refuses to overwrite existing files. For development:\n"
              "the key is made next to the CA, so the CA's operator has seen it; in a\n"
              "deployment make it where it lives with `pki csr` and sign with `pki sign`.\n"
              "Roles: " + absl::StrJoin(AllRoleNames(), ", ") + ".\n"
              "Exit status: 0 success, 1 failure, 2 usage error.");
  flags.String("dir", "", "Directory of the campaign PKI, holding ca.pem and ca.key (required).");
  flags.String("role", "", "Role of the identity (required).");
  flags.String("name", "", "Name of the identity, e.g. hospital-a (required).");
  flags.String("days", std::to_string(kDefaultIdentityDays),
               "Validity in days (at most the CA's remaining validity).");
  int days = 0;
  Identity id;
  int rc = ParseCommand(flags, cmd, argc, argv, {"dir", "role", "name"}, &days, &id);
  if (rc >= 0) return rc;
  absl::StatusOr<IssuedFiles> files = IssueIdentity(flags.Get("dir"), id, days);
  if (!files.ok()) return Failure(cmd, files.status());
  std::printf("Issued %s (server name %s, valid %d days).\n", DescribeIdentity(id).c_str(),
              ServerNameFor(id).c_str(), days);
  std::printf("Wrote %s\n", files->cert.c_str());
  std::printf("Wrote %s (private key, mode 0600)\n", files->key.c_str());
  return kOk;
}

int Csr(int argc, char** argv) {
  const std::string cmd = "gputravel pki csr";
  Flags flags(cmd,
              "Makes the private key of one identity where it will live (run it inside\n"
              "the TD of that identity) and a certificate signing request for it:\n"
              "OUT/<role>-<name>.key (ECDSA P-384, mode 0600; it never needs to leave\n"
              "this machine) and OUT/<role>-<name>.csr (Subject O=gputravel, OU=<role>,\n"
              "CN=<name>, signed with the new key). Take only the .csr to the CA's\n"
              "operator, who signs it with `gputravel pki sign`; bring back the .pem\n"
              "and the CA's ca.pem and crl.pem. Creates OUT (mode 0700) if missing;\n"
              "refuses to overwrite.\n"
              "Roles: " + absl::StrJoin(AllRoleNames(), ", ") + ".\n"
              "Exit status: 0 success, 1 failure, 2 usage error.");
  flags.String("out", "", "Directory for the key and the request (required).");
  flags.String("role", "", "Role of the identity (required).");
  flags.String("name", "", "Name of the identity, e.g. hospital-a (required).");
  Identity id;
  int rc = ParseCommand(flags, cmd, argc, argv, {"out", "role", "name"}, nullptr, &id);
  if (rc >= 0) return rc;
  absl::StatusOr<RequestFiles> files = CreateRequest(flags.Get("out"), id);
  if (!files.ok()) return Failure(cmd, files.status());
  std::printf("Made a key and a signing request for %s.\n", DescribeIdentity(id).c_str());
  std::printf("Wrote %s (private key, mode 0600: keep it here)\n", files->key.c_str());
  std::printf("Wrote %s (take it to the CA: gputravel pki sign --csr ...)\n",
              files->csr.c_str());
  return kOk;
}

int Sign(int argc, char** argv) {
  const std::string cmd = "gputravel pki sign";
  Flags flags(cmd,
              "Signs a certificate signing request (from `gputravel pki csr`) with the\n"
              "campaign CA in DIR, as the identity you name with --role and --name:\n"
              "writes DIR/<role>-<name>.pem (and a copy in DIR/issued/). The request\n"
              "must be for exactly that identity (Subject O=gputravel, OU=<role>,\n"
              "CN=<name>) and signed by its own EC key (P-256 or P-384); a request for\n"
              "another role or name is refused. Nothing else of the request is used:\n"
              "any extension it asks for is ignored, and the certificate carries the\n"
              "same extensions as `pki issue` (CA:FALSE, digitalSignature, server and\n"
              "client authentication, the SANs of the identity). Refuses to overwrite.\n"
              "Roles: " + absl::StrJoin(AllRoleNames(), ", ") + ".\n"
              "Exit status: 0 success, 1 failure (including a refused request), 2 usage\n"
              "error.");
  flags.String("dir", "", "Directory of the campaign PKI, holding ca.pem and ca.key (required).");
  flags.String("csr", "", "The signing request, PEM (required).");
  flags.String("role", "", "Role to sign the request as (required).");
  flags.String("name", "", "Name to sign the request as (required).");
  flags.String("days", std::to_string(kDefaultIdentityDays),
               "Validity in days (at most the CA's remaining validity).");
  int days = 0;
  Identity id;
  int rc = ParseCommand(flags, cmd, argc, argv, {"dir", "csr", "role", "name"}, &days, &id);
  if (rc >= 0) return rc;
  absl::StatusOr<std::string> csr = ReadFile(flags.Get("csr"));
  if (!csr.ok()) return Failure(cmd, csr.status());
  absl::StatusOr<std::string> cert = SignRequest(flags.Get("dir"), *csr, id, days);
  if (!cert.ok()) {
    return Failure(cmd, absl::Status(cert.status().code(),
                                     absl::StrCat(flags.Get("csr"), ": ", cert.status().message())));
  }
  std::printf("Signed %s (server name %s, valid %d days).\n", DescribeIdentity(id).c_str(),
              ServerNameFor(id).c_str(), days);
  std::printf("Wrote %s\n", cert->c_str());
  return kOk;
}

void PrintCrl(const std::string& dir, const CrlInfo& info) {
  std::printf("Published %s: CRL number %ld, %zu revoked certificate(s), next update %s.\n",
              CrlPath(dir).c_str(), info.number, info.revoked, info.next_update.c_str());
  std::printf("Copy it to every daemon's tls.crl before then; each rereads it at its next\n"
              "handshake.\n");
}

int Revoke(int argc, char** argv) {
  const std::string cmd = "gputravel pki revoke";
  Flags flags(cmd,
              "Revokes every certificate the campaign CA in DIR signed for one identity\n"
              "(those in DIR/issued/ and DIR/<role>-<name>.pem) and publishes the CRL\n"
              "DIR/crl.pem: the CRL in force plus their serial numbers, with a cRLNumber\n"
              "one higher, signed by the CA. Copy crl.pem to where every daemon's\n"
              "tls.crl points: each rereads it when it changes and refuses a revoked\n"
              "certificate at its next TLS handshake, in either direction. Revocation\n"
              "cannot be undone: issue a new certificate instead.\n"
              "Exit status: 0 success, 1 failure (no certificate of that identity), 2\n"
              "usage error.");
  flags.String("dir", "", "Directory of the campaign PKI (required).");
  flags.String("role", "", "Role of the identity to revoke (required).");
  flags.String("name", "", "Name of the identity to revoke (required).");
  flags.String("days", std::to_string(kDefaultCrlDays),
               "Days until the CRL's nextUpdate (publish again before: pki crl).");
  int days = 0;
  Identity id;
  int rc = ParseCommand(flags, cmd, argc, argv, {"dir", "role", "name"}, &days, &id);
  if (rc >= 0) return rc;
  absl::StatusOr<CrlInfo> info = RevokeIdentity(flags.Get("dir"), id, days);
  if (!info.ok()) return Failure(cmd, info.status());
  if (info->added.empty()) {
    std::printf("Every certificate of %s was already revoked.\n", DescribeIdentity(id).c_str());
  }
  for (const std::string& serial : info->added) {
    std::printf("Revoked certificate %s of %s.\n", serial.c_str(), DescribeIdentity(id).c_str());
  }
  PrintCrl(flags.Get("dir"), *info);
  return kOk;
}

int Crl(int argc, char** argv) {
  const std::string cmd = "gputravel pki crl";
  Flags flags(cmd,
              "Publishes the CRL DIR/crl.pem again, with the same revoked certificates,\n"
              "a cRLNumber one higher and fresh dates. Daemons refuse every handshake\n"
              "once the CRL they hold is past its nextUpdate, so publish (and copy)\n"
              "before then. Exit status: 0 success, 1 failure, 2 usage error.");
  flags.String("dir", "", "Directory of the campaign PKI (required).");
  flags.String("days", std::to_string(kDefaultCrlDays), "Days until the CRL's nextUpdate.");
  int days = 0;
  int rc = ParseCommand(flags, cmd, argc, argv, {"dir"}, &days, nullptr);
  if (rc >= 0) return rc;
  absl::StatusOr<CrlInfo> info = RefreshCrl(flags.Get("dir"), days);
  if (!info.ok()) return Failure(cmd, info.status());
  PrintCrl(flags.Get("dir"), *info);
  return kOk;
}

int Show(int argc, char** argv) {
  const std::string cmd = "gputravel pki show";
  Flags flags(cmd,
              "Prints what a certificate says: role, name, server name, subject,\n"
              "issuer, serial and validity (a campaign CA shows as role 'ca'). Does not\n"
              "verify the signature. Exit status: 0 success, 1 failure (unreadable or\n"
              "not a GPU Travelling certificate), 2 usage error.");
  flags.String("cert", "", "Certificate file, PEM or DER (required).");
  flags.Bool("json", "Print one JSON object instead of text.");
  int rc = ParseFlags(flags, cmd, argc, argv);
  if (rc >= 0) return rc;
  if ((rc = RequireFlags(flags, cmd, {"cert"})) >= 0) return rc;
  const std::string path = flags.Get("cert");
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return Failure(cmd, text.status());
  absl::StatusOr<CertificateInfo> info = DescribeCertificate(*text);
  if (!info.ok()) {
    return Failure(cmd, absl::InvalidArgumentError(
                            absl::StrCat(path, ": ", info.status().message())));
  }
  const std::string role = info->is_ca ? "ca" : info->identity.role;
  const std::string server_name = info->is_ca ? "" : ServerNameFor(info->identity);
  if (flags.IsSet("json")) {
    nlohmann::json j = {{"file", path},
                        {"ca", info->is_ca},
                        {"role", role},
                        {"name", info->is_ca ? "" : info->identity.name},
                        {"server_name", server_name},
                        {"subject", info->subject},
                        {"issuer", info->issuer},
                        {"serial", info->serial},
                        {"not_before", info->not_before},
                        {"not_after", info->not_after}};
    // The path and the certificate's text need not be valid UTF-8: replace
    // invalid bytes (U+FFFD) instead of letting dump() throw.
    std::printf("%s\n",
                j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kOk;
  }
  std::printf("file:        %s\n", path.c_str());
  std::printf("role:        %s\n", info->is_ca ? "ca (campaign CA)" : role.c_str());
  if (!info->is_ca) {
    std::printf("name:        %s\n", info->identity.name.c_str());
    std::printf("server name: %s\n", server_name.c_str());
  }
  std::printf("subject:     %s\n", info->subject.c_str());
  std::printf("issuer:      %s\n", info->issuer.c_str());
  std::printf("serial:      %s\n", info->serial.c_str());
  std::printf("not before:  %s\n", info->not_before.c_str());
  std::printf("not after:   %s\n", info->not_after.c_str());
  return kOk;
}

// One "role/name" of --callers.
absl::StatusOr<Identity> ParseCaller(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos) {
    return absl::InvalidArgumentError("'" + text + "' is not ROLE/NAME");
  }
  Identity id{text.substr(0, slash), text.substr(slash + 1)};
  if (id.role != kRoleOrchestrator && id.role != kRoleOperator) {
    return absl::InvalidArgumentError("'" + text +
                                      "': the MUX obeys only orchestrator and operator callers");
  }
  absl::Status valid = ValidateIdentity(id);
  if (!valid.ok()) return valid;
  return id;
}

int MuxKit(int argc, char** argv) {
  const std::string cmd = "gputravel pki mux-kit";
  Flags flags(cmd,
              "Writes what the host's administrator installs under /etc/gputravel for\n"
              "the MUX, from the campaign PKI in DIR, into the new directory OUT:\n"
              "  OUT/pki/ca.pem, OUT/pki/crl.pem, OUT/pki/mux-mux.pem,\n"
              "  OUT/pki/mux-mux.key (0600)\n"
              "      the MUX's TLS files (\"tls\" in mux.json);\n"
              "  OUT/mux-callers/<role>-<name>.pem\n"
              "      the certificates the MUX obeys (\"callers\"): only these, not any\n"
              "      other certificate of the campaign CA;\n"
              "  OUT/mux-fragment.json\n"
              "      the \"tls\" and \"callers\" fields with their installed paths.\n"
              "The CA's key is never copied. Issue the identities first (pki issue\n"
              "--role mux --name mux, --role orchestrator ...). Exit status: 0\n"
              "success, 1 failure, 2 usage error.");
  flags.String("dir", "", "Directory of the campaign PKI (required).");
  flags.String("out", "", "Directory to create for the kit (required; must not exist).");
  flags.String("mux", "mux", "Name of the MUX's identity (role mux).");
  flags.String("callers", "orchestrator/orchestrator",
               "Comma-separated ROLE/NAME of the callers to pin (orchestrator or operator).");
  int rc = ParseFlags(flags, cmd, argc, argv);
  if (rc >= 0) return rc;
  if ((rc = RequireFlags(flags, cmd, {"dir", "out"})) >= 0) return rc;
  const Identity mux{kRoleMux, flags.Get("mux")};
  absl::Status valid = ValidateIdentity(mux);
  if (!valid.ok()) return UsageError(cmd, "--mux: " + std::string(valid.message()));
  std::vector<Identity> callers;
  for (absl::string_view part : absl::StrSplit(flags.Get("callers"), ',', absl::SkipEmpty())) {
    absl::StatusOr<Identity> id = ParseCaller(std::string(part));
    if (!id.ok()) return UsageError(cmd, "--callers: " + std::string(id.status().message()));
    callers.push_back(*id);
  }
  if (callers.empty()) return UsageError(cmd, "--callers: at least one caller");
  const std::string dir = flags.Get("dir"), out = flags.Get("out");
  if (::mkdir(out.c_str(), 0700) != 0 || ::mkdir((out + "/pki").c_str(), 0700) != 0 ||
      ::mkdir((out + "/mux-callers").c_str(), 0755) != 0) {
    return Failure(cmd, absl::FailedPreconditionError(
                            "cannot create " + out + " (it must not exist yet): " +
                            std::strerror(errno)));
  }
  struct Copy {
    std::string from, to;
    int mode;
  };
  std::vector<Copy> copies = {
      {CaCertPath(dir), out + "/pki/ca.pem", 0644},
      {CrlPath(dir), out + "/pki/crl.pem", 0644},
      {IdentityCertPath(dir, mux), out + "/pki/mux-mux.pem", 0644},
      {IdentityKeyPath(dir, mux), out + "/pki/mux-mux.key", 0600}};
  nlohmann::json pinned = nlohmann::json::array();
  for (const Identity& id : callers) {
    const std::string file = id.role + "-" + id.name + ".pem";
    copies.push_back({IdentityCertPath(dir, id), out + "/mux-callers/" + file, 0644});
    pinned.push_back("/etc/gputravel/mux-callers/" + file);
  }
  for (const Copy& c : copies) {
    absl::StatusOr<std::string> text = ReadFile(c.from);
    if (!text.ok()) return Failure(cmd, text.status());
    absl::Status s = WriteNewFile(c.to, *text, c.mode);
    if (!s.ok()) return Failure(cmd, s);
    std::printf("Wrote %s\n", c.to.c_str());
  }
  for (const Identity& id : callers) {
    // A pinned file must be a certificate of that identity.
    absl::StatusOr<Identity> got =
        IdentityFromCertificate(*ReadFile(out + "/mux-callers/" + id.role + "-" + id.name + ".pem"));
    if (!got.ok() || *got != id) {
      return Failure(cmd, absl::InvalidArgumentError(IdentityCertPath(dir, id) +
                                                     " is not a certificate of " +
                                                     DescribeIdentity(id)));
    }
  }
  nlohmann::json fragment = {{"tls",
                              {{"ca", "/etc/gputravel/pki/ca.pem"},
                               {"cert", "/etc/gputravel/pki/mux-mux.pem"},
                               {"key", "/etc/gputravel/pki/mux-mux.key"},
                               {"crl", "/etc/gputravel/pki/crl.pem"}}},
                             {"callers", pinned}};
  absl::Status s = WriteNewFile(out + "/mux-fragment.json", fragment.dump(2) + "\n", 0644);
  if (!s.ok()) return Failure(cmd, s);
  std::printf("Wrote %s/mux-fragment.json\n", out.c_str());
  std::printf("Install as root: cp -r %s/pki %s/mux-callers /etc/gputravel/, merge the\n"
              "fragment into /etc/gputravel/mux.json, and list the campaign's TDs in its\n"
              "\"domains\" (docs/operations-host.md).\n",
              out.c_str(), out.c_str());
  return kOk;
}

}  // namespace

int PkiCommand(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "gputravel pki: missing subcommand\n\n%s", PkiUsage().c_str());
    return kUsage;
  }
  const std::string sub = argv[2];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::printf("%s", PkiUsage().c_str());
    return kOk;
  }
  if (sub == "init") return Init(argc, argv);
  if (sub == "issue") return Issue(argc, argv);
  if (sub == "csr") return Csr(argc, argv);
  if (sub == "sign") return Sign(argc, argv);
  if (sub == "revoke") return Revoke(argc, argv);
  if (sub == "crl") return Crl(argc, argv);
  if (sub == "show") return Show(argc, argv);
  if (sub == "mux-kit") return MuxKit(argc, argv);
  std::fprintf(stderr, "gputravel pki: unknown subcommand '%s'\n\n%s", sub.c_str(),
               PkiUsage().c_str());
  return kUsage;
}

}  // namespace gputravel
