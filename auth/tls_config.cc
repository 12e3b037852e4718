#include "auth/tls_config.h"

#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "auth/revocation_list.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_certificate_verifier.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "keyxfer/secret_bytes.h"
#include "keyxfer/x509.h"
#include "util/daemon.h"
#include "util/files.h"
#include "util/grpc_status.h"
#include "util/json_fields.h"

namespace gputravel {
namespace {

// Names a field in errors: "orch.json: tls.cert" or "TLS cert".
using Labeler = std::function<std::string(const char* field)>;

}  // namespace

struct TlsMaterial {
  std::string ca_file;  // the CA file's bytes as read
  std::string ca_pem;
  std::string cert_pem;
  SecretBytes key_pem;
  Identity identity;
  std::shared_ptr<RevocationList> crl;  // null: no CRL configured
};

namespace {

using Loaded = TlsMaterial;

// A private key file must be its owner's alone.
absl::Status CheckKeyMode(const std::string& path, const std::string& label) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(label + ": cannot stat " + path + ": " +
                                      std::strerror(errno));
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return absl::InvalidArgumentError(
        label + ": " + path + " may be read or written by group or others (mode " + mode +
        "); a private key must be its owner's alone: chmod 600 " + path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const TlsMaterial>> Load(const TlsFiles& f,
                                                        const Labeler& label) {
  if (f.material != nullptr) return f.material;
  Loaded out;
  const std::pair<const char*, const std::string*> paths[] = {
      {"ca", &f.ca}, {"cert", &f.cert}, {"key", &f.key}};
  for (const auto& p : paths) {
    if (p.second->empty()) {
      return absl::InvalidArgumentError(label(p.first) + ": empty path");
    }
  }
  absl::StatusOr<std::string> ca = ReadFile(f.ca);
  if (!ca.ok()) return absl::InvalidArgumentError(label("ca") + ": " + std::string(ca.status().message()));
  absl::StatusOr<std::string> cert = ReadFile(f.cert);
  if (!cert.ok()) return absl::InvalidArgumentError(label("cert") + ": " + std::string(cert.status().message()));
  absl::Status mode = CheckKeyMode(f.key, label("key"));
  if (!mode.ok()) return mode;
  absl::StatusOr<std::string> key = ReadFile(f.key);
  if (!key.ok()) return absl::InvalidArgumentError(label("key") + ": " + std::string(key.status().message()));
  out.key_pem = SecretBytes::FromString(*key);
  Zeroize(&(*key)[0], key->size());

  X509Ptr ca_x = ParseCertificate(*ca);
  if (!ca_x) {
    return absl::InvalidArgumentError(label("ca") + ": " + f.ca + " is not a PEM certificate");
  }
  if (X509_check_ca(ca_x.get()) == 0) {
    return absl::InvalidArgumentError(
        label("ca") + ": " + f.ca +
        " is not a CA certificate (it should be the campaign's ca.pem; were ca and cert swapped?)");
  }
  // Only the first certificate is checked here, but gRPC would trust every
  // certificate in the file: a bundle could make a connection trust a CA that
  // nothing verified.
  const int ca_count = CountPemCertificates(*ca);
  if (ca_count > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        label("ca"), ": ", f.ca, " holds ", ca_count,
        " certificates; it must hold exactly one, the campaign CA (ca.pem from "
        "`gputravel pki init`): one campaign CA per file"));
  }
  X509Ptr cert_x = ParseCertificate(*cert);
  if (!cert_x) {
    return absl::InvalidArgumentError(label("cert") + ": " + f.cert + " is not a PEM certificate");
  }
  PkeyPtr key_x = ParsePrivateKey(absl::string_view(
      reinterpret_cast<const char*>(out.key_pem.data()), out.key_pem.size()));
  if (!key_x) {
    return absl::InvalidArgumentError(label("key") + ": " + f.key + " is not a PEM private key");
  }
  if (!KeyMatchesCertificate(key_x.get(), cert_x.get())) {
    return absl::InvalidArgumentError(
        label("key") + ": " + f.key + " is not the private key of the certificate " + f.cert +
        " (use the .key written next to that .pem by `gputravel pki issue`)");
  }
  absl::Status chain = VerifyChainsTo(cert_x.get(), ca_x.get());
  if (!chain.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        label("cert"), ": ", f.cert, " does not chain to the CA ", f.ca, " (",
        chain.message(),
        "); use a certificate issued by this campaign's CA (`gputravel pki issue`) "
        "or the ca.pem of the campaign that issued it"));
  }
  absl::StatusOr<Identity> id = IdentityFromCertificate(*cert);
  if (!id.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(label("cert"), ": ", f.cert, ": ", id.status().message()));
  }
  // gRPC gets the very certificate checked above, as PEM (the file may be DER).
  out.ca_pem = CertificateToPem(ca_x.get());
  if (out.ca_pem.empty()) {
    return absl::InternalError(label("ca") + ": OpenSSL: cannot encode " + f.ca + " as PEM");
  }
  if (!f.crl.empty()) {
    absl::StatusOr<std::shared_ptr<RevocationList>> crl = RevocationList::Open(f.crl, out.ca_pem);
    if (!crl.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(label("crl"), ": ", crl.status().message()));
    }
    absl::Status mine = (*crl)->Check(cert_x.get());
    if (!mine.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          label("cert"), ": ", f.cert, ": ", mine.message(),
          "; a revoked identity needs a new certificate (`gputravel pki csr` and `pki sign`)"));
    }
    out.crl = std::move(*crl);
  }
  out.cert_pem = std::move(*cert);
  out.ca_file = std::move(*ca);
  out.identity = *id;
  return std::shared_ptr<const TlsMaterial>(std::make_shared<TlsMaterial>(std::move(out)));
}

