#include "keyxfer/tdx/tcb_info.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/hex.h"
#include "nlohmann/json.hpp"

namespace gputravel::tdx {
namespace {

using Json = nlohmann::json;

constexpr const char* kKnownStatuses[] = {
    "UpToDate",
    "SWHardeningNeeded",
    "ConfigurationNeeded",
    "ConfigurationAndSWHardeningNeeded",
    "OutOfDate",
    "OutOfDateConfigurationNeeded",
    "Revoked",
};

// Reads fields of one JSON object; the first error wins and names the path.
class Fields {
 public:
  Fields(const Json& j, std::string path, absl::Status* status)
      : j_(j), path_(std::move(path)), status_(status) {
    if (status_->ok() && !j_.is_object()) {
      Fail(path_, "must be a JSON object");
    }
  }

  const std::string& path() const { return path_; }
  // A reader of a nested object that reports into the same status.
  Fields Sub(const Json& j, std::string path) const {
    return Fields(j, std::move(path), status_);
  }
  bool ok() const { return status_->ok(); }

  const Json* Get(const char* name) {
    if (!ok()) return nullptr;
    auto it = j_.find(name);
    if (it == j_.end()) {
      Fail(Path(name), "is missing");
      return nullptr;
    }
    return &*it;
  }

  std::string Path(const char* name) const {
    return absl::StrCat(path_, ".", name);
  }

  void Fail(const std::string& path, absl::string_view problem) {
    if (status_->ok()) {
      *status_ = absl::InvalidArgumentError(absl::StrCat(path, " ", problem));
    }
  }

  std::string String(const char* name) {
    const Json* v = Get(name);
    if (v == nullptr) return "";
    if (!v->is_string()) {
      Fail(Path(name), "must be a string");
      return "";
    }
    return v->get<std::string>();
  }

  int64_t Int(const char* name, int64_t max) {
    const Json* v = Get(name);
    if (v == nullptr) return 0;
    if (!v->is_number_integer() || v->get<int64_t>() < 0 ||
        v->get<int64_t>() > max) {
      Fail(Path(name), absl::StrCat("must be an integer in 0..", max));
      return 0;
    }
    return v->get<int64_t>();
  }

  absl::Time Time(const char* name) {
    std::string s = String(name);
    if (!ok()) return absl::InfinitePast();
    absl::Time t;
    std::string err;
    if (!absl::ParseTime(absl::RFC3339_full, s, &t, &err)) {
      Fail(Path(name), absl::StrCat("is not an RFC 3339 time: \"", s, "\""));
      return absl::InfinitePast();
    }
    return t;
  }

  template <size_t N>
  void Hex(const char* name, std::array<uint8_t, N>* out) {
    std::string s = String(name);
    if (!ok()) return;
    auto bytes = HexDecodeExact(s, N);
    if (!bytes.ok()) {
      Fail(Path(name), bytes.status().message());
      return;
    }
    std::copy(bytes->begin(), bytes->end(), out->begin());
  }

  uint64_t Hex64(const char* name) {
    std::array<uint8_t, 8> b{};
    Hex(name, &b);
    // TCB info writes these as hex of the little-endian bytes in the TD
    // report ("attributes": "0000000000000000").
    uint64_t v = 0;
    for (size_t i = b.size(); i-- > 0;) v = (v << 8) | b[i];
    return v;
  }

  const Json* Array(const char* name) {
    const Json* v = Get(name);
    if (v != nullptr && !v->is_array()) {
      Fail(Path(name), "must be an array");
      return nullptr;
    }
    return v;
  }

  std::string Status(const char* name) {
    std::string s = String(name);
    if (ok() && !IsKnownTcbStatus(s)) {
      Fail(Path(name), absl::StrCat("is not a TCB status Intel defines: \"",
                                    s, "\""));
    }
    return s;
  }

