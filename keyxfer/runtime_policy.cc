#include "keyxfer/runtime_policy.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/files.h"
#include "util/hex.h"
#include "util/json_fields.h"

namespace gputravel {
namespace {

absl::Status ReadPins(const nlohmann::json& j, const std::string& where, const char* field,
                      std::vector<std::string>* out) {
  if (!j.contains(field)) return absl::OkStatus();
  const std::string at = where + "." + field;
  const nlohmann::json& v = j.at(field);
  std::vector<nlohmann::json> items;
  if (v.is_array()) {
    if (v.empty()) {
      return absl::InvalidArgumentError(at + ": an empty list would refuse every peer");
    }
    items.assign(v.begin(), v.end());
  } else {
    items.push_back(v);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    auto bytes = items[i].is_string() ? HexDecode(items[i].get<std::string>())
                                      : absl::StatusOr<std::string>(absl::InvalidArgumentError(""));
    if (!bytes.ok() || bytes->size() != kRtmrBytes) {
      return absl::InvalidArgumentError(
          at + (v.is_array() ? "[" + std::to_string(i) + "]" : std::string()) +
          ": must be 96 hex digits (an event digest printed by `gputravel measure`)");
    }
    out->push_back(*bytes);
  }
  return absl::OkStatus();
}

absl::Status CheckEvent(int event, const std::vector<std::string>& allowed,
                        const std::string& actual) {
  if (allowed.empty() || std::find(allowed.begin(), allowed.end(), actual) != allowed.end()) {
    return absl::OkStatus();
  }
  std::vector<std::string> hex;
  for (const auto& a : allowed) hex.push_back(HexEncode(a));
  return absl::PermissionDeniedError(absl::StrCat(
      "RTMR3 ", Rtmr3EventName(event), " event mismatch: expected ",
      hex.size() == 1 ? hex[0] : "one of [" + absl::StrJoin(hex, ", ") + "]", ", actual ",
      HexEncode(actual),
      event == kRtmr3BinaryEvent ? " (the peer runs another binary)"
                                 : " (the peer runs with another configuration)"));
}

}  // namespace

absl::StatusOr<Rtmr3Policy> Rtmr3Policy::FromJson(const nlohmann::json& j,
                                                  const std::string& where) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        where + ": must be an object {\"binary\", \"config\", \"peer_pins\"}");
  }
  absl::Status known = RefuseUnknownFields(j, {"binary", "config", "peer_pins"}, where);
  if (!known.ok()) return known;
  Rtmr3Policy p;
  for (auto [field, out] : {std::pair<const char*, std::vector<std::string>*>{"binary", &p.binary},
                            {"config", &p.config},
                            {"peer_pins", &p.peer_pins}}) {
    absl::Status s = ReadPins(j, where, field, out);
    if (!s.ok()) return s;
  }
  if (p.binary.empty() || p.config.empty()) {
    return absl::InvalidArgumentError(
        where + ": must pin \"binary\" and \"config\" (the peer's RTMR3 events from "
        "`gputravel measure`): without them a peer whose host replaced its binary or "
        "configuration would pass");
  }
  return p;
}

absl::Status Rtmr3Policy::Check(const std::vector<uint8_t>& rtmr3,
                                const Evidence& evidence) const {
  if (evidence.rtmr3_events_size() != kRtmr3EventCount) {
    return absl::PermissionDeniedError(absl::StrCat(
        "RTMR3 events: the evidence carries ", evidence.rtmr3_events_size(), ", expected ",
        kRtmr3EventCount, " (binary, config, peer_pins): the peer did not measure what it "
        "trusts"));
  }
  std::vector<std::string> events(evidence.rtmr3_events().begin(),
                                  evidence.rtmr3_events().end());
  for (const auto& e : events) {
    if (e.size() != kRtmrBytes) {
      return absl::PermissionDeniedError("RTMR3 events: an event is not 48 bytes");
    }
  }
  const std::string replayed = ReplayRtmr(events);
  const std::string actual(rtmr3.begin(), rtmr3.end());
  if (replayed != actual) {
    return absl::PermissionDeniedError(
        "RTMR3 mismatch: the evidence's events replay to " + HexEncode(replayed) +
        ", the attested register is " + HexEncode(actual) +
        " (RTMR3 was extended with something else, or not at all)");
  }
  for (auto [event, allowed] : {std::pair<int, const std::vector<std::string>*>{
                                    kRtmr3BinaryEvent, &binary},
                                {kRtmr3ConfigEvent, &config},
                                {kRtmr3PeerPinsEvent, &peer_pins}}) {
    absl::Status s = CheckEvent(event, *allowed, events[event]);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<Evidence> MeasuredAttester::Attest(const ReportData& report_data) {
  auto evidence = inner_->Attest(report_data);
  if (!evidence.ok()) return evidence;
  evidence->clear_rtmr3_events();
  for (const auto& e : measurement_.events) evidence->add_rtmr3_events(e);
  return evidence;
}

absl::StatusOr<AttestedIdentity> MeasuredVerifier::Verify(
    const Evidence& evidence, const ReportData& expected_report_data) {
  auto id = inner_->Verify(evidence, expected_report_data);
  if (!id.ok()) return id;
  if (id->rtmr.size() != 4) {
    return absl::PermissionDeniedError("evidence carries no RTMR3");
  }
  absl::Status s = policy_.Check(id->rtmr[3], evidence);
  if (!s.ok()) return s;
  return id;
}

}  // namespace gputravel
