#include "vfio_mux/mux_callers.h"

#include <grpc/grpc_security_constants.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "auth/authorize.h"
#include "util/files.h"

namespace gputravel {
namespace {

// SHA-256 of the DER of the one certificate in `pem`, or "" if `pem` is not
// exactly one PEM certificate.
std::string Fingerprint(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return "";
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  X509* extra = cert != nullptr ? PEM_read_bio_X509(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  std::string out;
  if (cert != nullptr && extra == nullptr) {
    unsigned char* der = nullptr;
    int n = i2d_X509(cert, &der);
    if (n > 0) {
      unsigned char md[SHA256_DIGEST_LENGTH];
      SHA256(der, static_cast<size_t>(n), md);
      out.assign(reinterpret_cast<const char*>(md), sizeof(md));
    }
    OPENSSL_free(der);
  }
  X509_free(cert);
  X509_free(extra);
  return out;
}

}  // namespace

absl::StatusOr<MuxCallers> MuxCallers::FromPems(const std::vector<std::string>& pems,
                                                const std::string& where) {
  if (pems.empty()) {
    return absl::InvalidArgumentError(
        where + ": no caller certificates; pin the orchestrator's certificate (and any "
                "operator's) so that the MUX obeys only callers its administrator chose");
  }
  MuxCallers c;
  for (size_t i = 0; i < pems.size(); ++i) {
    const std::string at = absl::StrCat(where, "[", i, "]");
    auto id = IdentityFromCertificate(pems[i]);
    if (!id.ok()) return absl::InvalidArgumentError(at + ": " + std::string(id.status().message()));
    if (id->role != kRoleOrchestrator && id->role != kRoleOperator) {
      return absl::InvalidArgumentError(at + ": " + DescribeIdentity(*id) +
                                        " may not call the MUX; pin orchestrator or operator "
                                        "certificates only");
    }
    std::string fp = Fingerprint(pems[i]);
    if (fp.empty()) {
      return absl::InvalidArgumentError(at + ": not exactly one PEM certificate");
    }
    c.pinned_[fp] = *id;
  }
  return c;
}

absl::StatusOr<MuxCallers> MuxCallers::FromConfig(const nlohmann::json& config,
                                                  const std::string& where) {
  if (!config.contains("callers") || !config["callers"].is_array() ||
      config["callers"].empty()) {
    return absl::InvalidArgumentError(
        where + ": 'callers' must be a non-empty array of certificate files (PEM) of the "
                "orchestrator (and operators) this MUX obeys; the host's administrator "
                "pins them (docs/operations-host.md)");
  }
  std::vector<std::string> pems;
  for (const auto& p : config["callers"]) {
    if (!p.is_string()) return absl::InvalidArgumentError(where + ": callers[]: each must be a path");
    auto text = ReadFile(p.get<std::string>());
    if (!text.ok()) {
      return absl::InvalidArgumentError(where + ": callers[]: " +
                                        std::string(text.status().message()));
    }
    pems.push_back(*text);
  }
  return FromPems(pems, where + ": callers");
}

grpc::Status MuxCallers::Authorize(const grpc::ServerContextBase& ctx,
                                   std::initializer_list<const char*> roles) const {
  // Identity and role first (the certificate's own claims), then the pin.
  Identity id;
  grpc::Status role = gputravel::Authorize(ctx, roles, &id);
  if (!role.ok()) return role;
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  std::vector<grpc::string_ref> certs =
      auth->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
  const std::string fp =
      certs.empty() ? "" : Fingerprint(std::string(certs[0].data(), certs[0].size()));
  if (fp.empty() || pinned_.count(fp) == 0) {
    return grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED,
        DescribeIdentity(id) + ": this certificate is not one the host's administrator "
                               "pinned for the MUX; give the administrator the certificate "
                               "to add to the MUX configuration's callers");
  }
  return grpc::Status::OK;
}

}  // namespace gputravel