  std::vector<std::string> Advisories() {
    std::vector<std::string> out;
    if (!ok() || !j_.contains("advisoryIDs")) return out;
    const Json* v = Array("advisoryIDs");
    if (v == nullptr) return out;
    for (const Json& a : *v) {
      if (!a.is_string()) {
        Fail(Path("advisoryIDs"), "must be an array of strings");
        return {};
      }
      out.push_back(a.get<std::string>());
    }
    return out;
  }

 private:
  const Json& j_;
  std::string path_;
  absl::Status* status_;
};

absl::StatusOr<Json> ParseObject(absl::string_view json,
                                 absl::string_view what) {
  Json j = Json::parse(json.begin(), json.end(), nullptr,
                       /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON"));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not a JSON object"));
  }
  return j;
}

// "sgxtcbcomponents" / "tdxtcbcomponents": exactly 16 {"svn": 0..255}.
void Components(Fields& f, const char* name, std::array<uint8_t, 16>* out) {
  const Json* v = f.Array(name);
  if (v == nullptr) return;
  if (v->size() != 16) {
    f.Fail(f.Path(name), absl::StrCat("must have 16 entries, has ", v->size()));
    return;
  }
  for (size_t i = 0; i < 16 && f.ok(); ++i) {
    Fields c = f.Sub(v->at(i), absl::StrCat(f.Path(name), "[", i, "]"));
    (*out)[i] = static_cast<uint8_t>(c.Int("svn", 255));
  }
}

// "tcbLevels" of a TDX module identity or the QE identity.
void IsvSvnLevels(Fields& f, std::vector<IsvSvnLevel>* out) {
  const Json* v = f.Array("tcbLevels");
  if (v == nullptr) return;
  if (v->empty()) f.Fail(f.Path("tcbLevels"), "is empty");
  for (size_t i = 0; i < v->size() && f.ok(); ++i) {
    Fields l = f.Sub(v->at(i), absl::StrCat(f.Path("tcbLevels"), "[", i, "]"));
    IsvSvnLevel level;
    const Json* tcb = l.Get("tcb");
    if (tcb == nullptr) return;
    Fields t = l.Sub(*tcb, l.Path("tcb"));
    level.isv_svn = static_cast<uint16_t>(t.Int("isvsvn", 65535));
    level.tcb_date = l.Time("tcbDate");
    level.status = l.Status("tcbStatus");
    level.advisory_ids = l.Advisories();
    out->push_back(std::move(level));
  }
}

void ModuleIdentity(Fields& f, bool with_levels, TdxModuleIdentity* out) {
  if (with_levels) out->id = f.String("id");
  f.Hex("mrsigner", &out->mr_signer);
  out->attributes = f.Hex64("attributes");
  out->attributes_mask = f.Hex64("attributesMask");
  if (with_levels) IsvSvnLevels(f, &out->levels);
}

}  // namespace

bool IsKnownTcbStatus(absl::string_view status) {
  return std::find(std::begin(kKnownStatuses), std::end(kKnownStatuses),
                   status) != std::end(kKnownStatuses);
}

