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
#include "util/hex.h"
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

  // Only the pinned root is trusted; the root copy inside the quote is just
  // another untrusted certificate (it cannot vouch for itself).
  absl::Status chain = VerifyChainToRoot(certs, root, at, crls,
                                         "PCK certificate chain",
                                         /*expected_length=*/3);
  if (!chain.ok()) {
    return Unauthenticated(chain.message());
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
        HexEncode(kIntelQeVendorId), HexEncode(quote.header.qe_vendor_id)));
  }
  if (qe.mr_signer != kIntelTdQeMrSigner) {
    return Unauthenticated(absl::StrFormat(
        "QE identity: MRSIGNER is not Intel's TD Quoting Enclave signer: "
        "expected %s, actual %s (the PCK signed the report of another enclave "
        "allowed the provisioning key, so the attestation key is not Intel's)",
        HexEncode(kIntelTdQeMrSigner), HexEncode(qe.mr_signer)));
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
        HexEncode(kIntelTdQeAttributesMask), HexEncode(kIntelTdQeAttributes),
        HexEncode(masked), HexEncode(qe.attributes),
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
        HexEncode(expected), HexEncode(quote.qe_report.report_data)));
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
