#include "keyxfer/tdx/openssl_util.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>

#include <ctime>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gputravel::tdx {
namespace {

struct SigFree {
  void operator()(ECDSA_SIG* p) const { ECDSA_SIG_free(p); }
};

// Intel's formats carry r || s (32 bytes each, big-endian); EVP verifies DER.
absl::StatusOr<std::vector<uint8_t>> RawSignatureToDer(
    const std::array<uint8_t, 64>& rs) {
  std::unique_ptr<ECDSA_SIG, SigFree> sig(ECDSA_SIG_new());
  BIGNUM* r = BN_bin2bn(rs.data(), 32, nullptr);
  BIGNUM* s = BN_bin2bn(rs.data() + 32, 32, nullptr);
  if (!sig || !r || !s || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return absl::InternalError(DrainOpensslErrors());
  }
  int len = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (len <= 0) return absl::InternalError(DrainOpensslErrors());
  std::vector<uint8_t> der(static_cast<size_t>(len));
  uint8_t* p = der.data();
  if (i2d_ECDSA_SIG(sig.get(), &p) != len) {
    return absl::InternalError(DrainOpensslErrors());
  }
  return der;
}

bool IsPemFiller(char c) {
  return c == '\0' || c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// Which certificate an X509_verify_cert error is about. OpenSSL reports the
// depth of the certificate being checked, but several errors are about its
// issuer (the issuer's key does not decode, or the signature made with it
// does not verify, or no issuer was found): those name both, so a damaged
// PCK CA certificate is not blamed on the PCK leaf.
std::string DescribeChainError(X509_STORE_CTX* ctx, absl::string_view when,
                               absl::string_view chain_name,
                               const std::vector<OsslPtr<X509>>& given) {
  const int err = X509_STORE_CTX_get_error(ctx);
  const int depth = X509_STORE_CTX_get_error_depth(ctx);
  X509* current = X509_STORE_CTX_get_current_cert(ctx);
  STACK_OF(X509)* chain = X509_STORE_CTX_get0_chain(ctx);
  X509* issuer = nullptr;
  if (chain != nullptr && depth + 1 < sk_X509_num(chain)) {
    issuer = sk_X509_value(chain, depth + 1);
  }
  std::string detail;
  switch (err) {
    case X509_V_ERR_UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
      detail = absl::StrFormat(
          "the signature on depth %d (%s) does not verify with the key of its "
          "issuer at depth %d (%s): either certificate may be damaged",
          depth, SubjectOf(current), depth + 1, SubjectOf(issuer));
      break;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      if (depth == 0 && given.size() >= 2 && current == given[0].get()) {
        detail = absl::StrFormat(
            "certificate 2 of the %s (subject %s) is not the issuer of "
            "certificate 1 (%s, issuer name %s): certificate 2 is damaged or "
            "belongs to another chain",
            chain_name, SubjectOf(given[1].get()), SubjectOf(given[0].get()),
            NameOf(X509_get_issuer_name(given[0].get())));
        break;
      }
      detail = absl::StrFormat(
          "no certificate in the chain or trust store is the issuer of depth "
          "%d (%s, issuer name %s): the issuing CA certificate is missing, "
          "damaged or not Intel's",
          depth, SubjectOf(current),
          current ? NameOf(X509_get_issuer_name(current)) : "<none>");
      break;
    case X509_V_ERR_CERT_REVOKED:
      detail = absl::StrFormat(
          "depth %d (%s, serial %s) is revoked by the CRL of its issuer (%s)",
          depth, SubjectOf(current), current ? SerialOf(current) : "<none>",
          current ? NameOf(X509_get_issuer_name(current)) : "<none>");
      break;
    case X509_V_ERR_UNABLE_TO_GET_CRL:
      detail = absl::StrFormat(
          "no CRL from the issuer of depth %d (%s, issuer %s) was supplied",
          depth, SubjectOf(current),
          current ? NameOf(X509_get_issuer_name(current)) : "<none>");
      break;
    default:
      detail = absl::StrFormat("depth %d (%s)", depth, SubjectOf(current));
  }
  return absl::StrFormat("%s does not verify to the pinned Intel SGX Root CA "
                         "at %s: %s; %s",
                         chain_name, when, X509_verify_cert_error_string(err),
                         detail);
}

}  // namespace

std::string DrainOpensslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "no OpenSSL error reported" : out;
}

absl::StatusOr<OsslPtr<X509>> ParsePemCertificate(absl::string_view pem) {
  OsslPtr<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return absl::InternalError("BIO_new_mem_buf failed");
  OsslPtr<X509> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return absl::InvalidArgumentError(DrainOpensslErrors());
  return cert;
}

absl::StatusOr<std::vector<OsslPtr<X509>>> ParsePemChain(
    absl::string_view pem, absl::string_view what) {
  static constexpr absl::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr absl::string_view kEnd = "-----END CERTIFICATE-----";
  std::vector<OsslPtr<X509>> out;
  size_t pos = 0;
  while (true) {
    while (pos < pem.size() && IsPemFiller(pem[pos])) ++pos;
    if (pos == pem.size()) break;
    if (pem.substr(pos, kBegin.size()) != kBegin) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: expected \"%s\" at character %d", what, kBegin, pos));
    }
    size_t end = pem.find(kEnd, pos);
    if (end == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: certificate %d has no \"%s\"", what, out.size() + 1, kEnd));
    }
    end += kEnd.size();
    auto cert = ParsePemCertificate(pem.substr(pos, end - pos));
    if (!cert.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: certificate %d does not parse: %s", what,
                          out.size() + 1, cert.status().message()));
    }
    out.push_back(std::move(*cert));
    pos = end;
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": holds no certificate"));
  }
  return out;
}

