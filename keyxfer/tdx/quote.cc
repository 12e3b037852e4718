#include "keyxfer/tdx/quote.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace gputravel::tdx {
namespace {

absl::Status Malformed(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("TDX quote: ", message));
}

// Bounds-checked little-endian reader over [pos, end) of the whole input.
// Offsets in errors are absolute so they can be matched against a hexdump.
// Nested length-prefixed structures get a Sub() reader whose end is the
// declared length, so an inner field can never read past its container.
class Reader {
 public:
  Reader(absl::Span<const uint8_t> data, size_t pos, size_t end,
         absl::string_view region)
      : data_(data), pos_(pos), end_(end), region_(region) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }

  absl::Status Need(size_t n, absl::string_view what) const {
    if (n > remaining()) {
      return Malformed(absl::StrFormat(
          "truncated: %s needs %d bytes at offset 0x%x, but %s ends at 0x%x",
          what, n, pos_, region_, end_));
    }
    return absl::OkStatus();
  }

  absl::Status Bytes(absl::string_view what, uint8_t* out, size_t n) {
    if (auto s = Need(n, what); !s.ok()) return s;
    std::memcpy(out, data_.data() + pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

  template <size_t N>
  absl::Status Array(absl::string_view what, std::array<uint8_t, N>* out) {
    return Bytes(what, out->data(), N);
  }

  absl::Status Vector(absl::string_view what, size_t n,
                      std::vector<uint8_t>* out) {
    if (auto s = Need(n, what); !s.ok()) return s;
    out->assign(data_.begin() + pos_, data_.begin() + pos_ + n);
    pos_ += n;
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Le(absl::string_view what, T* out) {
    uint8_t b[sizeof(T)];
    if (auto s = Bytes(what, b, sizeof(T)); !s.ok()) return s;
    T v = 0;
    for (size_t i = sizeof(T); i-- > 0;) v = static_cast<T>((v << 8) | b[i]);
    *out = v;
    return absl::OkStatus();
  }

  // A reader over the next `n` bytes, which this reader skips.
  absl::Status Sub(absl::string_view what, size_t n, Reader* out) {
    if (auto s = Need(n, what); !s.ok()) return s;
    *out = Reader(data_, pos_, pos_ + n, what);
    pos_ += n;
    return absl::OkStatus();
  }

  // Declared lengths must be consumed exactly: slack inside a signed or
  // certified structure would be bytes nobody checks.
  absl::Status ExpectEnd(absl::string_view length_field,
                         size_t length_field_offset) const {
    if (pos_ != end_) {
      return Malformed(absl::StrFormat(
          "inconsistent lengths: %s at offset 0x%x declares %s up to 0x%x, "
          "but its contents end at 0x%x",
          length_field, length_field_offset, region_, end_, pos_));
    }
    return absl::OkStatus();
  }

 private:
  absl::Span<const uint8_t> data_;
  size_t pos_;
  size_t end_;
  std::string region_;
};

absl::Status ParseHeader(Reader& r, QuoteHeader* h) {
  GT_RETURN_IF_ERROR(r.Le("version", &h->version));
  if (h->version != 4 && h->version != 5) {
    return Malformed(absl::StrFormat(
        "unsupported version %d at offset 0x0 (supported: 4, 5)", h->version));
  }
  GT_RETURN_IF_ERROR(r.Le("attestation key type", &h->attestation_key_type));
  if (h->attestation_key_type != kAttestationKeyEcdsaP256) {
    return Malformed(absl::StrFormat(
        "unsupported attestation key type %d at offset 0x2 (supported: 2 = "
        "ECDSA P-256)",
        h->attestation_key_type));
  }
  GT_RETURN_IF_ERROR(r.Le("TEE type", &h->tee_type));
  if (h->tee_type != kTeeTypeTdx) {
    return Malformed(absl::StrFormat(
        "TEE type 0x%x at offset 0x4 is not TDX (0x81)", h->tee_type));
  }
  GT_RETURN_IF_ERROR(r.Le("QE SVN", &h->qe_svn));
  GT_RETURN_IF_ERROR(r.Le("PCE SVN", &h->pce_svn));
  GT_RETURN_IF_ERROR(r.Array("QE vendor id", &h->qe_vendor_id));
  return r.Array("user data", &h->user_data);
}

absl::Status ParseBody(Reader& r, uint16_t body_type, TdReportBody* b) {
  GT_RETURN_IF_ERROR(r.Array("TEE_TCB_SVN", &b->tee_tcb_svn));
  GT_RETURN_IF_ERROR(r.Array("MRSEAM", &b->mr_seam));
  GT_RETURN_IF_ERROR(r.Array("MRSIGNERSEAM", &b->mr_signer_seam));
  GT_RETURN_IF_ERROR(r.Le("SEAM attributes", &b->seam_attributes));
  GT_RETURN_IF_ERROR(r.Le("TD attributes", &b->td_attributes));
  GT_RETURN_IF_ERROR(r.Le("XFAM", &b->xfam));
  GT_RETURN_IF_ERROR(r.Array("MRTD", &b->mr_td));
  GT_RETURN_IF_ERROR(r.Array("MRCONFIGID", &b->mr_config_id));
  GT_RETURN_IF_ERROR(r.Array("MROWNER", &b->mr_owner));
  GT_RETURN_IF_ERROR(r.Array("MROWNERCONFIG", &b->mr_owner_config));
  for (int i = 0; i < 4; ++i) {
    GT_RETURN_IF_ERROR(r.Array(absl::StrCat("RTMR", i), &b->rtmr[i]));
  }
  GT_RETURN_IF_ERROR(r.Array("REPORTDATA", &b->report_data));
  if (body_type == kBodyTypeTdx15) {
    std::array<uint8_t, 16> svn2;
    Measurement service_td;
    GT_RETURN_IF_ERROR(r.Array("TEE_TCB_SVN_2", &svn2));
    GT_RETURN_IF_ERROR(r.Array("MRSERVICETD", &service_td));
    b->tee_tcb_svn_2 = svn2;
    b->mr_service_td = service_td;
  }
  return absl::OkStatus();
}

absl::Status ParseQeReport(Reader& r, QeReport* q) {
  Reader qr(absl::Span<const uint8_t>(), 0, 0, "");
  GT_RETURN_IF_ERROR(r.Sub("QE report", kQeReportBytes, &qr));
  Reader raw = qr;
  GT_RETURN_IF_ERROR(raw.Array("QE report", &q->raw));
  // SGX REPORTBODY layout (Intel SGX SDK sgx_report_body_t).
  std::array<uint8_t, 28> reserved1;
  std::array<uint8_t, 32> reserved2;
  std::array<uint8_t, 96> reserved3;
  std::array<uint8_t, 60> reserved4;
  GT_RETURN_IF_ERROR(qr.Array("QE CPUSVN", &q->cpu_svn));
  GT_RETURN_IF_ERROR(qr.Le("QE MISCSELECT", &q->misc_select));
  GT_RETURN_IF_ERROR(qr.Array("QE reserved", &reserved1));
  GT_RETURN_IF_ERROR(qr.Array("QE attributes", &q->attributes));
  GT_RETURN_IF_ERROR(qr.Array("QE MRENCLAVE", &q->mr_enclave));
  GT_RETURN_IF_ERROR(qr.Array("QE reserved", &reserved2));
  GT_RETURN_IF_ERROR(qr.Array("QE MRSIGNER", &q->mr_signer));
  GT_RETURN_IF_ERROR(qr.Array("QE reserved", &reserved3));
  GT_RETURN_IF_ERROR(qr.Le("QE ISVPRODID", &q->isv_prod_id));
  GT_RETURN_IF_ERROR(qr.Le("QE ISVSVN", &q->isv_svn));
  GT_RETURN_IF_ERROR(qr.Array("QE reserved", &reserved4));
  GT_RETURN_IF_ERROR(qr.Array("QE report data", &q->report_data));
  return qr.ExpectEnd("QE report size", r.pos() - kQeReportBytes);
}

// Splits a PEM bundle into its certificates. Only whitespace (and the NUL
// terminators some quote generators append) may surround the blocks, so that
// nothing unparsed hides in certified data.
absl::Status SplitPemChain(absl::string_view pem, size_t offset,
                           std::vector<std::string>* out) {
  static constexpr absl::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  static constexpr absl::string_view kEnd = "-----END CERTIFICATE-----";
  auto is_filler = [](char c) {
    return c == '\0' || c == ' ' || c == '\n' || c == '\r' || c == '\t';
  };
  size_t pos = 0;
  while (true) {
    while (pos < pem.size() && is_filler(pem[pos])) ++pos;
    if (pos == pem.size()) break;
    if (pem.substr(pos, kBegin.size()) != kBegin) {
      return Malformed(absl::StrFormat(
          "PCK certificate chain at offset 0x%x: expected \"%s\" at offset "
          "0x%x",
          offset, kBegin, offset + pos));
    }
    size_t end = pem.find(kEnd, pos + kBegin.size());
    if (end == absl::string_view::npos) {
      return Malformed(absl::StrFormat(
          "PCK certificate chain at offset 0x%x: certificate starting at "
          "offset 0x%x has no \"%s\"",
          offset, offset + pos, kEnd));
    }
    end += kEnd.size();
    out->emplace_back(pem.substr(pos, end - pos));
    out->back().push_back('\n');
    pos = end;
  }
  if (out->empty()) {
    return Malformed(absl::StrFormat(
        "PCK certificate chain at offset 0x%x holds no certificate", offset));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Quote> ParseQuote(absl::Span<const uint8_t> bytes) {
  if (bytes.size() > kMaxQuoteBytes) {
    return Malformed(absl::StrFormat(
        "%d bytes is more than the %d-byte limit (configfs-tsm returns at "
        "most 8 KiB; refusing to parse an oversized blob)",
        bytes.size(), kMaxQuoteBytes));
  }
  Quote q;
  Reader r(bytes, 0, bytes.size(), "the input");
  GT_RETURN_IF_ERROR(ParseHeader(r, &q.header));

  if (q.header.version == 5) {
    size_t descriptor_offset = r.pos();
    uint32_t body_size = 0;
    GT_RETURN_IF_ERROR(r.Le("TD report body type", &q.body_type));
    GT_RETURN_IF_ERROR(r.Le("TD report body size", &body_size));
    size_t expected = 0;
    if (q.body_type == kBodyTypeTdx10) {
      expected = kTdReport10Bytes;
    } else if (q.body_type == kBodyTypeTdx15) {
      expected = kTdReport15Bytes;
    } else {
      return Malformed(absl::StrFormat(
          "TD report body type %d at offset 0x%x is not a TD report (2 = TDX "
          "1.0, 3 = TDX 1.5)",
          q.body_type, descriptor_offset));
    }
    if (body_size != expected) {
      return Malformed(absl::StrFormat(
          "inconsistent lengths: TD report body size %d at offset 0x%x, but "
          "body type %d is %d bytes",
          body_size, descriptor_offset + 2, q.body_type, expected));
    }
  }
  GT_RETURN_IF_ERROR(ParseBody(r, q.body_type, &q.body));
  q.signed_bytes.assign(bytes.begin(), bytes.begin() + r.pos());

  size_t sig_len_offset = r.pos();
  uint32_t sig_len = 0;
  GT_RETURN_IF_ERROR(r.Le("signature data length", &sig_len));
  Reader sig(bytes, 0, 0, "");
  GT_RETURN_IF_ERROR(r.Sub("signature data", sig_len, &sig));
  q.length = r.pos();

  GT_RETURN_IF_ERROR(sig.Array("quote signature", &q.signature));
  GT_RETURN_IF_ERROR(sig.Array("attestation key", &q.attestation_key));
  size_t cert_type_offset = sig.pos();
  uint16_t cert_type = 0;
  uint32_t cert_size = 0;
  GT_RETURN_IF_ERROR(sig.Le("certification data type", &cert_type));
  if (cert_type != kCertDataQeReport) {
    return Malformed(absl::StrFormat(
        "certification data type %d at offset 0x%x is not 6 (QE report "
        "certification data)",
        cert_type, cert_type_offset));
  }
  GT_RETURN_IF_ERROR(sig.Le("certification data size", &cert_size));
  Reader cert(bytes, 0, 0, "");
  GT_RETURN_IF_ERROR(sig.Sub("certification data", cert_size, &cert));
  GT_RETURN_IF_ERROR(sig.ExpectEnd("signature data length", sig_len_offset));

  GT_RETURN_IF_ERROR(ParseQeReport(cert, &q.qe_report));
  GT_RETURN_IF_ERROR(
      cert.Array("QE report signature", &q.qe_report_signature));
  uint16_t auth_len = 0;
  GT_RETURN_IF_ERROR(cert.Le("QE auth data length", &auth_len));
  GT_RETURN_IF_ERROR(cert.Vector("QE auth data", auth_len, &q.qe_auth_data));
  size_t nested_offset = cert.pos();
  uint16_t nested_type = 0;
  uint32_t nested_size = 0;
  GT_RETURN_IF_ERROR(cert.Le("nested certification data type", &nested_type));
  if (nested_type != kCertDataPckChain) {
    return Malformed(absl::StrFormat(
        "nested certification data type %d at offset 0x%x is not 5 (PCK "
        "certificate chain)",
        nested_type, nested_offset));
  }
  GT_RETURN_IF_ERROR(cert.Le("nested certification data size", &nested_size));
  size_t pem_offset = cert.pos();
  std::vector<uint8_t> pem;
  GT_RETURN_IF_ERROR(cert.Vector("PCK certificate chain", nested_size, &pem));
  GT_RETURN_IF_ERROR(
      cert.ExpectEnd("certification data size", cert_type_offset + 2));
  GT_RETURN_IF_ERROR(SplitPemChain(
      absl::string_view(reinterpret_cast<const char*>(pem.data()), pem.size()),
      pem_offset, &q.pck_chain_pem));

  // Bytes after the signature data are covered by no signature: they are
  // kept out of every parsed field and only counted (configfs-tsm pads with
  // zeros; other tools append text, which go-tdx-guest also ignores).
  q.trailing_bytes = bytes.size() - q.length;
  q.trailing_nonzero_bytes = static_cast<size_t>(
      std::count_if(bytes.begin() + q.length, bytes.end(),
                    [](uint8_t b) { return b != 0; }));
  return q;
}

absl::StatusOr<Quote> ParseQuote(absl::string_view bytes) {
  return ParseQuote(absl::Span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace gputravel::tdx
