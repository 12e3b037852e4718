#include "keyxfer/tdx/policy.h"

#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/tdx/testdata.h"
#include "nlohmann/json.hpp"
#include "util/hex.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;

const std::array<uint8_t, 64> kZeros{};

class PolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto q = ParseQuote(testing::RealQuote());
    ASSERT_TRUE(q.ok()) << q.status();
    body_ = q->body;
  }

  absl::StatusOr<Policy> Parse(const std::string& json) {
    return Policy::FromJson(json);
  }

  std::string ParseError(const std::string& json) {
    auto p = Parse(json);
    if (p.ok()) return "<parsed>";
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  }

  std::string CheckError(const std::string& json,
                         const std::array<uint8_t, 64>& report_data = kZeros) {
    auto p = Parse(json);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return "<no policy>";
    absl::Status s = p->Check(body_, report_data);
    if (s.ok()) return "<ok>";
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
    return std::string(s.message());
  }

  TdReportBody body_;
};

// "{}" parses (Check also serves offline inspection) and checks only that
// the TD is not a debug TD and that REPORTDATA matches: any other TD passes.
// That is not safe for giving out keys, so TdxVerifier::Create refuses such a
// policy (tdx_attester_test: CreateRefusesEmptyPolicyNamingEveryMandatoryPin).
TEST_F(PolicyTest, EmptyPolicyChecksOnlyDebugAndReportData) {
  auto p = Parse("{}");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->allow_debug);
  EXPECT_TRUE(p->require_report_data);
  EXPECT_TRUE(p->mrtd.empty());
  for (const auto& r : p->rtmr) EXPECT_TRUE(r.empty());
  EXPECT_FALSE(p->min_tee_tcb_svn.has_value());
  EXPECT_TRUE(p->Check(body_, kZeros).ok());
  // Only these two are checked.
  TdReportBody debug = body_;
  debug.td_attributes |= kTdAttributeDebug;
  EXPECT_EQ(p->Check(debug, kZeros).code(),
            absl::StatusCode::kPermissionDenied);
  std::array<uint8_t, 64> other{};
  other[0] = 1;
  EXPECT_EQ(p->Check(body_, other).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(PolicyTest, FullPolicyMatchingTheRealQuotePasses) {
  std::string json = absl::StrCat(
      R"({"mrtd": ")", HexEncode(body_.mr_td), R"(", "rtmr0": ")",
      HexEncode(body_.rtmr[0]), R"(", "rtmr1": ")", HexEncode(body_.rtmr[1]),
      R"(", "rtmr2": ")", HexEncode(body_.rtmr[2]), R"(", "rtmr3": ")",
      HexEncode(body_.rtmr[3]), R"(", "mrseam": ")", HexEncode(body_.mr_seam),
      R"(", "mrconfigid": ")", HexEncode(body_.mr_config_id), R"(", "mrowner": ")",
      HexEncode(body_.mr_owner), R"(", "mrownerconfig": ")",
      HexEncode(body_.mr_owner_config), R"(", "allow_debug": false,)",
      R"( "min_tee_tcb_svn": "04010700000000000000000000000000",)",
      R"( "require_report_data": true})");
  auto p = Parse(json);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->mrtd.size(), 1u);
  EXPECT_EQ(p->mrtd[0], body_.mr_td);
  ASSERT_EQ(p->rtmr[2].size(), 1u);
  EXPECT_EQ(p->rtmr[2][0], body_.rtmr[2]);
  EXPECT_TRUE(p->Check(body_, kZeros).ok()) << p->Check(body_, kZeros);
}

TEST_F(PolicyTest, UppercaseHexAccepted) {
  std::string hex = HexEncode(body_.mr_td);
  for (char& c : hex) c = static_cast<char>(std::toupper(c));
  EXPECT_EQ(CheckError(absl::StrCat(R"({"mrtd": ")", hex, R"("})")), "<ok>");
}

// Every measurement field: a matching pin passes, a different one fails with
// the field name, the expected and the actual value.
struct MeasurementField {
  const char* json_key;
  const char* name;
  std::function<const Measurement&(const TdReportBody&)> get;
};

class PolicyMeasurementTest
    : public PolicyTest,
      public ::testing::WithParamInterface<MeasurementField> {};

TEST_P(PolicyMeasurementTest, MatchPassesMismatchNamesFieldAndValues) {
  const MeasurementField& f = GetParam();
  std::string actual = HexEncode(f.get(body_));
  EXPECT_EQ(CheckError(absl::StrCat("{\"", f.json_key, "\": \"", actual,
                                    "\"}")),
            "<ok>");
  std::string other(96, 'f');
  ASSERT_NE(other, actual);
  EXPECT_EQ(CheckError(absl::StrCat("{\"", f.json_key, "\": \"", other,
                                    "\"}")),
            absl::StrCat("TDX policy: ", f.name, " mismatch: expected ", other,
                         ", actual ", actual));
}

