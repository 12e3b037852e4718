#include "keyxfer/tdx/collateral.h"

#include <openssl/err.h>
#include <openssl/x509.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "util/hex.h"
#include "util/json_fields.h"
#include "util/json_text.h"
#include "keyxfer/tdx/openssl_util.h"
#include "nlohmann/json.hpp"

namespace gputravel::tdx {
namespace {

using Json = nlohmann::json;

constexpr const char* kBundleFields[] = {
    "tcb_info",    "tcb_info_signature",    "tcb_info_issuer_chain",
    "qe_identity", "qe_identity_signature", "qe_identity_issuer_chain",
    "pck_crl",     "pck_crl_issuer_chain",  "root_ca_crl",
};

absl::Status Failed(absl::string_view piece, absl::string_view problem) {
  return absl::UnauthenticatedError(
      absl::StrCat("TDX collateral: ", piece, ": ", problem));
}

absl::Status Malformed(absl::string_view piece, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("TDX collateral: ", piece, ": ", problem));
}

// issue <= at < next, or a reason naming the dates.
absl::Status Fresh(absl::string_view piece, absl::Time issued,
                   absl::Time next_update, absl::Time at) {
  if (at < issued) {
    return Failed(piece, absl::StrFormat(
                             "not yet valid at %s (issued %s)", FormatUtc(at),
                             FormatUtc(issued)));
  }
  if (at >= next_update) {
    return Failed(piece,
                  absl::StrFormat("expired: nextUpdate %s is not after the "
                                  "verification time %s (fetch fresh "
                                  "collateral from Intel's PCS or your PCCS)",
                                  FormatUtc(next_update), FormatUtc(at)));
  }
  return absl::OkStatus();
}

absl::StatusOr<CrlSummary> Summarise(X509_CRL* crl, absl::string_view piece) {
  CrlSummary s;
  s.issuer = NameOf(X509_CRL_get_issuer(crl));
  auto this_update = Asn1TimeToTime(X509_CRL_get0_lastUpdate(crl));
  const ASN1_TIME* next = X509_CRL_get0_nextUpdate(crl);
  if (!this_update.ok() || next == nullptr) {
    return Malformed(piece, "thisUpdate or nextUpdate missing or unreadable "
                            "(a CRL without nextUpdate cannot be judged "
                            "fresh)");
  }
  auto next_update = Asn1TimeToTime(next);
  if (!next_update.ok()) return Malformed(piece, "nextUpdate unreadable");
  s.this_update = *this_update;
  s.next_update = *next_update;
  STACK_OF(X509_REVOKED)* revoked = X509_CRL_get_REVOKED(crl);
  s.revoked = revoked ? sk_X509_REVOKED_num(revoked) : 0;
  return s;
}

// A CRL issued and signed by `issuer`, fresh at `at`.
absl::StatusOr<CrlSummary> CheckCrl(X509_CRL* crl, X509* issuer,
                                    absl::string_view piece, absl::Time at) {
  auto summary = Summarise(crl, piece);
  if (!summary.ok()) return summary.status();
  if (X509_NAME_cmp(X509_CRL_get_issuer(crl), X509_get_subject_name(issuer)) !=
      0) {
    return Failed(piece, absl::StrFormat("issued by %s, expected %s",
                                         summary->issuer, SubjectOf(issuer)));
  }
  EVP_PKEY* key = X509_get0_pubkey(issuer);
  if (key == nullptr || X509_CRL_verify(crl, key) != 1) {
    ERR_clear_error();
    return Failed(piece, absl::StrFormat(
                             "signature does not verify with the key of %s",
                             SubjectOf(issuer)));
  }
  if (absl::Status s =
          Fresh(piece, summary->this_update, summary->next_update, at);
      !s.ok()) {
    return s;
  }
  return summary;
}

// A signed JSON body: chain (signing certificate, root) to the root with the
// root CA CRL, signature over the exact bytes.
absl::Status CheckSignedBody(absl::string_view piece, absl::string_view body,
                             const std::array<uint8_t, 64>& signature,
                             absl::string_view chain_pem, X509* root,
                             X509_CRL* root_crl, absl::Time at) {
  const std::string chain_name = absl::StrCat(piece, " issuer chain");
  auto chain = ParsePemChain(chain_pem, chain_name);
  if (!chain.ok()) {
    return Malformed(piece, chain.status().message());
  }
  X509_CRL* crls[] = {root_crl};
  absl::Status verified =
      VerifyChainToRoot(*chain, root, at, crls, chain_name, 2);
  if (!verified.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("TDX collateral: ", verified.message()));
  }
  EVP_PKEY* key = X509_get0_pubkey((*chain)[0].get());
  if (key == nullptr || !IsP256(key)) {
    ERR_clear_error();
    return Failed(piece, "signing certificate does not hold a P-256 key");
  }
  auto ok = VerifyEcdsaSha256(
      key,
      absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(body.data()),
                                body.size()),
      signature);
  if (!ok.ok()) return ok.status();
  if (!*ok) {
    return Failed(
        absl::StrCat(piece, " signature"),
        absl::StrFormat("does not verify over the body with the key of %s "
                        "(body or signature altered)",
                        SubjectOf((*chain)[0].get())));
  }
  return absl::OkStatus();
}

std::shared_ptr<X509_CRL> Share(OsslPtr<X509_CRL> crl) {
  return std::shared_ptr<X509_CRL>(crl.release(), X509_CRL_free);
}

}  // namespace

