#ifndef GPUTRAVEL_KEYXFER_TDX_QUOTE_H_
#define GPUTRAVEL_KEYXFER_TDX_QUOTE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace gputravel::tdx {

// Layout constants of the Intel TDX DCAP quote (v4, and v5 with a body
// descriptor). Offsets follow google/go-tdx-guest abi/abi.go.
inline constexpr size_t kMaxQuoteBytes = 64 * 1024;
inline constexpr size_t kQuoteHeaderBytes = 48;
inline constexpr size_t kTdReport10Bytes = 584;  // TDX 1.0 body (v4, v5 type 2)
inline constexpr size_t kTdReport15Bytes = 648;  // TDX 1.5 body (v5 type 3)
inline constexpr size_t kQeReportBytes = 384;
inline constexpr uint16_t kAttestationKeyEcdsaP256 = 2;
inline constexpr uint32_t kTeeTypeTdx = 0x81;
inline constexpr uint16_t kCertDataPckChain = 5;
inline constexpr uint16_t kCertDataQeReport = 6;
inline constexpr uint16_t kBodyTypeTdx10 = 2;
inline constexpr uint16_t kBodyTypeTdx15 = 3;
// TD attributes bit 0: the TD runs in debug mode (host can read its memory).
inline constexpr uint64_t kTdAttributeDebug = 1;

using Measurement = std::array<uint8_t, 48>;

struct QuoteHeader {
  uint16_t version = 0;
  uint16_t attestation_key_type = 0;
  uint32_t tee_type = 0;
  uint16_t qe_svn = 0;
  uint16_t pce_svn = 0;
  std::array<uint8_t, 16> qe_vendor_id{};
  std::array<uint8_t, 20> user_data{};
};

// TD report body: what the TDX module measured about the TD.
struct TdReportBody {
  std::array<uint8_t, 16> tee_tcb_svn{};
  Measurement mr_seam{};
  Measurement mr_signer_seam{};
  uint64_t seam_attributes = 0;
  uint64_t td_attributes = 0;
  uint64_t xfam = 0;
  Measurement mr_td{};
  Measurement mr_config_id{};
  Measurement mr_owner{};
  Measurement mr_owner_config{};
  std::array<Measurement, 4> rtmr{};
  std::array<uint8_t, 64> report_data{};
  // Present only in TDX 1.5 bodies (quote v5, body type 3).
  std::optional<std::array<uint8_t, 16>> tee_tcb_svn_2;
  std::optional<Measurement> mr_service_td;
};

// SGX report of the Quoting Enclave that certifies the attestation key.
struct QeReport {
  // The exact bytes the PCK leaf key signed.
  std::array<uint8_t, kQeReportBytes> raw{};
  std::array<uint8_t, 16> cpu_svn{};
  uint32_t misc_select = 0;
  std::array<uint8_t, 16> attributes{};
  std::array<uint8_t, 32> mr_enclave{};
  std::array<uint8_t, 32> mr_signer{};
  uint16_t isv_prod_id = 0;
  uint16_t isv_svn = 0;
  std::array<uint8_t, 64> report_data{};
};

struct Quote {
  QuoteHeader header;
  // kBodyTypeTdx10 for v4; the descriptor's type for v5.
  uint16_t body_type = kBodyTypeTdx10;
  TdReportBody body;
  // Bytes the attestation key signed: everything before the signature data
  // length (header || body for v4; header || descriptor || body for v5).
  std::vector<uint8_t> signed_bytes;
  std::array<uint8_t, 64> signature{};        // ECDSA P-256 r || s
  std::array<uint8_t, 64> attestation_key{};  // P-256 point x || y
  QeReport qe_report;
  std::array<uint8_t, 64> qe_report_signature{};  // r || s, by the PCK leaf
  std::vector<uint8_t> qe_auth_data;
  // PEM certificates from certification data type 5, in quote order (PCK
  // leaf, PCK platform/processor CA, root).
  std::vector<std::string> pck_chain_pem;
  // Bytes the quote occupies (through the end of its signature data).
  size_t length = 0;
  // Input bytes after the quote, and how many of them are not zero. No
  // signature covers them; nothing reads them.
  size_t trailing_bytes = 0;
  size_t trailing_nonzero_bytes = 0;
};

// Parses a TDX quote (version 4 or 5, ECDSA P-256, certification data type 6
// with a nested PCK chain). Bytes after the quote's signature data are
// accepted and ignored, only counted in trailing_bytes: configfs-tsm hands
// out a zero-padded buffer, other tools append text, and no signature covers
// them, so refusing them would protect nothing. Everything inside the quote
// must match the layout exactly (declared lengths consumed exactly); errors
// name the field and its offset. Does not check any
// signature: that is QuoteVerifier's job.
absl::StatusOr<Quote> ParseQuote(absl::Span<const uint8_t> bytes);
absl::StatusOr<Quote> ParseQuote(absl::string_view bytes);

}  // namespace gputravel::tdx

#endif  // GPUTRAVEL_KEYXFER_TDX_QUOTE_H_
