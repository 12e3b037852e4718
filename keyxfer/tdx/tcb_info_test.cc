#include "keyxfer/tdx/tcb_info.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/hex.h"
#include "keyxfer/tdx/testdata.h"
#include "nlohmann/json.hpp"

namespace gputravel::tdx {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Field(const std::string& bundle, const char* name) {
  return nlohmann::json::parse(bundle).at(name).get<std::string>();
}

absl::Time Utc(int y, int m, int d, int hh, int mm, int ss) {
  return absl::FromCivil(absl::CivilSecond(y, m, d, hh, mm, ss),
                         absl::UTCTimeZone());
}

TEST(TcbInfoTest, ParsesIntelsTdxTcbInfo) {
  auto info =
      ParseTcbInfo(Field(testing::DcapQuoteCollateral(), "tcb_info"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->id, "TDX");
  EXPECT_EQ(info->version, 3);
  EXPECT_EQ(info->issue_date, Utc(2025, 6, 19, 10, 16, 3));
  EXPECT_EQ(info->next_update, Utc(2025, 7, 19, 10, 16, 3));
  EXPECT_EQ(HexEncode(info->fmspc), "b0c06f000000");
  EXPECT_EQ(info->tcb_evaluation_data_number, 17);
  ASSERT_EQ(info->levels.size(), 2u);
  EXPECT_EQ(info->levels[0].status, "UpToDate");
  EXPECT_EQ(info->levels[0].pce_svn, 11);
  EXPECT_EQ(HexEncode(info->levels[0].sgx_components),
            "02020202030100050000000000000000");
  EXPECT_EQ(HexEncode(info->levels[0].tdx_components),
            "05000200000000000000000000000000");
  EXPECT_EQ(info->levels[1].status, "OutOfDate");
  EXPECT_EQ(info->levels[1].advisory_ids.size(), 14u);
  ASSERT_EQ(info->tdx_module_identities.size(), 2u);
  EXPECT_EQ(info->tdx_module_identities[1].id, "TDX_01");
  EXPECT_EQ(info->tdx_module_identities[1].attributes_mask,
            0xFFFFFFFFFFFFFFFFull);
  ASSERT_EQ(info->tdx_module_identities[1].levels.size(), 2u);
  EXPECT_EQ(info->tdx_module_identities[1].levels[0].isv_svn, 4);
}

TEST(TcbInfoTest, ParsesIntelsTdQeIdentity) {
  auto qe =
      ParseQeIdentity(Field(testing::DcapQuoteCollateral(), "qe_identity"));
  ASSERT_TRUE(qe.ok()) << qe.status();
  EXPECT_EQ(qe->id, "TD_QE");
  EXPECT_EQ(HexEncode(qe->mr_signer),
            "dc9e2a7c6f948f17474e34a7fc43ed030f7c1563f1babddf6340c82e0e54a8c5");
  EXPECT_EQ(qe->isv_prod_id, 2);
  EXPECT_EQ(qe->misc_select_mask, 0xFFFFFFFFu);
  EXPECT_EQ(HexEncode(qe->attributes), "11000000000000000000000000000000");
  ASSERT_EQ(qe->levels.size(), 1u);
  EXPECT_EQ(qe->levels[0].isv_svn, 4);
  EXPECT_EQ(qe->levels[0].status, "UpToDate");
}

TEST(TcbInfoTest, RefusesOtherDocuments) {
  std::string body = Field(testing::DcapQuoteCollateral(), "tcb_info");
  auto sgx = ParseTcbInfo(absl::StrReplaceAll(body, {{"\"id\":\"TDX\"",
                                                     "\"id\":\"SGX\""}}));
  EXPECT_THAT(std::string(sgx.status().message()),
              HasSubstr("expected id \"TDX\" version 3"));
  auto qe = ParseQeIdentity(body);
  EXPECT_FALSE(qe.ok());
}

TEST(TcbInfoTest, ErrorsNameTheField) {
  std::string body = Field(testing::DcapQuoteCollateral(), "tcb_info");
  auto no_fmspc = ParseTcbInfo(
      absl::StrReplaceAll(body, {{"\"fmspc\"", "\"fmspx\""}}));
  EXPECT_THAT(std::string(no_fmspc.status().message()),
              HasSubstr("tcbInfo.fmspc is missing"));
  auto bad_status = ParseTcbInfo(absl::StrReplaceAll(
      body, {{"\"tcbStatus\":\"OutOfDate\"", "\"tcbStatus\":\"Fine\""}}));
  EXPECT_THAT(std::string(bad_status.status().message()),
              HasSubstr("tcbInfo.tdxModuleIdentities[1].tcbLevels[1].tcbStatus "
                        "is not a TCB status "
                        "Intel defines: \"Fine\""));
  auto bad_date = ParseTcbInfo(absl::StrReplaceAll(
      body, {{"2025-07-19T10:16:03Z", "next month"}}));
  EXPECT_THAT(std::string(bad_date.status().message()),
              HasSubstr("tcbInfo.nextUpdate is not an RFC 3339 time"));
  EXPECT_FALSE(ParseTcbInfo("[]").ok());
  EXPECT_FALSE(ParseTcbInfo("{").ok());
}

TEST(TcbInfoTest, KnownStatuses) {
  EXPECT_TRUE(IsKnownTcbStatus("UpToDate"));
  EXPECT_TRUE(IsKnownTcbStatus("OutOfDateConfigurationNeeded"));
  EXPECT_FALSE(IsKnownTcbStatus("uptodate"));
}

}  // namespace
}  // namespace gputravel::tdx