// gRPC wants the key as std::string; this copy is wiped once gRPC has its own.
class KeyString {
 public:
  explicit KeyString(const SecretBytes& b)
      : s_(reinterpret_cast<const char*>(b.data()), b.size()) {}
  ~KeyString() {
    if (!s_.empty()) Zeroize(&s_[0], s_.size());
  }
  std::string& get() { return s_; }

 private:
  std::string s_;
};

// The checks gRPC's own certificate verification leaves to us, at every
// handshake once the chain to the CA verified: the CRL in force, and on the
// client side the server's exact identity.
class PeerVerifier final : public grpc::experimental::ExternalCertificateVerifier {
 public:
  PeerVerifier(std::shared_ptr<const TlsMaterial> material, absl::optional<Identity> expected)
      : material_(std::move(material)), expected_(std::move(expected)) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)>, grpc::Status* sync_status) override {
    *sync_status = Check(std::string(request->peer_cert().data(), request->peer_cert().size()));
    return true;
  }
  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {}

 private:
  grpc::Status Check(const std::string& pem) const {
    const char* peer = expected_.has_value() ? "the server" : "the client";
    X509Ptr cert = ParseCertificate(pem);
    if (pem.empty() || !cert) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          std::string(peer) + " presented no certificate");
    }
    if (expected_.has_value()) {
      absl::StatusOr<Identity> id = IdentityFromCertificate(pem);
      if (!id.ok() || *id != *expected_) {
        return grpc::Status(
            grpc::StatusCode::UNAUTHENTICATED,
            absl::StrCat("the server is ",
                         id.ok() ? DescribeIdentity(*id) : std::string("no GPU Travelling identity"),
                         ", not the expected ", DescribeIdentity(*expected_)));
      }
    }
    if (material_->crl != nullptr) {
      absl::Status s = material_->crl->Check(cert.get());
      if (!s.ok()) {
        return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                            absl::StrCat(peer, "'s ", s.message()));
      }
    }
    return grpc::Status::OK;
  }

  const std::shared_ptr<const TlsMaterial> material_;
  const absl::optional<Identity> expected_;
};

std::shared_ptr<grpc::experimental::StaticDataCertificateProvider> Provider(
    const TlsMaterial& m) {
  KeyString key(m.key_pem);
  auto provider = std::make_shared<grpc::experimental::StaticDataCertificateProvider>(
      m.ca_pem, std::vector<grpc::experimental::IdentityKeyCertPair>{{key.get(), m.cert_pem}});
  return provider;
}

Labeler FileLabeler() {
  return [](const char* field) { return std::string("TLS ") + field; };
}


}  // namespace

