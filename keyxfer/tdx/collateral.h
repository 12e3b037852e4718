#ifndef GPUTRAVEL_KEYXFER_TDX_COLLATERAL_H_
#define GPUTRAVEL_KEYXFER_TDX_COLLATERAL_H_

#include <openssl/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "keyxfer/tdx/tcb_info.h"

namespace gputravel::tdx {

// Intel's collateral for one TDX platform (one FMSPC), as Intel's PCS (or a
// PCCS) serves it. JSON form, one object (keyxfer/tdx/testdata/dcap/*.json):
//   {"tcb_info": "<the exact signed JSON body of tcbInfo, as a string>",
//    "tcb_info_signature": "<hex r||s, 128 characters>",
//    "tcb_info_issuer_chain": "<PEM: TCB signing certificate, root>",
//    "qe_identity": "<exact signed JSON body of enclaveIdentity>",
//    "qe_identity_signature": "<hex r||s>",
//    "qe_identity_issuer_chain": "<PEM>",
//    "pck_crl": "<hex DER CRL of the PCK CA>",
//    "pck_crl_issuer_chain": "<PEM: PCK CA, root>",
//    "root_ca_crl": "<hex DER CRL of the root CA>"}
// The bodies stay strings because the signatures cover their exact bytes;
// re-serialising parsed JSON would not reproduce them.
struct CollateralBundle {
  std::string tcb_info;
  std::array<uint8_t, 64> tcb_info_signature{};
  std::string tcb_info_issuer_chain;
  std::string qe_identity;
  std::array<uint8_t, 64> qe_identity_signature{};
  std::string qe_identity_issuer_chain;
  std::string pck_crl_der;
  std::string pck_crl_issuer_chain;
  std::string root_ca_crl_der;
};

// Parses the JSON form above (all nine fields required, unknown fields
// refused). `where` names the source (a file) in errors. Does not verify.
absl::StatusOr<CollateralBundle> ParseCollateralBundle(absl::string_view json,
                                                       absl::string_view where);

// What one CRL says, for reports.
struct CrlSummary {
  std::string issuer;
  absl::Time this_update;
  absl::Time next_update;
  int revoked = 0;  // number of entries
};

// Collateral whose every piece verified at one time.
struct VerifiedCollateral {
  TcbInfo tcb_info;
  QeIdentity qe_identity;
  CrlSummary pck_crl;
  CrlSummary root_ca_crl;
  // The CRLs for the quote's PCK chain (QuoteVerifier::Verify with CRLs).
  std::shared_ptr<X509_CRL> pck_crl_x509;
  std::shared_ptr<X509_CRL> root_ca_crl_x509;
  std::vector<X509_CRL*> Crls() const {
    return {pck_crl_x509.get(), root_ca_crl_x509.get()};
  }
  // The earliest nextUpdate and the oldest issue date of the four pieces.
  absl::Time EarliestNextUpdate() const;
  absl::Time OldestIssue() const;
};

// Verifies every piece of `bundle` at time `at` against the pinned `root`
// (kIntelSgxRootCaPem's certificate in production):
//   root CA CRL: issued and signed by the root, thisUpdate <= at < nextUpdate;
//   TCB info and QE identity: issuer chain (signing certificate, root) to the
//     root at `at`, the signing certificate not revoked by the root CA CRL,
//     ECDSA P-256 signature over the exact body bytes by the signing
//     certificate's key, issueDate <= at < nextUpdate;
//   PCK CRL: issuer chain (PCK CA, root) to the root, the PCK CA not revoked,
//     CRL issued by and signature verifying with that PCK CA, validity.
// Errors: kInvalidArgument for a piece that does not parse, kUnauthenticated
// for every verification failure; each names the piece ("TCB info
// signature", "PCK CRL", ...) and, for time, the dates and `at`.
// Clears OpenSSL's error queue first.
absl::StatusOr<VerifiedCollateral> VerifyCollateral(
    const CollateralBundle& bundle, X509* root, absl::Time at);

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_COLLATERAL_H_
