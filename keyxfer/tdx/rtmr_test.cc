#include "keyxfer/tdx/rtmr.h"

#include <cerrno>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/runtime_measurement.h"
#include "keyxfer/runtime_policy.h"
#include "keyxfer/tdx/fake_rtmr_fs.h"
#include "keyxfer/tdx/fake_tsm_fs.h"
#include "keyxfer/tdx/quote.h"
#include "keyxfer/tdx/tdx_attester.h"
#include "keyxfer/tdx/testdata.h"
#include "util/hex.h"
#include "util/test_dir.h"

namespace gputravel::tdx {
namespace {

using ::testing::HasSubstr;
using testing::FakeConfigfsTsm;
using testing::FakeTdxMeasurements;

const char kRoot[] = "/sys/class/misc/tdx_guest/measurements";

std::string Bytes(const Measurement& m) { return std::string(m.begin(), m.end()); }
std::string Hex(const std::string& b) {
  return HexEncode(std::vector<uint8_t>(b.begin(), b.end()));
}

RuntimeMeasurement MeasurementOf(char seed) {
  RuntimeMeasurement m;
  for (int i = 0; i < kRtmr3EventCount; ++i) m.events[i] = std::string(48, seed + i);
  m.rtmr3 = ReplayRtmr(m.EventList());
  return m;
}

class RtmrTest : public ::testing::Test {
 protected:
  RtmrRegisters Registers() {
    RtmrOptions o;
    o.root = kRoot;
    o.fs = td_;
    return RtmrRegisters(o);
  }
  std::shared_ptr<FakeTdxMeasurements> td_ = std::make_shared<FakeTdxMeasurements>(kRoot);
};

TEST_F(RtmrTest, DefaultIsTheKernelsSysfsInterface) {
  EXPECT_EQ(RtmrRegisters().PathOf(3), std::string(kRoot) + "/rtmr3:sha384");
}

TEST_F(RtmrTest, ExtendIsTheTdxExtendOperation) {
  RtmrRegisters r = Registers();
  ASSERT_TRUE(r.Extend(3, std::string(48, '\x11')).ok());
  auto v = r.Read(3);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, ExtendRtmr(std::string(48, '\0'), std::string(48, '\x11')));
  EXPECT_EQ(*r.Read(2), std::string(48, '\0'));
  EXPECT_EQ(r.Extend(3, "short").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RtmrTest, FreshTdIsMeasuredAndARestartWithTheSameMeasurementIsAccepted) {
  RtmrRegisters r = Registers();
  const RuntimeMeasurement m = MeasurementOf('a');
  ASSERT_TRUE(MeasureIntoRtmr3(r, m.EventList(), m.rtmr3).ok());
  EXPECT_EQ(td_->rtmr(3), m.rtmr3);
  EXPECT_EQ(td_->extends(), 3);
  // A restarted daemon with the same binary and configuration.
  ASSERT_TRUE(MeasureIntoRtmr3(r, m.EventList(), m.rtmr3).ok());
  EXPECT_EQ(td_->extends(), 3);
}

TEST_F(RtmrTest, AnotherMeasurementInTheSameTdIsRefused) {
  RtmrRegisters r = Registers();
  const RuntimeMeasurement a = MeasurementOf('a');
  const RuntimeMeasurement b = MeasurementOf('b');
  ASSERT_TRUE(MeasureIntoRtmr3(r, a.EventList(), a.rtmr3).ok());
  absl::Status s = MeasureIntoRtmr3(r, b.EventList(), b.rtmr3);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("holds " + Hex(a.rtmr3)));
  EXPECT_THAT(std::string(s.message()), HasSubstr("restart the TD"));
  EXPECT_EQ(td_->rtmr(3), a.rtmr3);  // nothing extended
}

TEST_F(RtmrTest, FailuresNameTheFileAndTheCause) {
  const RuntimeMeasurement m = MeasurementOf('a');
  RtmrRegisters r = Registers();
  td_->set_missing(true);
  absl::Status s = MeasureIntoRtmr3(r, m.EventList(), m.rtmr3);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr(std::string(kRoot) + "/rtmr3:sha384"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("Linux 6.16+"));
  td_->set_missing(false);
  td_->set_write_errno(EACCES);
  s = MeasureIntoRtmr3(r, m.EventList(), m.rtmr3);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("extending " + std::string(kRoot)));
  td_->set_write_errno(0);
  td_->set_interloper(true);
  s = MeasureIntoRtmr3(r, m.EventList(), m.rtmr3);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("another process extended RTMR3"));
}

