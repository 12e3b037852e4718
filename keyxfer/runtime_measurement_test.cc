#include "keyxfer/runtime_measurement.h"

#include <link.h>
#include <openssl/sha.h>

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

using ::testing::HasSubstr;

std::string Sha384Of(const std::string& data) {
  unsigned char out[SHA384_DIGEST_LENGTH];
  SHA384(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
  return std::string(reinterpret_cast<char*>(out), sizeof(out));
}

class RuntimeMeasurementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestTmpDir() + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(std::system(("mkdir -p " + dir_).c_str()), 0);
    Put("binary", "daemon code v1");
    Put("tls-ca.pem", "campaign CA");
    Put("device-ca.pem", "device CA");
    Put("root.pem", "attestation root");
    Put("tls.key", "private key 1");
  }
  void Put(const std::string& name, const std::string& contents) {
    ASSERT_TRUE(WriteFile(dir_ + "/" + name, contents, 0600).ok());
  }
  // An orchestrator-like configuration naming every kind of trusted file.
  nlohmann::json Config() {
    return nlohmann::json{
        {"listen", "unix:/run/o.sock"},
        {"domain", "td-orchestrator"},
        {"gpus", {{{"name", "gpu0"},
                   {"device_endpoint", "unix:/dev/gpu0"},
                   {"device_ca", dir_ + "/device-ca.pem"},
                   {"serial", "GPU-1"}}}},
        {"tls", {{"ca", dir_ + "/tls-ca.pem"}, {"cert", dir_ + "/c.pem"},
                 {"key", dir_ + "/tls.key"}}},
        {"attestation",
         {{"backend", "dev"},
          {"allow_insecure_dev_attestation", true},
          {"dev_root_ca", dir_ + "/root.pem"},
          {"peer_rtmr3", {{"binary", std::string(96, 'a')}, {"config", std::string(96, 'b')}}}}}};
  }
  RuntimeMeasurement Measure(const nlohmann::json& config) {
    auto m = MeasureDaemon("orchestrator", dir_ + "/binary", config, "orch.json");
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : RuntimeMeasurement{};
  }
  std::string dir_;
};

TEST_F(RuntimeMeasurementTest, ExtendIsSha384OfRegisterAndDigest) {
  const std::string zero(48, '\0'), d1(48, '\x11'), d2(48, '\x22');
  EXPECT_EQ(ExtendRtmr(zero, d1), Sha384Of(zero + d1));
  EXPECT_EQ(ReplayRtmr({d1, d2}), Sha384Of(Sha384Of(zero + d1) + d2));
  EXPECT_EQ(ReplayRtmr({}), zero);
}

TEST_F(RuntimeMeasurementTest, DeterministicAndIndependentOfFormatting) {
  const RuntimeMeasurement a = Measure(Config());
  const RuntimeMeasurement b = Measure(Config());
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.rtmr3, b.rtmr3);
  EXPECT_EQ(a.rtmr3, ReplayRtmr(a.EventList()));
  for (const auto& e : a.events) EXPECT_EQ(e.size(), kRtmrBytes);
  // The same document written another way (key order, whitespace).
  auto reparsed = nlohmann::json::parse(Config().dump(4));
  EXPECT_EQ(Measure(reparsed).rtmr3, a.rtmr3);
}

TEST_F(RuntimeMeasurementTest, EveryTrustedFieldChangesTheConfigEvent) {
  const RuntimeMeasurement base = Measure(Config());
  const std::vector<std::pair<const char*, nlohmann::json>> edits = {
      {"/gpus/0/device_endpoint", "unix:/host/stand-in"},
      {"/gpus/0/serial", "GPU-2"},
      {"/gpus/0/device_ca", dir_ + "/root.pem"},
      {"/tls/ca", dir_ + "/root.pem"},
      {"/domain", "td-other"},
      {"/attestation/allow_insecure_dev_attestation", false},
      {"/attestation/peer_mrtd", nlohmann::json::array({std::string(96, 'c')})},
  };
  for (const auto& [pointer, value] : edits) {
    nlohmann::json c = Config();
    c[nlohmann::json::json_pointer(pointer)] = value;
    const RuntimeMeasurement m = Measure(c);
    EXPECT_EQ(m.events[kRtmr3BinaryEvent], base.events[kRtmr3BinaryEvent]) << pointer;
    EXPECT_NE(m.events[kRtmr3ConfigEvent], base.events[kRtmr3ConfigEvent]) << pointer;
    EXPECT_NE(m.rtmr3, base.rtmr3) << pointer;
  }
}

TEST_F(RuntimeMeasurementTest, TrustedFileContentsChangeTheConfigEvent) {
  const RuntimeMeasurement base = Measure(Config());
  for (const char* file : {"device-ca.pem", "tls-ca.pem", "root.pem"}) {
    Put(file, std::string("host's own ") + file);
    const RuntimeMeasurement m = Measure(Config());
    EXPECT_NE(m.events[kRtmr3ConfigEvent], base.events[kRtmr3ConfigEvent]) << file;
    EXPECT_NE(m.rtmr3, base.rtmr3) << file;
    SetUp();  // restore the files
  }
  auto doc = CanonicalConfig("orchestrator", Config(), "orch.json");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ((*doc)["trusted_files"].size(), 3u);
  EXPECT_TRUE((*doc)["trusted_files"].contains("/gpus/0/device_ca"));
}

