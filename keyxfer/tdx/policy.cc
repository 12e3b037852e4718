#include "keyxfer/tdx/policy.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "util/hex.h"
#include "util/json_fields.h"
#include "util/json_text.h"
#include "keyxfer/tdx/pck_extensions.h"
#include "keyxfer/tdx/tcb_info.h"
#include "nlohmann/json.hpp"

namespace gputravel::tdx {
namespace {

using Json = nlohmann::json;

constexpr const char* kKnownFields[] = {
    "mrtd",          "rtmr0",       "rtmr1",           "rtmr2",
    "rtmr3",         "mrseam",      "mrconfigid",      "mrowner",
    "mrownerconfig", "allow_debug", "min_tee_tcb_svn", "require_report_data",
    "xfam",          "td_attributes", "min_tee_tcb_svn_2", "mrservicetd",
    "min_qe_svn",    "min_pce_svn", "allowed_tcb_statuses",
    "allowed_advisory_ids", "max_collateral_age",
};

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("TDX policy field \"", field, "\": ", problem));
}

template <size_t N>
absl::StatusOr<std::array<uint8_t, N>> DecodeHex(const Json& v,
                                                 const char* field) {
  if (!v.is_string()) {
    return FieldError(field, absl::StrFormat(
                                 "must be a string of %d hex characters%s",
                                 N * 2, N == 48 ? " or a list of them" : ""));
  }
  auto bytes = HexDecodeExact(v.get_ref<const std::string&>(), N);
  if (!bytes.ok()) return FieldError(field, bytes.status().message());
  std::array<uint8_t, N> a{};
  std::copy(bytes->begin(), bytes->end(), a.begin());
  return a;
}

template <size_t N>
absl::Status ReadHex(const Json& j, const char* field,
                     std::optional<std::array<uint8_t, N>>* out) {
  if (!j.contains(field)) return absl::OkStatus();
  auto a = DecodeHex<N>(j.at(field), field);
  if (!a.ok()) return a.status();
  *out = *a;
  return absl::OkStatus();
}

// A measurement: one hex string, or a non-empty list of allowed values.
absl::Status ReadMeasurements(const Json& j, const char* field,
                              std::vector<Measurement>* out) {
  if (!j.contains(field)) return absl::OkStatus();
  const Json& v = j.at(field);
  if (!v.is_array()) {
    auto m = DecodeHex<48>(v, field);
    if (!m.ok()) return m.status();
    out->push_back(*m);
    return absl::OkStatus();
  }
  if (v.empty()) {
    return FieldError(field,
                      "empty list would refuse every TD; omit the field to "
                      "leave it unchecked");
  }
  for (size_t i = 0; i < v.size(); ++i) {
    auto m = DecodeHex<48>(v.at(i), field);
    if (!m.ok()) {
      return absl::Status(m.status().code(),
                          absl::StrCat(m.status().message(), " (list entry ",
                                       i, ")"));
    }
    out->push_back(*m);
  }
  return absl::OkStatus();
}

absl::Status ReadBool(const Json& j, const char* field, bool* out) {
  if (!j.contains(field)) return absl::OkStatus();
  const Json& v = j.at(field);
  if (!v.is_boolean()) return FieldError(field, "must be true or false");
  *out = v.get<bool>();
  return absl::OkStatus();
}

absl::Status ReadFixedBits(const Json& j, const char* field,
                           std::optional<Policy::FixedBits>* out) {
  if (!j.contains(field)) return absl::OkStatus();
  const Json& v = j.at(field);
  if (!v.is_object() || v.size() != 2 || !v.contains("mask") ||
      !v.contains("value")) {
    return FieldError(field, "must be {\"mask\": \"<16 hex>\", \"value\": "
                             "\"<16 hex>\"} (hex of the 64-bit numbers)");
  }
  Policy::FixedBits bits;
  for (const char* part : {"mask", "value"}) {
    auto bytes = DecodeHex<8>(v.at(part), field);
    if (!bytes.ok()) return bytes.status();
    uint64_t x = 0;
    for (uint8_t b : *bytes) x = (x << 8) | b;  // written most significant first
    (std::string(part) == "mask" ? bits.mask : bits.value) = x;
  }
  if ((bits.value & ~bits.mask) != 0) {
    return FieldError(field, "value has bits outside mask");
  }
  *out = bits;
  return absl::OkStatus();
}