absl::StatusOr<OsslPtr<X509_CRL>> ParseDerCrl(absl::string_view der,
                                              absl::string_view what) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(der.data());
  OsslPtr<X509_CRL> crl(d2i_X509_CRL(nullptr, &p, static_cast<long>(der.size())));
  if (!crl) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": not a DER certificate revocation list: ", DrainOpensslErrors()));
  }
  size_t used = static_cast<size_t>(
      p - reinterpret_cast<const unsigned char*>(der.data()));
  if (used != der.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d bytes follow the DER CRL (%d bytes)", what, der.size() - used,
        used));
  }
  return crl;
}

std::string NameOf(const X509_NAME* name) {
  if (name == nullptr) return "<none>";
  char buf[256];
  X509_NAME_oneline(name, buf, sizeof(buf));
  return buf;
}

std::string SubjectOf(const X509* cert) {
  if (cert == nullptr) return "<none>";
  return NameOf(X509_get_subject_name(cert));
}

std::string SerialOf(const X509* cert) {
  const ASN1_INTEGER* serial = X509_get0_serialNumber(cert);
  BIGNUM* bn = serial ? ASN1_INTEGER_to_BN(serial, nullptr) : nullptr;
  if (bn == nullptr) {
    ERR_clear_error();
    return "<none>";
  }
  char* hex = BN_bn2hex(bn);
  std::string out = hex ? hex : "<none>";
  OPENSSL_free(hex);
  BN_free(bn);
  return out;
}

absl::StatusOr<absl::Time> Asn1TimeToTime(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("unreadable ASN.1 time");
  }
  return absl::FromTM(tm, absl::UTCTimeZone());
}

std::string FormatUtc(absl::Time t) {
  return absl::FormatTime(absl::RFC3339_sec, t, absl::UTCTimeZone());
}

absl::StatusOr<bool> VerifyEcdsaSha256(EVP_PKEY* key,
                                       absl::Span<const uint8_t> data,
                                       const std::array<uint8_t, 64>& rs) {
  auto der = RawSignatureToDer(rs);
  if (!der.ok()) return der.status();
  OsslPtr<EVP_MD_CTX> md(EVP_MD_CTX_new());
  if (!md || EVP_DigestVerifyInit_ex(md.get(), nullptr, "SHA256", nullptr,
                                     nullptr, key, nullptr) != 1) {
    return absl::InternalError(
        absl::StrCat("EVP_DigestVerifyInit_ex: ", DrainOpensslErrors()));
  }
  int rc = EVP_DigestVerify(md.get(), der->data(), der->size(), data.data(),
                            data.size());
  // A wrong signature leaves an error on the queue; it is the answer, not a
  // failure to report.
  ERR_clear_error();
  return rc == 1;
}

absl::Status VerifyChainToRoot(const std::vector<OsslPtr<X509>>& certs,
                               X509* root, absl::Time at,
                               absl::Span<X509_CRL* const> crls,
                               absl::string_view chain_name,
                               size_t expected_length) {
  if (certs.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat(chain_name, " holds no certificate"));
  }
  OsslPtr<X509_STORE> store(X509_STORE_new());
  OsslPtr<STACK_OF(X509)> untrusted(sk_X509_new_null());
  OsslPtr<X509_STORE_CTX> ctx(X509_STORE_CTX_new());
  if (!store || !untrusted || !ctx ||
      X509_STORE_add_cert(store.get(), root) != 1) {
    return absl::InternalError(DrainOpensslErrors());
  }
  for (X509_CRL* crl : crls) {
    if (X509_STORE_add_crl(store.get(), crl) != 1) {
      return absl::InternalError(DrainOpensslErrors());
    }
  }
  for (size_t i = 1; i < certs.size(); ++i) {
    if (sk_X509_push(untrusted.get(), certs[i].get()) <= 0) {
      return absl::InternalError(DrainOpensslErrors());
    }
  }
  if (X509_STORE_CTX_init(ctx.get(), store.get(), certs[0].get(),
                          untrusted.get()) != 1) {
    return absl::InternalError(DrainOpensslErrors());
  }
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_time(param, absl::ToTimeT(at));
  if (!crls.empty()) {
    // Every certificate below the root must be covered by its issuer's CRL.
    X509_VERIFY_PARAM_set_flags(
        param, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    std::string reason =
        DescribeChainError(ctx.get(), FormatUtc(at), chain_name, certs);
    ERR_clear_error();
    return absl::UnauthenticatedError(reason);
  }
  STACK_OF(X509)* chain = X509_STORE_CTX_get0_chain(ctx.get());
  if (expected_length != 0 &&
      static_cast<size_t>(sk_X509_num(chain)) != expected_length) {
    return absl::UnauthenticatedError(absl::StrFormat(
        "%s verified with %d certificates; expected exactly %d (leaf, %s"
        "root)",
        chain_name, sk_X509_num(chain), expected_length,
        expected_length == 3 ? "CA, " : ""));
  }
  return absl::OkStatus();
}

bool IsP256(EVP_PKEY* key) {
  if (EVP_PKEY_get_base_id(key) != EVP_PKEY_EC) return false;
  char group[64];
  size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group,
                                     sizeof(group), &len) != 1) {
    ERR_clear_error();
    return false;
  }
  return absl::string_view(group, len) == "prime256v1";
}

}  // namespace gputravel::tdx