TEST_F(RuntimeMeasurementTest, BinaryChangesOnlyTheBinaryEvent) {
  const RuntimeMeasurement base = Measure(Config());
  Put("binary", "daemon code v2");
  const RuntimeMeasurement m = Measure(Config());
  EXPECT_NE(m.events[kRtmr3BinaryEvent], base.events[kRtmr3BinaryEvent]);
  EXPECT_EQ(m.events[kRtmr3ConfigEvent], base.events[kRtmr3ConfigEvent]);
  EXPECT_NE(m.rtmr3, base.rtmr3);
}

TEST_F(RuntimeMeasurementTest, PeerPinsAreTheirOwnEvent) {
  const RuntimeMeasurement base = Measure(Config());
  nlohmann::json c = Config();
  c["attestation"]["peer_rtmr3"]["config"] = std::string(96, 'd');
  const RuntimeMeasurement m = Measure(c);
  EXPECT_EQ(m.events[kRtmr3ConfigEvent], base.events[kRtmr3ConfigEvent]);
  EXPECT_NE(m.events[kRtmr3PeerPinsEvent], base.events[kRtmr3PeerPinsEvent]);
  EXPECT_NE(m.rtmr3, base.rtmr3);
}

TEST_F(RuntimeMeasurementTest, ListenAndPrivateKeysAreNotMeasured) {
  const RuntimeMeasurement base = Measure(Config());
  nlohmann::json c = Config();
  c["listen"] = "127.0.0.1:4711";
  EXPECT_EQ(Measure(c).rtmr3, base.rtmr3);
  Put("tls.key", "private key 2");
  EXPECT_EQ(Measure(Config()).rtmr3, base.rtmr3);
  auto doc = CanonicalConfig("orchestrator", Config(), "orch.json");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(doc->dump().find("private key"), std::string::npos);
}

TEST_F(RuntimeMeasurementTest, DaemonNameIsMeasured) {
  auto h = MeasureDaemon("holder_agent", dir_ + "/binary", Config(), "x");
  ASSERT_TRUE(h.ok());
  EXPECT_NE(h->events[kRtmr3ConfigEvent], Measure(Config()).events[kRtmr3ConfigEvent]);
}

// Each event on its own is the event MeasureDaemon extends: launchers pin
// configurations they have not started with these.
TEST_F(RuntimeMeasurementTest, SingleEventsEqualTheDaemonsEvents) {
  nlohmann::json c = Config();
  c["attestation"]["peer_rtmr3"] = {{"config", std::string(96, 'b')}};
  auto m = MeasureDaemon("holder_agent", dir_ + "/binary", c, "h.json");
  ASSERT_TRUE(m.ok()) << m.status();
  auto binary = Rtmr3BinaryEvent(dir_ + "/binary");
  auto config = Rtmr3ConfigEvent("holder_agent", c, "h.json");
  auto pins = Rtmr3PeerPinsEvent(c);
  ASSERT_TRUE(binary.ok() && config.ok() && pins.ok());
  EXPECT_EQ(*binary, m->events[kRtmr3BinaryEvent]);
  EXPECT_EQ(*config, m->events[kRtmr3ConfigEvent]);
  EXPECT_EQ(*pins, m->events[kRtmr3PeerPinsEvent]);
  EXPECT_THAT(std::string(Rtmr3BinaryEvent(dir_ + "/no-binary").status().message()),
              HasSubstr("no-binary"));
}

TEST_F(RuntimeMeasurementTest, UnreadableTrustedFileOrBinaryIsNamed) {
  nlohmann::json c = Config();
  c["gpus"][0]["device_ca"] = dir_ + "/missing.pem";
  auto m = MeasureDaemon("orchestrator", dir_ + "/binary", c, "orch.json");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("orch.json: /gpus/0/device_ca: cannot read"));
  m = MeasureDaemon("orchestrator", dir_ + "/no-binary", Config(), "orch.json");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("no-binary"));
  c = Config();
  c["tls"]["ca"] = 7;
  m = MeasureDaemon("orchestrator", dir_ + "/binary", c, "orch.json");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("/tls/ca: must be a file path"));
}

// The bytes a daemon goes on trusting are the bytes it measured: the
// measurement hands them back, so a file the host replaces afterwards is
// never read (the orchestrator's GPU workers use these for the device CA).
TEST_F(RuntimeMeasurementTest, TrustedFilesAreHandedBackAsMeasured) {
  const RuntimeMeasurement m = Measure(Config());
  ASSERT_EQ(m.trusted_files.count("/gpus/0/device_ca"), 1u);
  EXPECT_EQ(m.trusted_files.at("/gpus/0/device_ca"), "device CA");
  EXPECT_EQ(m.trusted_files.at("/tls/ca"), "campaign CA");
  EXPECT_EQ(m.trusted_files.count("/tls/key"), 0u) << "private keys are never read";
  Put("device-ca.pem", "the host's CA");
  EXPECT_EQ(m.trusted_files.at("/gpus/0/device_ca"), "device CA");
  auto doc = CanonicalConfig("orchestrator", Config(), "orch.json");
  ASSERT_TRUE(doc.ok()) << doc.status();
  EXPECT_NE(Measure(Config()).events[kRtmr3ConfigEvent], m.events[kRtmr3ConfigEvent])
      << "the replaced file is another measurement";
}

}  // namespace
}  // namespace gputravel