absl::StatusOr<TlsFiles> ParseTlsConfig(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) {
    return absl::InvalidArgumentError(
        where + ": missing (want an object {\"ca\": PATH, \"cert\": PATH, \"key\": PATH})");
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        where + ": must be an object {\"ca\": PATH, \"cert\": PATH, \"key\": PATH}");
  }
  absl::Status known = RefuseUnknownFields(j, {"ca", "cert", "key", "crl"}, where);
  if (!known.ok()) return known;
  TlsFiles out;
  if (j.contains("crl")) {
    if (!j["crl"].is_string() || j["crl"].get<std::string>().empty()) {
      return absl::InvalidArgumentError(where + ".crl: must be a non-empty string (a file path)");
    }
    out.crl = j["crl"].get<std::string>();
  }
  const std::pair<const char*, std::string*> fields[] = {
      {"ca", &out.ca}, {"cert", &out.cert}, {"key", &out.key}};
  for (const auto& f : fields) {
    std::string label = where + "." + f.first;
    if (!j.contains(f.first)) return absl::InvalidArgumentError(label + ": missing");
    const nlohmann::json& v = j[f.first];
    if (!v.is_string()) {
      return absl::InvalidArgumentError(label + ": must be a string (a file path)");
    }
    *f.second = v.get<std::string>();
    if (f.second->empty()) return absl::InvalidArgumentError(label + ": empty path");
  }
  absl::StatusOr<std::shared_ptr<const TlsMaterial>> loaded =
      Load(out, [&](const char* field) { return where + "." + field; });
  if (!loaded.ok()) return loaded.status();
  out.material = std::move(*loaded);
  return out;
}

absl::Status RequireTlsCaBytes(const TlsFiles& files, absl::string_view ca_file_bytes) {
  if (files.material == nullptr) {
    return absl::FailedPreconditionError("TLS ca " + files.ca + ": not read yet");
  }
  if (files.material->ca_file != ca_file_bytes) {
    return absl::FailedPreconditionError(
        "TLS ca " + files.ca +
        " changed between its check and its measurement: refusing to start with a CA "
        "that is not the one measured");
  }
  return absl::OkStatus();
}

absl::Status CheckTlsFiles(const TlsFiles& files) {
  return Load(files, FileLabeler()).status();
}

std::shared_ptr<RevocationList> RevocationListOf(const TlsFiles& files) {
  absl::StatusOr<std::shared_ptr<const TlsMaterial>> loaded = Load(files, FileLabeler());
  return loaded.ok() ? (*loaded)->crl : nullptr;
}

absl::StatusOr<Identity> LocalIdentity(const TlsFiles& files) {
  absl::StatusOr<std::shared_ptr<const TlsMaterial>> loaded = Load(files, FileLabeler());
  if (!loaded.ok()) return loaded.status();
  return (*loaded)->identity;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  absl::StatusOr<std::shared_ptr<const TlsMaterial>> loaded = Load(files, FileLabeler());
  if (!loaded.ok()) return loaded.status();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(**loaded));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.set_certificate_verifier(
      grpc::experimental::ExternalCertificateVerifier::Create<PeerVerifier>(*loaded,
                                                                           absl::nullopt));
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::experimental::TlsServerCredentials(options);
  if (!creds) return absl::InternalError("gRPC: cannot create TLS server credentials");
  return creds;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeSecureChannel(
    const std::string& endpoint, const TlsFiles& files, const Identity& expected_server,
    const SecureChannelOptions& channel_options) {
  if (endpoint.empty()) {
    return absl::InvalidArgumentError("empty endpoint (want unix:/path or host:port)");
  }
  if (endpoint.rfind("unix:", 0) == 0) {
    absl::Status length = CheckUnixSocketPathLength(endpoint.substr(5));
    if (!length.ok()) return length;
  }
  absl::Status valid = ValidateIdentity(expected_server);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected server identity: ", valid.message()));
  }
  absl::StatusOr<std::shared_ptr<const TlsMaterial>> loaded = Load(files, FileLabeler());
  if (!loaded.ok()) return loaded.status();
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(**loaded));
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  // The verifier checks the server's exact identity (not only its DNS name)
  // and the CRL, at every handshake.
  options.set_certificate_verifier(
      grpc::experimental::ExternalCertificateVerifier::Create<PeerVerifier>(*loaded,
                                                                           expected_server));
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::experimental::TlsCredentials(options);
  if (!creds) return absl::InternalError("gRPC: cannot create TLS channel credentials");
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(ServerNameFor(expected_server));
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  if (channel_options.keepalive) {
    // Ping while a call is open (never on an idle channel), without limit
    // even when the client sends nothing (a watch only receives), and give
    // the connection up when a ping goes unanswered.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kClientKeepaliveTimeMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kClientKeepaliveTimeoutMs);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  return grpc::CreateCustomChannel(endpoint, creds, args);
}

}  // namespace gputravel
