#ifndef GPUTRAVEL_KEYXFER_TDX_TESTDATA_H_
#define GPUTRAVEL_KEYXFER_TDX_TESTDATA_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gputravel::tdx::testing {

// Reads keyxfer/tdx/testdata/NAME from the runfiles (Bazel runs tests from the
// runfiles root of the workspace). Aborts the test binary if it is missing,
// since every test that calls this needs the file.
std::string ReadTestFile(absl::string_view name);

// The real quote from a Google COS TD, zero-padded to 8000 bytes.
std::string RealQuote();
// PEM of the Intel SGX Root CA the quote's PCK chain ends at.
std::string RootCaPem();

// A time at which every certificate of the real quote's chain is valid (the
// leaf is valid 2024-07-02 to 2031-07-02).
absl::Time RealQuoteValidTime();

// Real quotes with the collateral Intel's PCS served for their platforms
// (testdata/dcap/README.md).
std::string DcapQuote();                 // v4, UpToDate
std::string DcapQuoteCollateral();
std::string DcapOutdatedQuote();         // v5, no TCB level matches
std::string DcapOutdatedQuoteCollateral();
// Times inside each collateral's validity (issueDate .. nextUpdate).
absl::Time DcapQuoteValidTime();          // 2025-07-01
absl::Time DcapOutdatedQuoteValidTime();  // 2026-03-01

// Layout facts of the real quote, for tests that corrupt it.
inline constexpr size_t kRealQuoteLength = 0x1347;  // 4935, then zeros
inline constexpr size_t kMrtdOffset = 0xB8;
inline constexpr size_t kReportDataOffset = 0x238;
inline constexpr size_t kTdAttributesOffset = 0xA8;
inline constexpr size_t kSignatureOffset = 0x27C;
inline constexpr size_t kAttestationKeyOffset = 0x2BC;
inline constexpr size_t kQeReportOffset = 0x302;
inline constexpr size_t kQeReportSignatureOffset = 0x482;
inline constexpr size_t kPckChainOffset = 0x4EA;
inline constexpr size_t kNestedCertTypeOffset = 0x4E4;
inline constexpr size_t kSignatureDataLengthOffset = 0x278;
inline constexpr size_t kCertDataTypeOffset = 0x2FC;

}  // namespace gputravel::tdx::testing

#endif  // GPUTRAVEL_KEYXFER_TDX_TESTDATA_H_