absl::StatusOr<TcbInfo> ParseTcbInfo(absl::string_view json) {
  auto j = ParseObject(json, "TCB info");
  if (!j.ok()) return j.status();
  absl::Status status;
  Fields f(*j, "tcbInfo", &status);
  TcbInfo info;
  info.id = f.String("id");
  info.version = static_cast<int>(f.Int("version", 1000));
  if (f.ok() && (info.id != "TDX" || info.version != 3)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TCB info is id \"%s\" version %d; expected id \"TDX\" version 3 (the "
        "TDX TCB info of Intel PCS API v4)",
        info.id, info.version));
  }
  info.issue_date = f.Time("issueDate");
  info.next_update = f.Time("nextUpdate");
  f.Hex("fmspc", &info.fmspc);
  f.Hex("pceId", &info.pce_id);
  info.tcb_type = static_cast<int>(f.Int("tcbType", 255));
  info.tcb_evaluation_data_number =
      static_cast<int>(f.Int("tcbEvaluationDataNumber", 1 << 30));
  if (const Json* m = f.Get("tdxModule")) {
    Fields mf = f.Sub(*m, f.Path("tdxModule"));
    ModuleIdentity(mf, /*with_levels=*/false, &info.tdx_module);
  }
  // Older TDX TCB info (before TDX module identities) lacks this array.
  if (f.ok() && j->contains("tdxModuleIdentities")) {
    const Json* ids = f.Array("tdxModuleIdentities");
    for (size_t i = 0; ids != nullptr && i < ids->size() && f.ok(); ++i) {
      Fields mf = f.Sub(ids->at(i), absl::StrCat(f.Path("tdxModuleIdentities"),
                                                 "[", i, "]"));
      TdxModuleIdentity identity;
      ModuleIdentity(mf, /*with_levels=*/true, &identity);
      info.tdx_module_identities.push_back(std::move(identity));
    }
  }
  const Json* levels = f.Array("tcbLevels");
  if (levels != nullptr && levels->empty()) {
    f.Fail(f.Path("tcbLevels"), "is empty");
  }
  for (size_t i = 0; levels != nullptr && i < levels->size() && f.ok(); ++i) {
    Fields l = f.Sub(levels->at(i),
                     absl::StrCat(f.Path("tcbLevels"), "[", i, "]"));
    TcbLevel level;
    const Json* tcb = l.Get("tcb");
    if (tcb == nullptr) break;
    Fields t = l.Sub(*tcb, l.Path("tcb"));
    Components(t, "sgxtcbcomponents", &level.sgx_components);
    level.pce_svn = static_cast<uint16_t>(t.Int("pcesvn", 65535));
    Components(t, "tdxtcbcomponents", &level.tdx_components);
    level.tcb_date = l.Time("tcbDate");
    level.status = l.Status("tcbStatus");
    level.advisory_ids = l.Advisories();
    info.levels.push_back(std::move(level));
  }
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TCB info: ", status.message()));
  }
  return info;
}

absl::StatusOr<QeIdentity> ParseQeIdentity(absl::string_view json) {
  auto j = ParseObject(json, "QE identity");
  if (!j.ok()) return j.status();
  absl::Status status;
  Fields f(*j, "enclaveIdentity", &status);
  QeIdentity qe;
  qe.id = f.String("id");
  qe.version = static_cast<int>(f.Int("version", 1000));
  if (f.ok() && (qe.id != "TD_QE" || qe.version != 2)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "QE identity is id \"%s\" version %d; expected id \"TD_QE\" version 2 "
        "(the TD Quoting Enclave identity of Intel PCS API v4)",
        qe.id, qe.version));
  }
  qe.issue_date = f.Time("issueDate");
  qe.next_update = f.Time("nextUpdate");
  qe.tcb_evaluation_data_number =
      static_cast<int>(f.Int("tcbEvaluationDataNumber", 1 << 30));
  // MISCSELECT is written as the hex of its big-endian value.
  std::array<uint8_t, 4> misc{}, misc_mask{};
  f.Hex("miscselect", &misc);
  f.Hex("miscselectMask", &misc_mask);
  for (int i = 0; i < 4; ++i) {
    qe.misc_select = (qe.misc_select << 8) | misc[i];
    qe.misc_select_mask = (qe.misc_select_mask << 8) | misc_mask[i];
  }
  f.Hex("attributes", &qe.attributes);
  f.Hex("attributesMask", &qe.attributes_mask);
  f.Hex("mrsigner", &qe.mr_signer);
  qe.isv_prod_id = static_cast<uint16_t>(f.Int("isvprodid", 65535));
  IsvSvnLevels(f, &qe.levels);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("QE identity: ", status.message()));
  }
  return qe;
}

}  // namespace gputravel::tdx
