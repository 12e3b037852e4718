#include "keyxfer/tdx/quote_verifier.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

#include <array>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "keyxfer/tdx/hex.h"
#include "keyxfer/tdx/openssl_util.h"

namespace gputravel::tdx {
namespace {

absl::Status Unauthenticated(absl::string_view message) {
  return absl::UnauthenticatedError(
      absl::StrCat("TDX quote verification failed: ", message));
}

// The quote carries bare curve coordinates; OpenSSL wants an EVP_PKEY, built
// here from the SEC1 uncompressed encoding (0x04 || x || y).
absl::StatusOr<OsslPtr<EVP_PKEY>> P256PublicKey(
    const std::array<uint8_t, 64>& xy) {
  uint8_t point[65];
  point[0] = 0x04;
  std::memcpy(point + 1, xy.data(), xy.size());
  char group[] = "prime256v1";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
      OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point,
                                        sizeof(point)),
      OSSL_PARAM_construct_end(),
  };
  OsslPtr<EVP_PKEY_CTX> ctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, params) != 1) {
    return absl::InvalidArgumentError(DrainOpensslErrors());
  }
  OsslPtr<EVP_PKEY> key(raw);
  // fromdata decodes the point; the explicit check keeps "on the curve" a
  // stated requirement rather than a side effect of decoding.
  OsslPtr<EVP_PKEY_CTX> check(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(),
                                                         nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) != 1) {
    return absl::InvalidArgumentError(DrainOpensslErrors());
  }
  return key;
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
            "the quote's PCK CA certificate (certificate 2, subject %s) is "
            "not the issuer of the PCK leaf (issuer name %s): the PCK CA "
            "certificate is damaged or belongs to another chain",
            SubjectOf(given[1].get()),
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

