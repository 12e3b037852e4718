#ifndef GPUTRAVEL_KEYXFER_TDX_QUOTE_VERIFIER_H_
#define GPUTRAVEL_KEYXFER_TDX_QUOTE_VERIFIER_H_

#include <openssl/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "keyxfer/tdx/quote.h"

namespace gputravel::tdx {

// Identity of Intel's TD Quoting Enclave (TD_QE), as Intel's PCS publishes it
// for TDX (GET https://api.trustedservices.intel.com/tdx/certification/v4/
// qe/identity: "id": "TD_QE", "mrsigner", "isvprodid", "miscselect" with
// "miscselectMask", "attributes" with "attributesMask"); the real quote in
// keyxfer/tdx/testdata carries exactly these. The PCK key signs the report of
// any enclave that is allowed the provisioning key, and a platform owner with
// flexible launch control can allow it to an enclave of its own: only a
// report from this enclave makes the attestation key Intel's.
// The QE's ISVSVN against the TCB levels of the signed QE identity is checked
// by EvaluateTcb (tcb_evaluation.h) when collateral is configured.
inline constexpr std::array<uint8_t, 32> kIntelTdQeMrSigner = {
    0xdc, 0x9e, 0x2a, 0x7c, 0x6f, 0x94, 0x8f, 0x17, 0x47, 0x4e, 0x34,
    0xa7, 0xfc, 0x43, 0xed, 0x03, 0x0f, 0x7c, 0x15, 0x63, 0xf1, 0xba,
    0xbd, 0xdf, 0x63, 0x40, 0xc8, 0x2e, 0x0e, 0x54, 0xa8, 0xc5};
inline constexpr uint16_t kIntelTdQeIsvProdId = 2;
inline constexpr uint32_t kIntelTdQeMiscSelect = 0x00000000;
inline constexpr uint32_t kIntelTdQeMiscSelectMask = 0xFFFFFFFF;
// SGX ATTRIBUTES: byte 0 bit 0 INIT, bit 1 DEBUG, bit 2 MODE64BIT, bit 4
// PROVISIONKEY. The mask keeps DEBUG, so a debug QE (whose memory, and hence
// attestation key, the host can read) does not match; it ignores MODE64BIT
// and the XFRM half (bytes 8..15).
inline constexpr std::array<uint8_t, 16> kIntelTdQeAttributes = {
    0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
inline constexpr std::array<uint8_t, 16> kIntelTdQeAttributesMask = {
    0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
// Quote header QE vendor id of Intel's Quoting Enclaves.
inline constexpr std::array<uint8_t, 16> kIntelQeVendorId = {
    0x93, 0x9a, 0x72, 0x33, 0xf7, 0x9c, 0x4c, 0xa9,
    0x94, 0x0a, 0x0d, 0xb3, 0x95, 0x7f, 0x06, 0x07};

// Checks that a parsed quote is authentic, i.e. was produced by a genuine
// Intel TDX platform (policy on its contents is Policy's job):
//   1. the PCK certificate chain (leaf, PCK platform/processor CA, root)
//      verifies to the pinned root CA at the given time;
//   2. the QE report is signed by the PCK leaf key (ECDSA P-256, SHA-256);
//   3. the QE report data is SHA-256(attestation key || QE auth data) followed
//      by 32 zero bytes, i.e. the Quoting Enclave vouches for the key;
//   4. that enclave is Intel's TD Quoting Enclave (MRSIGNER, ISVPRODID,
//      MISCSELECT and ATTRIBUTES under their masks, and the header's QE
//      vendor id; the kIntelTdQe* constants above);
//   5. the quote (header || body) is signed by that attestation key.
// With CRLs (the overload below), step 1 also refuses a PCK leaf revoked by
// its CA's CRL and a PCK CA revoked by the root CA's CRL, and needs both CRLs
// valid at `at`. TCB status and the QE's ISVSVN against Intel's TCB levels
// are CollateralVerifier's and EvaluateTcb's (collateral.h, tcb_evaluation.h).
// Every call clears OpenSSL's error queue first, so errors earlier code left
// there never appear in its reasons. Errors are
// kUnauthenticated (kInvalidArgument for a root CA that does not parse) and
// name the step that failed; a QE identity failure says "QE identity:" and
// names the field with expected and actual values in hex.
// Immutable after Create, so one instance may be shared across threads.
class QuoteVerifier {
 public:
  // `root_ca_pem`: the trust anchor, kIntelSgxRootCaPem in production.
  static absl::StatusOr<QuoteVerifier> Create(absl::string_view root_ca_pem);

  // Checks steps 1-5 with certificate validity evaluated at `at`.
  absl::Status Verify(const Quote& quote, absl::Time at) const;
  // The same, with revocation: `crls` must hold the CRL of every CA below
  // the root (the PCK CA's and the root CA's), verified by the caller
  // (CollateralVerifier); OpenSSL checks them again (issuer, signature,
  // validity at `at`) as part of the chain.
  absl::Status Verify(const Quote& quote, absl::Time at,
                      absl::Span<X509_CRL* const> crls) const;

  // The pinned root, for verifying collateral to the same anchor.
  X509* root() const { return root_.get(); }

 private:
  explicit QuoteVerifier(std::shared_ptr<X509> root) : root_(std::move(root)) {}

  std::shared_ptr<X509> root_;
};

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_QUOTE_VERIFIER_H_