absl::Status ReadSvn(const Json& j, const char* field,
                     std::optional<uint16_t>* out) {
  if (!j.contains(field)) return absl::OkStatus();
  const Json& v = j.at(field);
  if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
      v.get<int64_t>() > 65535) {
    return FieldError(field, "must be an integer in 0..65535");
  }
  *out = static_cast<uint16_t>(v.get<int64_t>());
  return absl::OkStatus();
}

absl::Status ReadStrings(const Json& j, const char* field,
                         std::vector<std::string>* out) {
  if (!j.contains(field)) return absl::OkStatus();
  const Json& v = j.at(field);
  if (!v.is_array()) return FieldError(field, "must be a list of strings");
  out->clear();
  for (const Json& s : v) {
    if (!s.is_string() || s.get<std::string>().empty()) {
      return FieldError(field, "must be a list of non-empty strings");
    }
    out->push_back(s.get<std::string>());
  }
  return absl::OkStatus();
}

// A quote's bytes are little-endian; policies and reports write the number.
std::string Hex64(uint64_t v) { return absl::StrFormat("%016x", v); }

std::string CheckBits(absl::string_view name,
                      const std::optional<Policy::FixedBits>& bits,
                      uint64_t actual) {
  if (!bits.has_value() || (actual & bits->mask) == bits->value) return "";
  return absl::StrFormat(
      "TDX policy: %s fixed bits mismatch under mask %s: expected %s, actual "
      "%s (%s %s)",
      name, Hex64(bits->mask), Hex64(bits->value), Hex64(actual & bits->mask),
      name, Hex64(actual));
}

std::string CheckMinimum(absl::string_view name,
                         const std::array<uint8_t, 16>& minimum,
                         const std::array<uint8_t, 16>& actual) {
  for (size_t i = 0; i < minimum.size(); ++i) {
    if (actual[i] < minimum[i]) {
      return absl::StrFormat(
          "TDX policy: %s below minimum at component %d (0x%02x < 0x%02x): "
          "expected each byte >= %s, actual %s",
          name, i, actual[i], minimum[i], HexEncode(minimum), HexEncode(actual));
    }
  }
  return "";
}

absl::Status CheckAllowed(absl::string_view name,
                          const std::vector<Measurement>& allowed,
                          const Measurement& actual) {
  if (allowed.empty() ||
      std::find(allowed.begin(), allowed.end(), actual) != allowed.end()) {
    return absl::OkStatus();
  }
  std::string expected;
  if (allowed.size() == 1) {
    expected = HexEncode(allowed[0]);
  } else {
    std::vector<std::string> hex;
    for (const Measurement& m : allowed) hex.push_back(HexEncode(m));
    expected = absl::StrCat("one of [", absl::StrJoin(hex, ", "), "]");
  }
  return absl::PermissionDeniedError(
      absl::StrFormat("TDX policy: %s mismatch: expected %s, actual %s", name,
                      expected, HexEncode(actual)));
}

}  // namespace

absl::StatusOr<Policy> Policy::FromJson(absl::string_view json) {
  absl::StatusOr<Json> j = ParseJsonText(std::string(json), "TDX policy");
  if (!j.ok()) return j.status();
  return FromJsonValue(*j);
}

