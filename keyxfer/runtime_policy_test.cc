#include "keyxfer/runtime_policy.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/x509.h"
#include "util/files.h"
#include "util/hex.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;

std::string Hex(const std::string& b) { return HexEncode(b); }

nlohmann::json PinsFor(const RuntimeMeasurement& m, bool with_peer_pins) {
  nlohmann::json j = {{"binary", Hex(m.events[kRtmr3BinaryEvent])},
                      {"config", Hex(m.events[kRtmr3ConfigEvent])}};
  if (with_peer_pins) j["peer_pins"] = Hex(m.events[kRtmr3PeerPinsEvent]);
  return j;
}

// A daemon with development attestation whose configuration the test edits,
// measured as the daemons measure themselves.
class RuntimePolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestTmpDir() + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("mkdir -p " + dir_).c_str()), 0);
    ASSERT_TRUE(WriteFile(dir_ + "/binary", "orchestrator code", 0600).ok());
    ASSERT_TRUE(WriteFile(dir_ + "/device-ca.pem", "the GPU vendor's CA", 0600).ok());
    root_key_ = std::make_unique<EcKey>(*EcKey::Generate(Curve::kP256));
    root_der_ = *IssueCertificate(*root_key_, "dev root", *root_key_, "", true, 1);
  }
  nlohmann::json Config() {
    return nlohmann::json{{"domain", "td-orchestrator"},
                          {"gpus", {{{"name", "gpu0"},
                                     {"device_endpoint", "unix:/dev/gpu0"},
                                     {"device_ca", dir_ + "/device-ca.pem"}}}}};
  }
  RuntimeMeasurement Measure(const nlohmann::json& config) {
    auto m = MeasureDaemon("orchestrator", dir_ + "/binary", config, "orch.json");
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : RuntimeMeasurement{};
  }
  // The daemon's attester as MakeAttestationFromConfig builds it.
  std::unique_ptr<Attester> AttesterFor(const RuntimeMeasurement& m) {
    auto k = *EcKey::Generate(Curve::kP256);
    auto cert = *IssueCertificate(k, "td-orchestrator", *root_key_, root_der_, false, 1);
    auto dev = *DevAttester::Create("td-orchestrator", std::move(k), cert,
                                    std::string(48, 'M'), m.rtmr3);
    return std::make_unique<MeasuredAttester>(std::move(dev), m);
  }
  // A peer's verifier pinned to `pins`.
  std::unique_ptr<Verifier> VerifierPinnedTo(const nlohmann::json& pins) {
    auto p = Rtmr3Policy::FromJson(pins, "holder.json: attestation.peer_rtmr3");
    EXPECT_TRUE(p.ok()) << p.status();
    return std::make_unique<MeasuredVerifier>(std::make_unique<DevVerifier>(root_der_, DevPolicy{}),
                                              p.ok() ? *p : Rtmr3Policy{});
  }
  std::string dir_;
  std::unique_ptr<EcKey> root_key_;
  std::string root_der_;
  const ReportData report_data_{};
};

TEST_F(RuntimePolicyTest, EvidenceCarriesTheMeasurementAndVerifies) {
  const RuntimeMeasurement m = Measure(Config());
  auto evidence = AttesterFor(m)->Attest(report_data_);
  ASSERT_TRUE(evidence.ok()) << evidence.status();
  ASSERT_EQ(evidence->rtmr3_events_size(), 3);
  auto id = VerifierPinnedTo(PinsFor(m, true))->Verify(*evidence, report_data_);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(std::string(id->rtmr[3].begin(), id->rtmr[3].end()), m.rtmr3);
}

TEST_F(RuntimePolicyTest, ChangedConfigurationIsRefusedByAPolicyPinnedToTheOld) {
  const RuntimeMeasurement old_m = Measure(Config());
  auto verifier = VerifierPinnedTo(PinsFor(old_m, true));
  // The host points the orchestrator at its own stand-in for the GPU.
  nlohmann::json edited = Config();
  edited["gpus"][0]["device_endpoint"] = "unix:/host/stand-in";
  const RuntimeMeasurement new_m = Measure(edited);
  ASSERT_NE(new_m.rtmr3, old_m.rtmr3);
  auto evidence = AttesterFor(new_m)->Attest(report_data_);
  ASSERT_TRUE(evidence.ok());
  auto id = verifier->Verify(*evidence, report_data_);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("RTMR3 config event mismatch"));
  EXPECT_THAT(std::string(id.status().message()), HasSubstr(Hex(old_m.events[1])));
  // And the host's own device CA in place of the vendor's, same path.
  ASSERT_TRUE(WriteFile(dir_ + "/device-ca.pem", "the host's CA", 0600).ok());
  evidence = AttesterFor(Measure(Config()))->Attest(report_data_);
  ASSERT_TRUE(evidence.ok());
  EXPECT_THAT(std::string(verifier->Verify(*evidence, report_data_).status().message()),
              HasSubstr("RTMR3 config event mismatch"));
}

TEST_F(RuntimePolicyTest, OtherBinaryIsRefused) {
  const RuntimeMeasurement old_m = Measure(Config());
  ASSERT_TRUE(WriteFile(dir_ + "/binary", "patched code", 0600).ok());
  auto evidence = AttesterFor(Measure(Config()))->Attest(report_data_);
  ASSERT_TRUE(evidence.ok());
  auto id = VerifierPinnedTo(PinsFor(old_m, false))->Verify(*evidence, report_data_);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("RTMR3 binary event mismatch"));
}

