#ifndef GPUTRAVEL_KEYXFER_TDX_QUOTE_VERIFIER_H_
#define GPUTRAVEL_KEYXFER_TDX_QUOTE_VERIFIER_H_

#include <openssl/types.h>

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "keyxfer/tdx/quote.h"

namespace gputravel::tdx {

// Checks that a parsed quote is authentic, i.e. was produced by a genuine
// Intel TDX platform (policy on its contents is Policy's job):
//   1. the PCK certificate chain (leaf, PCK platform/processor CA, root)
//      verifies to the pinned root CA at the given time;
//   2. the QE report is signed by the PCK leaf key (ECDSA P-256, SHA-256);
//   3. the QE report data is SHA-256(attestation key || QE auth data) followed
//      by 32 zero bytes, i.e. the Quoting Enclave vouches for the key;
//   4. the quote (header || body) is signed by that attestation key.
// Not checked: revocation (PCK CRL) and TCB status, which need Intel PCS
// collateral. Errors are kUnauthenticated (kInvalidArgument for a root CA
// that does not parse) and name the step that failed.
// Immutable after Create, so one instance may be shared across threads.
class QuoteVerifier {
 public:
  // `root_ca_pem`: the trust anchor, kIntelSgxRootCaPem in production.
  static absl::StatusOr<QuoteVerifier> Create(absl::string_view root_ca_pem);

  // Checks steps 1-4 with certificate validity evaluated at `at`.
  absl::Status Verify(const Quote& quote, absl::Time at) const;

 private:
  explicit QuoteVerifier(std::shared_ptr<X509> root) : root_(std::move(root)) {}

  std::shared_ptr<X509> root_;
};

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_QUOTE_VERIFIER_H_
