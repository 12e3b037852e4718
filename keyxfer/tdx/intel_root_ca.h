#ifndef GPUTRAVEL_KEYXFER_TDX_INTEL_ROOT_CA_H_
#define GPUTRAVEL_KEYXFER_TDX_INTEL_ROOT_CA_H_

namespace gputravel::tdx {

// The Intel SGX Root CA (P-256, valid to 2049-12-31), the trust anchor of every
// PCK certificate chain. Compiled in so a verifier has no trust file to lose or
// swap at run time. SHA-256 fingerprint (DER):
// 44:A0:19:6B:2B:99:F8:89:B8:E1:49:E9:5B:80:7A:35:0E:74:24:96:43:99:E8:85:A7:CB:B8:CC:FA:B6:74:D3
// Source: google/go-tdx-guest verify/trusted_root.pem, the same certificate
// Intel publishes at certificates.trustedservices.intel.com.
extern const char kIntelSgxRootCaPem[];

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_INTEL_ROOT_CA_H_
