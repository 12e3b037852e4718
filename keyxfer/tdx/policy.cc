#include "keyxfer/tdx/policy.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "util/hex.h"

namespace gputravel::tdx {
namespace {

using Json = nlohmann::json;

constexpr const char* kKnownFields[] = {
    "mrtd",          "rtmr0",       "rtmr1",           "rtmr2",
    "rtmr3",         "mrseam",      "mrconfigid",      "mrowner",
    "mrownerconfig", "allow_debug", "min_tee_tcb_svn", "require_report_data",
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
  Json j = Json::parse(json.begin(), json.end(), nullptr,
                       /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("TDX policy is not valid JSON");
  }
  return FromJsonValue(j);
}

absl::StatusOr<Policy> Policy::FromJsonValue(const Json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError("TDX policy must be a JSON object");
  }
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    if (std::find(std::begin(kKnownFields), std::end(kKnownFields), key) ==
        std::end(kKnownFields)) {
      return FieldError(key, absl::StrCat("unknown field (known: ",
                                          absl::StrJoin(kKnownFields, ", "),
                                          ")"));
    }
  }
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
  if (!s.ok()) return s;
  return p;
}

absl::Status Policy::Check(
    const TdReportBody& body,
    const std::array<uint8_t, 64>& expected_report_data) const {
  if (!allow_debug && (body.td_attributes & kTdAttributeDebug) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "TDX policy: TD attributes 0x%016x have DEBUG (bit 0) set and "
        "allow_debug is false (expected DEBUG clear, actual set)",
        body.td_attributes));
  }
  if (auto s = CheckAllowed("MRTD", mrtd, body.mr_td); !s.ok()) return s;
  for (int i = 0; i < 4; ++i) {
    if (auto s = CheckAllowed(absl::StrCat("RTMR", i), rtmr[i], body.rtmr[i]);
        !s.ok()) {
      return s;
    }
  }
  if (auto s = CheckAllowed("MRSEAM", mrseam, body.mr_seam); !s.ok()) return s;
  if (auto s = CheckAllowed("MRCONFIGID", mrconfigid, body.mr_config_id);
      !s.ok()) {
    return s;
  }
  if (auto s = CheckAllowed("MROWNER", mrowner, body.mr_owner); !s.ok()) return s;
  if (auto s = CheckAllowed("MROWNERCONFIG", mrownerconfig, body.mr_owner_config);
      !s.ok()) {
    return s;
  }
  if (min_tee_tcb_svn.has_value()) {
    for (size_t i = 0; i < min_tee_tcb_svn->size(); ++i) {
      if (body.tee_tcb_svn[i] < (*min_tee_tcb_svn)[i]) {
        return absl::PermissionDeniedError(absl::StrFormat(
            "TDX policy: TEE_TCB_SVN below minimum at component %d (0x%02x < "
            "0x%02x): expected each byte >= %s, actual %s",
            i, body.tee_tcb_svn[i], (*min_tee_tcb_svn)[i],
            HexEncode(*min_tee_tcb_svn), HexEncode(body.tee_tcb_svn)));
      }
    }
  }
  if (require_report_data &&
      CRYPTO_memcmp(body.report_data.data(), expected_report_data.data(),
                    expected_report_data.size()) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "TDX policy: REPORTDATA mismatch (quote not bound to this channel or "
        "nonce): expected %s, actual %s",
        HexEncode(expected_report_data), HexEncode(body.report_data)));
  }
  return absl::OkStatus();
}

}  // namespace gputravel::tdx