absl::StatusOr<OsslPtr<EVP_PKEY>> VerifyPckChain(
    const Quote& quote, X509* root, absl::Time at,
    absl::Span<X509_CRL* const> crls) {
  const size_t n = quote.pck_chain_pem.size();
  if (n < 2) {
    return Unauthenticated(absl::StrFormat(
        "PCK certificate chain has %d certificate(s); expected the PCK leaf, "
        "its PCK CA and the root",
        n));
  }
  std::vector<OsslPtr<X509>> certs;
  for (size_t i = 0; i < n; ++i) {
    auto cert = ParsePemCertificate(quote.pck_chain_pem[i]);
    if (!cert.ok()) {
      return Unauthenticated(absl::StrFormat(
          "PCK certificate chain: certificate %d of %d (%s) does not parse: %s",
          i + 1, n, i == 0 ? "the PCK leaf" : i == 1 ? "the PCK CA" : "root",
          cert.status().message()));
    }
    certs.push_back(std::move(*cert));
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
  // Only the pinned root is trusted; the root copy inside the quote is just
  // another untrusted certificate (it cannot vouch for itself).
  for (size_t i = 1; i < n; ++i) {
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
    // Every certificate below the root must be covered by its issuer's CRL:
    // the PCK leaf by the PCK CA's CRL, the PCK CA by the root CA's CRL.
    X509_VERIFY_PARAM_set_flags(param,
                                X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    std::string reason =
        DescribeChainError(ctx.get(), FormatUtc(at), "PCK certificate chain",
                           certs);
    ERR_clear_error();
    return Unauthenticated(reason);
  }
  STACK_OF(X509)* chain = X509_STORE_CTX_get0_chain(ctx.get());
  if (sk_X509_num(chain) != 3) {
    return Unauthenticated(absl::StrFormat(
        "PCK certificate chain verified with %d certificates; a PCK chain is "
        "exactly leaf, PCK CA, root",
        sk_X509_num(chain)));
  }
  OsslPtr<EVP_PKEY> leaf_key(X509_get_pubkey(certs[0].get()));
  if (!leaf_key || !IsP256(leaf_key.get())) {
    ERR_clear_error();
    return Unauthenticated(absl::StrFormat(
        "PCK leaf certificate (%s) does not hold a P-256 key",
        SubjectOf(certs[0].get())));
  }
  return leaf_key;
}

// Step 4: the enclave whose report the PCK signed must be Intel's TD Quoting
// Enclave (kIntelTdQe* in the header say where the values come from). The QE
// report fields are parsed from exactly the bytes the PCK signed, and the
// vendor id from the header the attestation key signs, so this runs on
// authenticated values once steps 2 and 5 pass.
absl::Status CheckQeIdentity(const Quote& quote) {
  const QeReport& qe = quote.qe_report;
  if (quote.header.qe_vendor_id != kIntelQeVendorId) {
    return Unauthenticated(absl::StrFormat(
        "QE identity: QE vendor id in the quote header is not Intel's: "
        "expected %s, actual %s",
        ToHex(kIntelQeVendorId), ToHex(quote.header.qe_vendor_id)));
  }
  if (qe.mr_signer != kIntelTdQeMrSigner) {
    return Unauthenticated(absl::StrFormat(
        "QE identity: MRSIGNER is not Intel's TD Quoting Enclave signer: "
        "expected %s, actual %s (the PCK signed the report of another enclave "
        "allowed the provisioning key, so the attestation key is not Intel's)",
        ToHex(kIntelTdQeMrSigner), ToHex(qe.mr_signer)));
  }
  if (qe.isv_prod_id != kIntelTdQeIsvProdId) {
    return Unauthenticated(absl::StrFormat(
        "QE identity: ISVPRODID is not the TD Quoting Enclave's: expected "
        "0x%04x, actual 0x%04x",
        kIntelTdQeIsvProdId, qe.isv_prod_id));
  }
  if ((qe.misc_select & kIntelTdQeMiscSelectMask) != kIntelTdQeMiscSelect) {
    return Unauthenticated(absl::StrFormat(
        "QE identity: MISCSELECT under mask 0x%08x: expected 0x%08x, actual "
        "0x%08x",
        kIntelTdQeMiscSelectMask, kIntelTdQeMiscSelect,
        qe.misc_select & kIntelTdQeMiscSelectMask));
  }
  std::array<uint8_t, 16> masked{};
  for (size_t i = 0; i < masked.size(); ++i) {
    masked[i] = static_cast<uint8_t>(qe.attributes[i] &
                                     kIntelTdQeAttributesMask[i]);
  }
  if (masked != kIntelTdQeAttributes) {
    const bool debug = (qe.attributes[0] & 0x02) != 0;
    return Unauthenticated(absl::StrFormat(
        "QE identity: ATTRIBUTES under mask %s: expected %s, actual %s "
        "(ATTRIBUTES %s)%s",
        ToHex(kIntelTdQeAttributesMask), ToHex(kIntelTdQeAttributes),
        ToHex(masked), ToHex(qe.attributes),
        debug ? "; DEBUG is set: the host can read a debug enclave's memory, "
                "attestation key included"
              : ""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<QuoteVerifier> QuoteVerifier::Create(
    absl::string_view root_ca_pem) {
  ERR_clear_error();
  auto root = ParsePemCertificate(root_ca_pem);
  if (!root.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TDX root CA certificate does not parse as PEM: ",
        root.status().message()));
  }
  return QuoteVerifier(std::shared_ptr<X509>(root->release(), X509_free));
}

absl::Status QuoteVerifier::Verify(const Quote& quote, absl::Time at) const {
  return Verify(quote, at, {});
}

absl::Status QuoteVerifier::Verify(const Quote& quote, absl::Time at,
                                   absl::Span<X509_CRL* const> crls) const {
  // Errors left on this thread's queue by earlier code must not surface in
  // this verification's reasons.
  ERR_clear_error();
  auto leaf_key = VerifyPckChain(quote, root_.get(), at, crls);
  if (!leaf_key.ok()) return leaf_key.status();

  auto qe_ok = VerifyEcdsaSha256(leaf_key->get(), quote.qe_report.raw,
                                 quote.qe_report_signature);
  if (!qe_ok.ok()) return qe_ok.status();
  if (!*qe_ok) {
    return Unauthenticated(
        "QE report signature does not verify with the PCK leaf certificate's "
        "key (QE report or its signature altered, or the PCK certificate is "
        "not this platform's)");
  }

  // The QE report binds the attestation key by hash; without this check any
  // key could be paired with a genuine QE report.
  std::vector<uint8_t> bound(quote.attestation_key.begin(),
                             quote.attestation_key.end());
  bound.insert(bound.end(), quote.qe_auth_data.begin(),
               quote.qe_auth_data.end());
  std::array<uint8_t, 64> expected{};
  unsigned int md_len = 0;
  if (EVP_Digest(bound.data(), bound.size(), expected.data(), &md_len,
                 EVP_sha256(), nullptr) != 1 ||
      md_len != 32) {
    return absl::InternalError(DrainOpensslErrors());
  }
  if (CRYPTO_memcmp(expected.data(), quote.qe_report.report_data.data(),
                    expected.size()) != 0) {
    return Unauthenticated(absl::StrFormat(
        "QE report data does not bind the attestation key: expected "
        "SHA-256(attestation key || QE auth data) || 32 zero bytes = %s, QE "
        "report data = %s",
        ToHex(expected), ToHex(quote.qe_report.report_data)));
  }

  // A genuine QE report binding the key proves only that some enclave allowed
  // the provisioning key vouches for it; it must be Intel's TD QE.
  if (absl::Status s = CheckQeIdentity(quote); !s.ok()) return s;

  auto attestation_key = P256PublicKey(quote.attestation_key);
  if (!attestation_key.ok()) {
    return Unauthenticated(absl::StrCat(
        "attestation key is not a valid P-256 public key: ",
        attestation_key.status().message()));
  }
  auto quote_ok = VerifyEcdsaSha256(attestation_key->get(), quote.signed_bytes,
                                    quote.signature);
  if (!quote_ok.ok()) return quote_ok.status();
  if (!*quote_ok) {
    return Unauthenticated(
        "quote signature does not verify with the attestation key (quote "
        "header or TD report body altered, or signature altered)");
  }
  return absl::OkStatus();
}

}  // namespace gputravel::tdx