absl::StatusOr<Policy> Policy::FromJsonValue(const Json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError("TDX policy must be a JSON object");
  }
  absl::Status known = RefuseUnknownFields(
      j, std::set<std::string>(std::begin(kKnownFields), std::end(kKnownFields)),
      "TDX policy");
  if (!known.ok()) return known;
  Policy p;
  absl::Status s;
  auto collect = [&s](absl::Status st) {
    if (s.ok()) s = std::move(st);
  };
  collect(ReadMeasurements(j, "mrtd", &p.mrtd));
  for (int i = 0; i < 4; ++i) {
    std::string field = absl::StrCat("rtmr", i);
    collect(ReadMeasurements(j, field.c_str(), &p.rtmr[i]));
  }
  collect(ReadMeasurements(j, "mrseam", &p.mrseam));
  collect(ReadMeasurements(j, "mrconfigid", &p.mrconfigid));
  collect(ReadMeasurements(j, "mrowner", &p.mrowner));
  collect(ReadMeasurements(j, "mrownerconfig", &p.mrownerconfig));
  collect(ReadBool(j, "allow_debug", &p.allow_debug));
  collect(ReadHex(j, "min_tee_tcb_svn", &p.min_tee_tcb_svn));
  collect(ReadBool(j, "require_report_data", &p.require_report_data));
  collect(ReadFixedBits(j, "xfam", &p.xfam));
  collect(ReadFixedBits(j, "td_attributes", &p.td_attributes));
  collect(ReadHex(j, "min_tee_tcb_svn_2", &p.min_tee_tcb_svn_2));
  collect(ReadMeasurements(j, "mrservicetd", &p.mrservicetd));
  collect(ReadSvn(j, "min_qe_svn", &p.min_qe_svn));
  collect(ReadSvn(j, "min_pce_svn", &p.min_pce_svn));
  p.tcb_fields_given = j.contains("allowed_tcb_statuses") ||
                       j.contains("allowed_advisory_ids") ||
                       j.contains("max_collateral_age");
  collect(ReadStrings(j, "allowed_tcb_statuses", &p.allowed_tcb_statuses));
  collect(ReadStrings(j, "allowed_advisory_ids", &p.allowed_advisory_ids));
  if (s.ok()) {
    for (const std::string& status : p.allowed_tcb_statuses) {
      if (!IsKnownTcbStatus(status)) {
        s = FieldError("allowed_tcb_statuses",
                       absl::StrCat("\"", status,
                                    "\" is not a TCB status Intel defines "
                                    "(UpToDate, SWHardeningNeeded, "
                                    "ConfigurationNeeded, "
                                    "ConfigurationAndSWHardeningNeeded, "
                                    "OutOfDate, OutOfDateConfigurationNeeded, "
                                    "Revoked)"));
        break;
      }
    }
  }
  if (s.ok() && j.contains("max_collateral_age")) {
    absl::Duration age;
    const Json& v = j.at("max_collateral_age");
    if (!v.is_string() ||
        !absl::ParseDuration(v.get<std::string>(), &age) ||
        age <= absl::ZeroDuration() || age == absl::InfiniteDuration()) {
      s = FieldError("max_collateral_age",
                     "must be a positive duration such as \"720h\"");
    } else {
      p.max_collateral_age = age;
    }
  }
  if (!s.ok()) return s;
  return p;
}

void Policy::BodyViolations(
    const TdReportBody& body,
    const std::array<uint8_t, 64>* expected_report_data,
    std::vector<std::string>* out) const {
  auto add = [out](const absl::Status& s) {
    if (!s.ok()) out->emplace_back(s.message());
  };
  auto add_text = [out](std::string s) {
    if (!s.empty()) out->push_back(std::move(s));
  };
  if (!allow_debug && (body.td_attributes & kTdAttributeDebug) != 0) {
    out->push_back(absl::StrFormat(
        "TDX policy: TD attributes 0x%016x have DEBUG (bit 0) set and "
        "allow_debug is false (expected DEBUG clear, actual set)",
        body.td_attributes));
  }
  add(CheckAllowed("MRTD", mrtd, body.mr_td));
  for (int i = 0; i < 4; ++i) {
    add(CheckAllowed(absl::StrCat("RTMR", i), rtmr[i], body.rtmr[i]));
  }
  add(CheckAllowed("MRSEAM", mrseam, body.mr_seam));
  add(CheckAllowed("MRCONFIGID", mrconfigid, body.mr_config_id));
  add(CheckAllowed("MROWNER", mrowner, body.mr_owner));
  add(CheckAllowed("MROWNERCONFIG", mrownerconfig, body.mr_owner_config));
  if (min_tee_tcb_svn.has_value()) {
    add_text(CheckMinimum("TEE_TCB_SVN", *min_tee_tcb_svn, body.tee_tcb_svn));
  }
  add_text(CheckBits("XFAM", xfam, body.xfam));
  add_text(CheckBits("TD attributes", td_attributes, body.td_attributes));
  if (min_tee_tcb_svn_2.has_value()) {
    if (!body.tee_tcb_svn_2.has_value()) {
      out->push_back(absl::StrFormat(
          "TDX policy: TEE_TCB_SVN_2: expected each byte >= %s, actual absent "
          "(a TDX 1.0 body; min_tee_tcb_svn_2 needs a TDX 1.5 quote)",
          HexEncode(*min_tee_tcb_svn_2)));
    } else {
      add_text(CheckMinimum("TEE_TCB_SVN_2", *min_tee_tcb_svn_2,
                            *body.tee_tcb_svn_2));
    }
  }
  if (!mrservicetd.empty()) {
    if (!body.mr_service_td.has_value()) {
      out->push_back(
          "TDX policy: MRSERVICETD: expected a pinned value, actual absent (a "
          "TDX 1.0 body; mrservicetd needs a TDX 1.5 quote)");
    } else {
      add(CheckAllowed("MRSERVICETD", mrservicetd, *body.mr_service_td));
    }
  }
  if (expected_report_data != nullptr && require_report_data &&
      CRYPTO_memcmp(body.report_data.data(), expected_report_data->data(),
                    expected_report_data->size()) != 0) {
    out->push_back(absl::StrFormat(
        "TDX policy: REPORTDATA mismatch (quote not bound to this channel or "
        "nonce): expected %s, actual %s",
        HexEncode(*expected_report_data), HexEncode(body.report_data)));
  }
}