// On the configfs-tsm fake: the quote a measured TD hands out reports the
// extended RTMR3, its events replay to it, and a peer's policy pinned to
// another configuration's events refuses it. (The fake cannot sign a quote
// whose body changed, so this checks the quote's body as TdxVerifier's
// policy step sees it, after authenticity.)
TEST_F(RtmrTest, QuotesReflectTheMeasurementAndAChangedConfigurationIsRefused) {
  const std::string tsm_root = MakeTestDir("tsm.");
  auto tsm = std::make_shared<FakeConfigfsTsm>(tsm_root, testing::RealQuote());
  tsm->set_measurements(td_);
  ConfigfsTsmOptions o;
  o.root = tsm_root;
  o.fs = tsm;

  const RuntimeMeasurement reviewed = MeasurementOf('a');
  auto pins = Rtmr3Policy::FromJson(
      {{"binary", Hex(reviewed.events[0])}, {"config", Hex(reviewed.events[1])},
       {"peer_pins", Hex(reviewed.events[2])}},
      "holder.json: attestation.peer_rtmr3");
  ASSERT_TRUE(pins.ok()) << pins.status();

  // The reviewed configuration, measured into a fresh TD.
  RtmrRegisters r = Registers();
  ASSERT_TRUE(MeasureIntoRtmr3(r, reviewed.EventList(), reviewed.rtmr3).ok());
  MeasuredAttester attester(std::make_unique<TdxAttester>(o), reviewed);
  auto evidence = attester.Attest(ReportData{});
  ASSERT_TRUE(evidence.ok()) << evidence.status();
  auto quote = ParseQuote(evidence->blob());
  ASSERT_TRUE(quote.ok());
  EXPECT_EQ(Bytes(quote->body.rtmr[3]), reviewed.rtmr3);
  const std::vector<uint8_t> rtmr3(quote->body.rtmr[3].begin(), quote->body.rtmr[3].end());
  EXPECT_TRUE(pins->Check(rtmr3, *evidence).ok());

  // The host edits the configuration; the daemon restarts in a fresh TD.
  td_ = std::make_shared<FakeTdxMeasurements>(kRoot);
  tsm->set_measurements(td_);
  const RuntimeMeasurement edited = MeasurementOf('k');
  RtmrRegisters r2 = Registers();
  ASSERT_TRUE(MeasureIntoRtmr3(r2, edited.EventList(), edited.rtmr3).ok());
  MeasuredAttester edited_attester(std::make_unique<TdxAttester>(o), edited);
  evidence = edited_attester.Attest(ReportData{});
  ASSERT_TRUE(evidence.ok());
  quote = ParseQuote(evidence->blob());
  ASSERT_TRUE(quote.ok());
  EXPECT_EQ(Bytes(quote->body.rtmr[3]), edited.rtmr3);
  const std::vector<uint8_t> edited_rtmr3(quote->body.rtmr[3].begin(),
                                          quote->body.rtmr[3].end());
  absl::Status s = pins->Check(edited_rtmr3, *evidence);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("RTMR3 binary event mismatch"));
  // Claiming the reviewed events does not help: they do not replay to the
  // register the quote reports.
  evidence->clear_rtmr3_events();
  for (const auto& e : reviewed.events) evidence->add_rtmr3_events(e);
  s = pins->Check(edited_rtmr3, *evidence);
  EXPECT_THAT(std::string(s.message()), HasSubstr("RTMR3 mismatch: the evidence's events replay"));
}

}  // namespace
}  // namespace gputravel::tdx