TEST_F(RuntimePolicyTest, PeerPinsAreCheckedOnlyWhenPinned) {
  nlohmann::json c = Config();
  c["attestation"]["peer_rtmr3"] = {{"binary", std::string(96, 'a')},
                                    {"config", std::string(96, 'b')}};
  const RuntimeMeasurement m = Measure(c);
  c["attestation"]["peer_rtmr3"]["config"] = std::string(96, 'e');
  const RuntimeMeasurement other_pins = Measure(c);
  auto evidence = AttesterFor(other_pins)->Attest(report_data_);
  ASSERT_TRUE(evidence.ok());
  EXPECT_TRUE(VerifierPinnedTo(PinsFor(m, false))->Verify(*evidence, report_data_).ok());
  EXPECT_THAT(std::string(
                  VerifierPinnedTo(PinsFor(m, true))->Verify(*evidence, report_data_).status().message()),
              HasSubstr("RTMR3 peer_pins event mismatch"));
}

TEST_F(RuntimePolicyTest, EventsThatDoNotReplayToTheRegisterAreRefused) {
  const RuntimeMeasurement good = Measure(Config());
  nlohmann::json edited = Config();
  edited["gpus"][0]["device_endpoint"] = "unix:/host/stand-in";
  const RuntimeMeasurement bad = Measure(edited);
  // The edited daemon's register, with the good daemon's events claimed.
  auto evidence = AttesterFor(bad)->Attest(report_data_);
  ASSERT_TRUE(evidence.ok());
  evidence->clear_rtmr3_events();
  for (const auto& e : good.events) evidence->add_rtmr3_events(e);
  auto id = VerifierPinnedTo(PinsFor(good, true))->Verify(*evidence, report_data_);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("RTMR3 mismatch: the evidence's events replay"));
  // No events at all, or too few.
  evidence->clear_rtmr3_events();
  EXPECT_THAT(std::string(VerifierPinnedTo(PinsFor(good, true))
                              ->Verify(*evidence, report_data_)
                              .status()
                              .message()),
              HasSubstr("the evidence carries 0, expected 3"));
}

TEST_F(RuntimePolicyTest, PolicyMustPinBinaryAndConfig) {
  const std::string h(96, 'a');
  EXPECT_TRUE(Rtmr3Policy::FromJson({{"binary", h}, {"config", {h, std::string(96, 'b')}}}, "p").ok());
  auto p = Rtmr3Policy::FromJson({{"binary", h}}, "h.json: attestation.peer_rtmr3");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("h.json: attestation.peer_rtmr3: must pin \"binary\" and \"config\""));
  p = Rtmr3Policy::FromJson({{"binary", h}, {"config", h}, {"bianry", h}}, "w");
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("w: unknown field 'bianry' (did you mean 'binary'? accepted: binary, config, peer_pins)"));
  p = Rtmr3Policy::FromJson({{"binary", h}, {"config", {h, "xyz"}}}, "w");
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("w.config[1]: must be 96 hex digits"));
  p = Rtmr3Policy::FromJson({{"binary", h}, {"config", nlohmann::json::array()}}, "w");
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("w.config: an empty list"));
  EXPECT_FALSE(Rtmr3Policy::FromJson("text", "w").ok());
}

// RED TEAM (P6, the holder's pins): a host edits a holder's
// attestation.peer_rtmr3 on its disk to a list [real orchestrator, host-run
// orchestrator whose device_ca/device_endpoint are the host's], so that the
// holder would also provision to the host's stand-in GPU. The holder's pins
// of the orchestrator's binary and config are part of its config event,
// which the real orchestrator pins: the edited holder is refused.
TEST_F(RuntimePolicyTest, HolderWhosePeerRtmr3TheHostEditedIsRefusedByTheRealOrchestrator) {
  const std::string real_binary(96, 'a'), real_config(96, 'b'), real_pins(96, 'c');
  const std::string host_run_config(96, 'e');  // the host's device_ca and endpoint
  nlohmann::json holder = {{"name", "h1"}, {"domain", "td-h1"},
                           {"attestation",
                            {{"backend", "tdx"},
                             {"peer_rtmr3", {{"binary", real_binary},
                                             {"config", real_config},
                                             {"peer_pins", real_pins}}}}}};
  auto reviewed = MeasureDaemon("holder_agent", dir_ + "/binary", holder, "holder.json");
  ASSERT_TRUE(reviewed.ok()) << reviewed.status();
  // The real orchestrator pins the holder's binary and config events, as
  // docs/tdx-attestation.md "Pinning, step by step" says.
  auto real_orchestrator = VerifierPinnedTo(PinsFor(*reviewed, false));

  // The host adds its own orchestrator to the holder's pins.
  holder["attestation"]["peer_rtmr3"]["config"] = {real_config, host_run_config};
  auto edited = MeasureDaemon("holder_agent", dir_ + "/binary", holder, "holder.json");
  ASSERT_TRUE(edited.ok()) << edited.status();
  ASSERT_NE(edited->rtmr3, reviewed->rtmr3);
  auto evidence = AttesterFor(*edited)->Attest(report_data_);
  ASSERT_TRUE(evidence.ok()) << evidence.status();
  auto id = real_orchestrator->Verify(*evidence, report_data_);
  EXPECT_FALSE(id.ok())
      << "the real orchestrator accepts (and hands the copy-engine key to) a holder that "
         "also accepts a host-run orchestrator with the host's device CA";
}

}  // namespace
}  // namespace gputravel