TEST_P(PolicyMeasurementTest, MalformedHexNamesField) {
  const MeasurementField& f = GetParam();
  std::string bad(96, '0');
  bad[10] = 'x';
  EXPECT_THAT(ParseError(absl::StrCat("{\"", f.json_key, "\": \"", bad, "\"}")),
              HasSubstr(absl::StrCat("TDX policy field \"", f.json_key,
                                     "\": invalid hex character 'x' at "
                                     "position 10")));
  EXPECT_THAT(ParseError(absl::StrCat("{\"", f.json_key, "\": \"abcd\"}")),
              HasSubstr(absl::StrCat("TDX policy field \"", f.json_key,
                                     "\": expected 96 hex characters")));
  EXPECT_THAT(ParseError(absl::StrCat("{\"", f.json_key, "\": 12}")),
              HasSubstr(absl::StrCat("TDX policy field \"", f.json_key,
                                     "\": must be a string")));
}

INSTANTIATE_TEST_SUITE_P(
    AllMeasurements, PolicyMeasurementTest,
    ::testing::Values(
        MeasurementField{"mrtd", "MRTD",
                         [](const TdReportBody& b) -> const Measurement& {
                           return b.mr_td;
                         }},
        MeasurementField{"rtmr0", "RTMR0",
                         [](const TdReportBody& b) -> const Measurement& {
                           return b.rtmr[0];
                         }},
        MeasurementField{"rtmr1", "RTMR1",
                         [](const TdReportBody& b) -> const Measurement& {
                           return b.rtmr[1];
                         }},
        MeasurementField{"rtmr2", "RTMR2",
                         [](const TdReportBody& b) -> const Measurement& {
                           return b.rtmr[2];
                         }},
        MeasurementField{"rtmr3", "RTMR3",
                         [](const TdReportBody& b) -> const Measurement& {
                           return b.rtmr[3];
                         }},
        MeasurementField{"mrseam", "MRSEAM",
                         [](const TdReportBody& b) -> const Measurement& {
                           return b.mr_seam;
                         }},
        MeasurementField{"mrconfigid", "MRCONFIGID",
                         [](const TdReportBody& b) -> const Measurement& {
                           return b.mr_config_id;
                         }},
        MeasurementField{"mrowner", "MROWNER",
                         [](const TdReportBody& b) -> const Measurement& {
                           return b.mr_owner;
                         }},
        MeasurementField{"mrownerconfig", "MROWNERCONFIG",
                         [](const TdReportBody& b) -> const Measurement& {
                           return b.mr_owner_config;
                         }}),
    [](const ::testing::TestParamInfo<MeasurementField>& info) {
      return std::string(info.param.json_key);
    });

TEST_F(PolicyTest, ListOfAllowedValuesAcceptsAnyOfThem) {
  std::string other(96, 'e');
  std::string actual = HexEncode(body_.mr_td);
  EXPECT_EQ(CheckError(absl::StrCat(R"({"mrtd": [")", other, R"(", ")", actual,
                                    R"("]})")),
            "<ok>");
  EXPECT_EQ(CheckError(absl::StrCat(R"({"rtmr1": [")", other, R"(", ")",
                                    std::string(96, 'd'), R"("]})")),
            absl::StrCat("TDX policy: RTMR1 mismatch: expected one of [", other,
                         ", ", std::string(96, 'd'), "], actual ",
                         HexEncode(body_.rtmr[1])));
}

TEST_F(PolicyTest, ListsMustBeNonEmptyAndWellFormed) {
  EXPECT_THAT(ParseError(R"({"mrowner": []})"),
              HasSubstr("TDX policy field \"mrowner\": empty list would "
                        "refuse every TD"));
  EXPECT_THAT(
      ParseError(absl::StrCat(R"({"mrtd": [")", std::string(96, '0'),
                              R"(", "00"]})")),
      HasSubstr("TDX policy field \"mrtd\": expected 96 hex characters (48 "
                "bytes), got 2 characters (list entry 1)"));
  EXPECT_THAT(ParseError(R"({"mrtd": [true]})"),
              HasSubstr("\"mrtd\": must be a string"));
}

TEST_F(PolicyTest, FromJsonValueTakesAParsedSection) {
  nlohmann::json j = {{"mrtd", HexEncode(body_.mr_td)}, {"allow_debug", true}};
  auto p = Policy::FromJsonValue(j);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->allow_debug);
  EXPECT_TRUE(p->Check(body_, kZeros).ok());
  EXPECT_FALSE(Policy::FromJsonValue(nlohmann::json::array()).ok());
}

TEST_F(PolicyTest, RefusesUnknownFieldByName) {
  std::string e = ParseError(R"({"mrdt": "00"})");
  EXPECT_THAT(e, HasSubstr("TDX policy: unknown field 'mrdt' (did you mean 'mrtd'? accepted: "));
  EXPECT_THAT(e, HasSubstr("mrtd"));  // lists the known ones
}