absl::Status Policy::Check(
    const TdReportBody& body,
    const std::array<uint8_t, 64>& expected_report_data) const {
  std::vector<std::string> v;
  BodyViolations(body, &expected_report_data, &v);
  if (v.empty()) return absl::OkStatus();
  return absl::PermissionDeniedError(v.front());
}

bool Policy::NeedsCollateral() const {
  return tcb_fields_given ||
         allowed_tcb_statuses != std::vector<std::string>{"UpToDate"} ||
         !allowed_advisory_ids.empty() || max_collateral_age.has_value();
}

std::vector<std::string> Policy::Violations(
    const Quote& quote, const std::array<uint8_t, 64>* expected_report_data,
    const TcbEvaluation* tcb, absl::Time at) const {
  std::vector<std::string> out;
  BodyViolations(quote.body, expected_report_data, &out);
  if (min_qe_svn.has_value() && quote.qe_report.isv_svn < *min_qe_svn) {
    out.push_back(absl::StrFormat(
        "TDX policy: QE SVN (QE report ISVSVN) below minimum: expected >= %d, "
        "actual %d",
        *min_qe_svn, quote.qe_report.isv_svn));
  }
  if (min_pce_svn.has_value()) {
    std::optional<uint16_t> pce_svn;
    if (tcb != nullptr) {
      pce_svn = tcb->pck.pce_svn;
    } else if (!quote.pck_chain_pem.empty()) {
      auto pck = ParsePckExtensionsPem(quote.pck_chain_pem[0]);
      if (pck.ok()) pce_svn = pck->pce_svn;
    }
    if (!pce_svn.has_value()) {
      out.push_back(absl::StrFormat(
          "TDX policy: PCE SVN: expected >= %d, actual unreadable (no PCK "
          "certificate SGX extensions)",
          *min_pce_svn));
    } else if (*pce_svn < *min_pce_svn) {
      out.push_back(absl::StrFormat(
          "TDX policy: PCE SVN (PCK certificate PCESVN) below minimum: "
          "expected >= %d, actual %d",
          *min_pce_svn, *pce_svn));
    }
  }
  if (tcb == nullptr) return out;
  if (std::find(allowed_tcb_statuses.begin(), allowed_tcb_statuses.end(),
                tcb->status) == allowed_tcb_statuses.end()) {
    out.push_back(absl::StrFormat(
        "TDX policy: TCB status not allowed: expected one of [%s], actual %s "
        "(advisories: %s)",
        absl::StrJoin(allowed_tcb_statuses, ", "), tcb->status,
        tcb->advisory_ids.empty() ? "none"
                                  : absl::StrJoin(tcb->advisory_ids, ", ")));
  }
  std::vector<std::string> unlisted;
  for (const std::string& id : tcb->advisory_ids) {
    if (std::find(allowed_advisory_ids.begin(), allowed_advisory_ids.end(),
                  id) == allowed_advisory_ids.end()) {
      unlisted.push_back(id);
    }
  }
  if (!unlisted.empty()) {
    out.push_back(absl::StrFormat(
        "TDX policy: advisory IDs not allowed: expected only [%s], actual "
        "also %s",
        absl::StrJoin(allowed_advisory_ids, ", "),
        absl::StrJoin(unlisted, ", ")));
  }
  if (max_collateral_age.has_value()) {
    const absl::Time oldest =
        std::min({tcb->tcb_info_issue_date, tcb->qe_identity_issue_date,
                  tcb->pck_crl_this_update});
    if (at - oldest > *max_collateral_age) {
      out.push_back(absl::StrFormat(
          "TDX policy: collateral too old: expected issued within %s of %s, "
          "actual issued %s",
          absl::FormatDuration(*max_collateral_age),
          absl::FormatTime(absl::RFC3339_sec, at, absl::UTCTimeZone()),
          absl::FormatTime(absl::RFC3339_sec, oldest, absl::UTCTimeZone())));
    }
  }
  return out;
}

}  // namespace gputravel::tdx