absl::StatusOr<CollateralBundle> ParseCollateralBundle(
    absl::string_view json, absl::string_view where) {
  const std::string at = absl::StrCat(where, ": TDX collateral");
  absl::StatusOr<Json> parsed = ParseJsonText(std::string(json), at);
  if (!parsed.ok()) return parsed.status();
  const Json& j = *parsed;
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": TDX collateral is not a JSON object"));
  }
  absl::Status known = RefuseUnknownFields(
      j, std::set<std::string>(std::begin(kBundleFields), std::end(kBundleFields)), at);
  if (!known.ok()) return known;
  for (const char* field : kBundleFields) {
    if (!j.contains(field) || !j.at(field).is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": TDX collateral: \"", field, "\" must be a string"));
    }
  }
  auto str = [&j](const char* f) { return j.at(f).get<std::string>(); };
  CollateralBundle b;
  b.tcb_info = str("tcb_info");
  b.tcb_info_issuer_chain = str("tcb_info_issuer_chain");
  b.qe_identity = str("qe_identity");
  b.qe_identity_issuer_chain = str("qe_identity_issuer_chain");
  b.pck_crl_issuer_chain = str("pck_crl_issuer_chain");
  auto signature = [&](const char* f, std::array<uint8_t, 64>* out) {
    auto bytes = HexDecodeExact(str(f), 64);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": TDX collateral: \"", f,
                       "\": ", bytes.status().message()));
    }
    std::copy(bytes->begin(), bytes->end(), out->begin());
    return absl::OkStatus();
  };
  auto der = [&](const char* f, std::string* out) {
    std::string hex = str(f);
    auto bytes = HexDecodeExact(hex, hex.size() / 2);
    if (!bytes.ok() || hex.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": TDX collateral: \"", f, "\" must be hex DER: ",
          bytes.ok() ? "empty" : bytes.status().message()));
    }
    out->assign(bytes->begin(), bytes->end());
    return absl::OkStatus();
  };
  for (absl::Status s : {signature("tcb_info_signature", &b.tcb_info_signature),
                         signature("qe_identity_signature",
                                   &b.qe_identity_signature),
                         der("pck_crl", &b.pck_crl_der),
                         der("root_ca_crl", &b.root_ca_crl_der)}) {
    if (!s.ok()) return s;
  }
  return b;
}

absl::Time VerifiedCollateral::EarliestNextUpdate() const {
  return std::min({tcb_info.next_update, qe_identity.next_update,
                   pck_crl.next_update, root_ca_crl.next_update});
}

absl::Time VerifiedCollateral::OldestIssue() const {
  return std::min({tcb_info.issue_date, qe_identity.issue_date,
                   pck_crl.this_update, root_ca_crl.this_update});
}

absl::StatusOr<VerifiedCollateral> VerifyCollateral(
    const CollateralBundle& bundle, X509* root, absl::Time at) {
  ERR_clear_error();
  VerifiedCollateral out;

  auto root_crl = ParseDerCrl(bundle.root_ca_crl_der, "root CA CRL");
  if (!root_crl.ok()) return Malformed("root CA CRL", root_crl.status().message());
  auto root_summary = CheckCrl(root_crl->get(), root, "root CA CRL", at);
  if (!root_summary.ok()) return root_summary.status();
  out.root_ca_crl = *root_summary;
  out.root_ca_crl_x509 = Share(std::move(*root_crl));

  if (absl::Status s = CheckSignedBody(
          "TCB info", bundle.tcb_info, bundle.tcb_info_signature,
          bundle.tcb_info_issuer_chain, root, out.root_ca_crl_x509.get(), at);
      !s.ok()) {
    return s;
  }
  auto tcb_info = ParseTcbInfo(bundle.tcb_info);
  if (!tcb_info.ok()) return Malformed("TCB info", tcb_info.status().message());
  if (absl::Status s = Fresh("TCB info", tcb_info->issue_date,
                             tcb_info->next_update, at);
      !s.ok()) {
    return s;
  }
  out.tcb_info = std::move(*tcb_info);

  if (absl::Status s = CheckSignedBody(
          "QE identity", bundle.qe_identity, bundle.qe_identity_signature,
          bundle.qe_identity_issuer_chain, root, out.root_ca_crl_x509.get(),
          at);
      !s.ok()) {
    return s;
  }
  auto qe = ParseQeIdentity(bundle.qe_identity);
  if (!qe.ok()) return Malformed("QE identity", qe.status().message());
  if (absl::Status s =
          Fresh("QE identity", qe->issue_date, qe->next_update, at);
      !s.ok()) {
    return s;
  }
  out.qe_identity = std::move(*qe);

  auto pck_chain = ParsePemChain(bundle.pck_crl_issuer_chain,
                                 "PCK CRL issuer chain");
  if (!pck_chain.ok()) {
    return Malformed("PCK CRL", pck_chain.status().message());
  }
  X509_CRL* root_crls[] = {out.root_ca_crl_x509.get()};
  absl::Status chain = VerifyChainToRoot(*pck_chain, root, at, root_crls,
                                         "PCK CRL issuer chain", 2);
  if (!chain.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("TDX collateral: ", chain.message()));
  }
  auto pck_crl = ParseDerCrl(bundle.pck_crl_der, "PCK CRL");
  if (!pck_crl.ok()) return Malformed("PCK CRL", pck_crl.status().message());
  auto pck_summary =
      CheckCrl(pck_crl->get(), (*pck_chain)[0].get(), "PCK CRL", at);
  if (!pck_summary.ok()) return pck_summary.status();
  out.pck_crl = *pck_summary;
  out.pck_crl_x509 = Share(std::move(*pck_crl));
  return out;
}

}  // namespace gputravel::tdx