TEST_F(PolicyTest, RefusesAKeyGivenTwiceByPath) {
  // JSON would keep the last silently: here a relaxed debug setting.
  EXPECT_EQ(ParseError(R"({"allow_debug": false, "allow_debug": true})"),
            "TDX policy: allow_debug: appears twice in the same object");
}

TEST_F(PolicyTest, RefusesNonJsonAndNonObject) {
  EXPECT_THAT(ParseError("{\"mrtd\": "), HasSubstr("TDX policy: invalid JSON at byte"));
  EXPECT_THAT(ParseError("[1, 2]"), HasSubstr("must be a JSON object"));
  EXPECT_THAT(ParseError("\"mrtd\""), HasSubstr("must be a JSON object"));
}

TEST_F(PolicyTest, DebugTdRefusedUnlessAllowed) {
  body_.td_attributes |= kTdAttributeDebug;
  std::string e = CheckError("{}");
  EXPECT_THAT(e, HasSubstr("TD attributes 0x0000000010000001 have DEBUG (bit "
                           "0) set and allow_debug is false"));
  EXPECT_EQ(CheckError(R"({"allow_debug": true})"), "<ok>");
  EXPECT_EQ(CheckError(R"({"allow_debug": false})"), e);
}

TEST_F(PolicyTest, AllowDebugMustBeBoolean) {
  EXPECT_THAT(ParseError(R"({"allow_debug": "false"})"),
              HasSubstr("TDX policy field \"allow_debug\": must be true or "
                        "false"));
  EXPECT_THAT(ParseError(R"({"allow_debug": 0})"),
              HasSubstr("\"allow_debug\""));
}

TEST_F(PolicyTest, MinTeeTcbSvnEqualPasses) {
  EXPECT_EQ(CheckError(R"({"min_tee_tcb_svn": "04010700000000000000000000000000"})"),
            "<ok>");
  EXPECT_EQ(CheckError(R"({"min_tee_tcb_svn": "03000600000000000000000000000000"})"),
            "<ok>");
}

TEST_F(PolicyTest, MinTeeTcbSvnHigherComponentFailsNamingComponent) {
  EXPECT_EQ(
      CheckError(R"({"min_tee_tcb_svn": "04010800000000000000000000000000"})"),
      "TDX policy: TEE_TCB_SVN below minimum at component 2 (0x07 < 0x08): "
      "expected each byte >= 04010800000000000000000000000000, actual "
      "04010700000000000000000000000000");
}

TEST_F(PolicyTest, MinTeeTcbSvnIsBytewiseNotNumeric) {
  // As one big-endian number 0302.. < 0401.., but component 1 (0x01 < 0x02)
  // is below its minimum.
  EXPECT_THAT(
      CheckError(R"({"min_tee_tcb_svn": "03020000000000000000000000000000"})"),
      HasSubstr("below minimum at component 1 (0x01 < 0x02)"));
  EXPECT_THAT(
      CheckError(R"({"min_tee_tcb_svn": "000000000000000000000000000000ff"})"),
      HasSubstr("component 15"));
}

TEST_F(PolicyTest, MinTeeTcbSvnMalformedNamesField) {
  EXPECT_THAT(ParseError(R"({"min_tee_tcb_svn": "0401"})"),
              HasSubstr("TDX policy field \"min_tee_tcb_svn\": expected 32 hex "
                        "characters (16 bytes), got 4"));
  EXPECT_THAT(
      ParseError(R"({"min_tee_tcb_svn": "0401070000000000000000000000000g"})"),
      HasSubstr("\"min_tee_tcb_svn\": invalid hex character 'g'"));
}

TEST_F(PolicyTest, ReportDataMustMatchByDefault) {
  std::array<uint8_t, 64> expected{};
  expected[63] = 0x2a;
  std::string e = CheckError("{}", expected);
  EXPECT_THAT(e, HasSubstr("REPORTDATA mismatch"));
  EXPECT_THAT(e, HasSubstr(absl::StrCat("expected ", std::string(126, '0'),
                                        "2a, actual ", std::string(128, '0'))));
  EXPECT_EQ(CheckError(R"({"require_report_data": true})", expected), e);
}

TEST_F(PolicyTest, ReportDataIgnoredWhenNotRequired) {
  std::array<uint8_t, 64> expected{};
  expected[0] = 1;
  EXPECT_EQ(CheckError(R"({"require_report_data": false})", expected), "<ok>");
  EXPECT_THAT(ParseError(R"({"require_report_data": null})"),
              HasSubstr("\"require_report_data\": must be true or false"));
}

TEST_F(PolicyTest, FirstFieldErrorIsReported) {
  EXPECT_THAT(ParseError(R"({"mrtd": "00", "allow_debug": 1})"),
              HasSubstr("\"mrtd\""));
}

}  // namespace
}  // namespace gputravel::tdx
