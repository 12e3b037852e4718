#include <sys/stat.h>

#include <cerrno>

#include "keyxfer/attestation_config.h"
#include "keyxfer/example_sections.h"

#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/runtime_policy.h"
#include "keyxfer/tdx/fake_rtmr_fs.h"
#include "keyxfer/tdx/intel_root_ca.h"
#include "keyxfer/tdx/rtmr.h"
#include "keyxfer/x509.h"
#include "util/files.h"
#include "util/hex.h"

namespace gputravel {
namespace {

using tdx::testing::FakeTdxMeasurements;

// A measurement as a daemon would compute it (the values do not matter here).
RuntimeMeasurement TestMeasurement(char seed = 'm') {
  RuntimeMeasurement m;
  for (int i = 0; i < kRtmr3EventCount; ++i) m.events[i] = std::string(48, seed + i);
  m.rtmr3 = ReplayRtmr(m.EventList());
  return m;
}

const std::string kMeasurementsRoot = "/sys/class/misc/tdx_guest/measurements";

// The TDX guest driver's measurement registers of a fresh TD.
std::shared_ptr<FakeTdxMeasurements> FreshTd() {
  return std::make_shared<FakeTdxMeasurements>(kMeasurementsRoot);
}

// The trusted files of the attestation `section`, as MeasureDaemon hands them
// back (read now; a file that cannot be read is left out, as a measurement
// would have failed on it).
RuntimeMeasurement WithTrustedFiles(RuntimeMeasurement m, const nlohmann::json& section) {
  const std::pair<const char*, const char*> files[] = {
      {"/tdx/root_ca", "/attestation/tdx/root_ca"},
      {"/dev_root_ca", "/attestation/dev_root_ca"}};
  for (const auto& [in_section, in_config] : files) {
    const nlohmann::json::json_pointer p(in_section);
    if (!section.contains(p) || !section.at(p).is_string()) continue;
    auto bytes = ReadFile(section.at(p).get<std::string>());
    if (bytes.ok()) m.trusted_files[in_config] = *bytes;
  }
  return m;
}

// MakeAttestationFromConfig for a daemon measured as TestMeasurement() in a
// fresh TD.
absl::StatusOr<AttestationSetup> Make(const nlohmann::json& section, const std::string& where,
                                      const std::string& domain) {
  return MakeAttestationFromConfig(section, where, domain,
                                   WithTrustedFiles(TestMeasurement(), section), FreshTd());
}

nlohmann::json Section(const std::string& example) {
  auto j = ReadJsonFile("deploy/examples/" + example);
  EXPECT_TRUE(j.ok()) << j.status();
  return (*j)["attestation"];
}

nlohmann::json TdxSectionWithPolicy(const nlohmann::json& peer_policy) {
  nlohmann::json s = nlohmann::json::parse(R"({"backend": "tdx", "tdx": {}})");
  s["tdx"]["peer_policy"] = peer_policy;
  s["peer_rtmr3"] = {{"binary", std::string(96, 'a')}, {"config", std::string(96, 'a')}};
  return s;
}

TEST(AttestationConfigTest, ExampleTdxConfigsBuildTdxBackend) {
  // The examples carry placeholders where a deployment puts real values: the
  // placeholders must be refused, proving the policy is really parsed.
  auto orch = Make(Section("orchestrator-tdx.json"), "o", "orchestrator");
  EXPECT_FALSE(orch.ok());
  EXPECT_NE(orch.status().message().find("mrtd"), std::string::npos) << orch.status();
  // With the placeholders filled in, both examples pin everything TdxVerifier
  // requires (mrtd, rtmr0..2, min_tee_tcb_svn).
  auto filled_orch = Make(
      WithPlaceholdersFilled(Section("orchestrator-tdx.json")), "o", "orchestrator");
  ASSERT_TRUE(filled_orch.ok()) << filled_orch.status();
  auto holder = Make(WithPlaceholdersFilled(Section("holder-tdx.json")),
                                          "h", "td-hospital-a");
  ASSERT_TRUE(holder.ok()) << holder.status();
  EXPECT_EQ(holder->backend, "tdx");
  EXPECT_NE(holder->attester, nullptr);
  EXPECT_NE(holder->verifier, nullptr);
}

TEST(AttestationConfigTest, TdxPeerPolicyMustPinMeasurementsAndTcb) {
  // A policy that parses but pins nothing (or only the firmware image) would
  // hand keys to any TD on that firmware: refused at start-up.
  auto empty = Make(TdxSectionWithPolicy(nlohmann::json::object()),
                                         "h.json: attestation", "d");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find(
                "missing: mrtd, rtmr0, rtmr1, rtmr2, min_tee_tcb_svn ("),
            std::string::npos)
      << empty.status();
  nlohmann::json mrtd_only = {{"mrtd", std::string(96, 'a')}};
  auto only = Make(TdxSectionWithPolicy(mrtd_only),
                                        "h.json: attestation", "d");
  EXPECT_EQ(only.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(only.status().message().find("missing: rtmr0, rtmr1, rtmr2, min_tee_tcb_svn ("),
            std::string::npos)
      << only.status();
}

TEST(AttestationConfigTest, TdxCollateralIsLoadedAndTcbPolicyNeedsIt) {
  nlohmann::json s = WithPlaceholdersFilled(Section("holder-tdx.json"));
  s["tdx"]["peer_policy"]["allowed_tcb_statuses"] = {"UpToDate", "SWHardeningNeeded"};
  auto without = Make(s, "h.json: attestation", "d");
  EXPECT_EQ(without.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(without.status().message().find("need Intel's collateral"), std::string::npos)
      << without.status();

  const std::string dir = ::testing::TempDir() + "/collateral";
  ASSERT_EQ(mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST, true);
  auto bundle = ReadFile("keyxfer/tdx/testdata/dcap/tdx_quote_collateral.json");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  ASSERT_TRUE(WriteFile(dir + "/b0c06f000000.json", *bundle).ok());
  s["tdx"]["collateral"] = dir;
  auto with = Make(s, "h.json: attestation", "d");
  EXPECT_TRUE(with.ok()) << with.status();

  s["tdx"]["collateral"] = dir + "/missing";
  auto missing = Make(s, "h.json: attestation", "d");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("h.json: attestation: tdx.collateral: TDX "
                                            "collateral " + dir + "/missing: does not exist"),
            std::string::npos)
      << missing.status();
}

TEST(AttestationConfigTest, TdxNeedsPeerPolicy) {
  auto st = Make(nlohmann::json::parse(R"({"backend": "tdx", "tdx": {}})"),
                                      "h.json: attestation", "d");
  EXPECT_NE(st.status().message().find("peer_policy"), std::string::npos);
}

TEST(AttestationConfigTest, DevRefusedUnlessExplicitlyEnabled) {
  for (const char* text : {R"({"backend": "dev"})",
                           R"({"backend": "dev", "allow_insecure_dev_attestation": false})",
                           R"({"backend": "dev", "allow_insecure_dev_attestation": "true"})",
                           R"({"backend": "dev", "allow_insecure_dev_attestation": 1})"}) {
    auto st = Make(nlohmann::json::parse(text), "x", "d");
    EXPECT_EQ(st.status().code(), absl::StatusCode::kPermissionDenied) << text;
    EXPECT_NE(st.status().message().find("insecure"), std::string::npos);
  }
}

// The filled-in holder example with tdx.root_ca naming a file holding `pem`.
nlohmann::json TdxSectionWithRootCa(const std::string& file, const std::string& pem) {
  const std::string path = ::testing::TempDir() + "/" + file;
  EXPECT_TRUE(WriteFile(path, pem).ok()) << path;
  nlohmann::json s = WithPlaceholdersFilled(Section("holder-tdx.json"));
  s["tdx"]["root_ca"] = path;
  return s;
}

TEST(AttestationConfigTest, UnknownFieldsAreRefusedAndNamed) {
  // A misspelt optional field would otherwise be a default silently taken:
  // here the root CA the operator meant to pin.
  nlohmann::json tdx = WithPlaceholdersFilled(Section("holder-tdx.json"));
  tdx["tdx"]["root_cert"] = "/etc/gputravel/root.pem";
  auto st = Make(tdx, "h.json: attestation", "d");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find(
                "h.json: attestation: tdx: unknown field 'root_cert' (accepted: "
                "collateral, configfs_root, measurements_root, peer_policy, root_ca)"),
            std::string::npos)
      << st.status();
  // At the top level, per backend: the development fields are not the TDX
  // backend's.
  tdx = WithPlaceholdersFilled(Section("holder-tdx.json"));
  tdx["peer_mrtd"] = nlohmann::json::array();
  st = Make(tdx, "h.json: attestation", "d");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(st.status().message().find(
                "h.json: attestation.peer_mrtd: a development field (backend \"dev\" only)"),
            std::string::npos)
      << st.status();
  tdx = WithPlaceholdersFilled(Section("holder-tdx.json"));
  tdx["peer_mrtds"] = nlohmann::json::array();
  st = Make(tdx, "h.json: attestation", "d");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("unknown field 'peer_mrtds' (accepted: backend, peer_rtmr3, tdx)"),
            std::string::npos)
      << st.status();
  auto dev = Make(
      nlohmann::json::parse(R"({"backend": "dev", "allow_insecure_dev_attestation": true,
                                "dev_keys": "/k.pem"})"),
      "h.json: attestation", "d");
  EXPECT_EQ(dev.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dev.status().message().find(
                "unknown field 'dev_keys' (did you mean 'dev_key'? accepted: allow_debug, "
                "allow_insecure_dev_attestation, backend, dev_cert, dev_key, dev_peer_binaries, "
                "dev_root_ca, peer_mrtd, peer_rtmr3)"),
            std::string::npos)
      << dev.status();
}

TEST(AttestationConfigTest, EmptyRootCaIsRefusedNotReplacedByIntels) {
  for (const char* text : {"", "\n  \n"}) {
    nlohmann::json s = TdxSectionWithRootCa("empty-root.pem", text);
    const std::string path = s["tdx"]["root_ca"].get<std::string>();
    auto st = Make(s, "h.json: attestation", "d");
    EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(st.status().message().find("h.json: attestation: tdx.root_ca (" + path +
                                         "): the file is empty"),
              std::string::npos)
        << st.status();
  }
}

TEST(AttestationConfigTest, UnparsableRootCaNamesTheFieldAndTheFile) {
  nlohmann::json s = TdxSectionWithRootCa("bad-root.pem", "not a certificate\n");
  const std::string path = s["tdx"]["root_ca"].get<std::string>();
  auto st = Make(s, "h.json: attestation", "d");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("h.json: attestation: tdx.root_ca (" + path + "): "),
            std::string::npos)
      << st.status();
  EXPECT_EQ(st.status().message().find("peer_policy"), std::string::npos) << st.status();
  // A missing file, too.
  s["tdx"]["root_ca"] = ::testing::TempDir() + "/no-such-root.pem";
  st = Make(s, "h.json: attestation", "d");
  EXPECT_NE(st.status().message().find("tdx.root_ca (" + ::testing::TempDir() +
                                       "/no-such-root.pem): "),
            std::string::npos)
      << st.status();
  // A root that parses is taken.
  auto good = Make(
      TdxSectionWithRootCa("good-root.pem", tdx::kIntelSgxRootCaPem), "h.json: attestation",
      "d");
  EXPECT_TRUE(good.ok()) << good.status();
}

TEST(AttestationConfigTest, TdxNeedsPeerRtmr3PinningBinaryAndConfig) {
  nlohmann::json s = WithPlaceholdersFilled(Section("holder-tdx.json"));
  s.erase("peer_rtmr3");
  auto st = Make(s, "h.json: attestation", "d");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("h.json: attestation: 'peer_rtmr3' is required"),
            std::string::npos)
      << st.status();
  s["peer_rtmr3"] = {{"binary", std::string(96, 'a')}};
  st = Make(s, "h.json: attestation", "d");
  EXPECT_NE(st.status().message().find(
                "h.json: attestation.peer_rtmr3: must pin \"binary\" and \"config\""),
            std::string::npos)
      << st.status();
}

// The TDX backend extends RTMR3 with the daemon's events before it returns,
// so a daemon that serves has measured what it trusts.
TEST(AttestationConfigTest, TdxExtendsRtmr3BeforeReturning) {
  auto td = FreshTd();
  const RuntimeMeasurement m = TestMeasurement();
  auto st = MakeAttestationFromConfig(WithPlaceholdersFilled(Section("holder-tdx.json")), "h",
                                      "d", m, td);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(td->rtmr(3), m.rtmr3);
  EXPECT_EQ(td->extends(), 3);
  // A restart with the same binary and configuration finds it measured.
  st = MakeAttestationFromConfig(WithPlaceholdersFilled(Section("holder-tdx.json")), "h", "d",
                                 m, td);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(td->extends(), 3);
}

// If RTMR3 cannot be extended (no kernel interface, a refused write) or holds
// another measurement, the daemon refuses to start and says why.
TEST(AttestationConfigTest, TdxRefusesToStartWhenRtmr3CannotBeExtended) {
  const nlohmann::json s = WithPlaceholdersFilled(Section("holder-tdx.json"));
  auto old_kernel = FreshTd();
  old_kernel->set_missing(true);
  auto st = MakeAttestationFromConfig(s, "h.json: attestation", "d", TestMeasurement(),
                                      old_kernel);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.status().message().find(
                "h.json: attestation: cannot measure this daemon into RTMR3, refusing to "
                "start: reading " + kMeasurementsRoot + "/rtmr3:sha384"),
            std::string::npos)
      << st.status();
  auto refusing = FreshTd();
  refusing->set_write_errno(EACCES);
  st = MakeAttestationFromConfig(s, "h.json: attestation", "d", TestMeasurement(), refusing);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(st.status().message().find("refusing to start: extending"), std::string::npos)
      << st.status();
  // The same TD after it ran another configuration.
  auto used = FreshTd();
  ASSERT_TRUE(MakeAttestationFromConfig(s, "h", "d", TestMeasurement('x'), used).ok());
  st = MakeAttestationFromConfig(s, "h.json: attestation", "d", TestMeasurement(), used);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.status().message().find("restart the TD"), std::string::npos) << st.status();
  // measurements_root is where the daemon looks.
  nlohmann::json elsewhere = s;
  elsewhere["tdx"]["measurements_root"] = "/elsewhere";
  st = MakeAttestationFromConfig(elsewhere, "h", "d", TestMeasurement(), FreshTd());
  EXPECT_NE(st.status().message().find("/elsewhere/rtmr3:sha384"), std::string::npos)
      << st.status();
}

// Development key material in `dir`: an attestation key, its certificate and
// the root, and the dev section naming them.
nlohmann::json DevSection(const std::string& dir) {
  auto root_key = *EcKey::Generate(Curve::kP256);
  auto root_der = *IssueCertificate(root_key, "dev root", root_key, "", true, 1);
  auto key = *EcKey::Generate(Curve::kP256);
  auto cert = *IssueCertificate(key, "d", root_key, root_der, false, 1);
  auto key_pem = key.PrivateKeyPem();
  EXPECT_TRUE(key_pem.ok());
  EXPECT_TRUE(WriteFile(dir + "/dev.key",
                        std::string(reinterpret_cast<const char*>(key_pem->data()),
                                    key_pem->size()),
                        0600)
                  .ok());
  EXPECT_TRUE(WriteFile(dir + "/dev.pem", *CertificateDerToPem(cert)).ok());
  EXPECT_TRUE(WriteFile(dir + "/root.pem", *CertificateDerToPem(root_der)).ok());
  return {{"backend", "dev"},          {"allow_insecure_dev_attestation", true},
          {"dev_key", dir + "/dev.key"}, {"dev_cert", dir + "/dev.pem"},
          {"dev_root_ca", dir + "/root.pem"}};
}

// A copy of this test's own binary at `path`: the peer's binary.
void CopySelf(const std::string& path) {
  auto self = ReadFile("/proc/self/exe");
  ASSERT_TRUE(self.ok()) << self.status();
  ASSERT_TRUE(WriteFile(path, *self, 0700).ok());
}

// The development attester reports the measurement as RTMR3 and attaches its
// events; peer_rtmr3, when given, is enforced on the peer's evidence.
TEST(AttestationConfigTest, DevEvidenceCarriesTheMeasurementAndPeerRtmr3IsEnforced) {
  nlohmann::json s = DevSection(::testing::TempDir());
  const RuntimeMeasurement mine = WithTrustedFiles(TestMeasurement('a'), s);
  auto me = MakeAttestationFromConfig(s, "x", "d", mine);
  ASSERT_TRUE(me.ok()) << me.status();
  auto evidence = me->attester->Attest(ReportData{});
  ASSERT_TRUE(evidence.ok());
  ASSERT_EQ(evidence->rtmr3_events_size(), 3);
  auto id = me->verifier->Verify(*evidence, ReportData{});  // no peer_rtmr3: unchecked
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(std::string(id->rtmr[3].begin(), id->rtmr[3].end()), mine.rtmr3);

  s["peer_rtmr3"] = {{"binary", HexEncode(mine.events[0])},
                     {"config", HexEncode(mine.events[1])}};
  auto peer = MakeAttestationFromConfig(s, "x", "d", WithTrustedFiles(TestMeasurement('z'), s));
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_TRUE(peer->verifier->Verify(*evidence, ReportData{}).ok());
  s["peer_rtmr3"]["config"] = HexEncode(std::string(48, 'q'));
  peer = MakeAttestationFromConfig(s, "x", "d", WithTrustedFiles(TestMeasurement('z'), s));
  ASSERT_TRUE(peer.ok()) << peer.status();
  auto refused = peer->verifier->Verify(*evidence, ReportData{});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("RTMR3 config event mismatch"), std::string::npos)
      << refused.status();
}

// dev_peer_binaries: the peer's MRTD and RTMR3 binary event are measured
// from the named file when the verifier is made, so a rebuilt peer (a new
// file at the same path) is pinned by a restart, with no edited pin; a
// peer running another binary is refused.
TEST(AttestationConfigTest, DevPeerBinariesPinTheNamedBinaryAsItIsAtStart) {
  const std::string dir = ::testing::TempDir() + "/peer-binaries";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST, true);
  nlohmann::json s = DevSection(dir);
  // The peer: this very binary, measured as a daemon measures itself.
  RuntimeMeasurement peer_m = TestMeasurement('p');
  auto binary_event = Rtmr3BinaryEvent("/proc/self/exe");
  ASSERT_TRUE(binary_event.ok());
  peer_m.events[kRtmr3BinaryEvent] = *binary_event;
  peer_m.rtmr3 = ReplayRtmr(peer_m.EventList());
  auto peer = MakeAttestationFromConfig(s, "p", "d", WithTrustedFiles(peer_m, s));
  ASSERT_TRUE(peer.ok()) << peer.status();
  auto evidence = peer->attester->Attest(ReportData{});
  ASSERT_TRUE(evidence.ok()) << evidence.status();

  CopySelf(dir + "/peer-binary");
  s["dev_peer_binaries"] = {dir + "/peer-binary"};
  s["peer_rtmr3"] = {{"config", HexEncode(peer_m.events[kRtmr3ConfigEvent])}};
  auto me = MakeAttestationFromConfig(s, "h.json: attestation", "d",
                                      WithTrustedFiles(TestMeasurement('z'), s));
  ASSERT_TRUE(me.ok()) << me.status();
  EXPECT_TRUE(me->verifier->Verify(*evidence, ReportData{}).ok());

  // Another binary at that path ("a rebuild" the peer does not run): its
  // MRTD is not the peer's.
  ASSERT_TRUE(WriteFile(dir + "/peer-binary", "another build", 0700).ok());
  me = MakeAttestationFromConfig(s, "h.json: attestation", "d",
                                 WithTrustedFiles(TestMeasurement('z'), s));
  ASSERT_TRUE(me.ok()) << me.status();
  auto refused = me->verifier->Verify(*evidence, ReportData{});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("MRTD mismatch"), std::string::npos)
      << refused.status();
  // The peer's MRTD allowed by hex as well: its RTMR3 binary event is still
  // pinned to the file's, and refused.
  s.erase("dev_peer_binaries");
  auto mrtd = Sha384File("/proc/self/exe");  // the development MRTD
  ASSERT_TRUE(mrtd.ok());
  s["peer_mrtd"] = nlohmann::json::array({HexEncode(*mrtd)});
  s["dev_peer_binaries"] = {dir + "/peer-binary"};
  s["peer_rtmr3"]["binary"] = HexEncode(std::string(48, 'q'));
  me = MakeAttestationFromConfig(s, "h.json: attestation", "d",
                                 WithTrustedFiles(TestMeasurement('z'), s));
  ASSERT_TRUE(me.ok()) << me.status();
  refused = me->verifier->Verify(*evidence, ReportData{});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("RTMR3 binary event mismatch"), std::string::npos)
      << refused.status();
}

TEST(AttestationConfigTest, DevPeerBinariesMustNameReadableAbsolutePaths) {
  const std::string dir = ::testing::TempDir() + "/peer-binaries-bad";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST, true);
  nlohmann::json s = DevSection(dir);
  const std::pair<nlohmann::json, std::string> cases[] = {
      {nlohmann::json::array(), "h.json: attestation.dev_peer_binaries: must be a non-empty array"},
      {"/bin/sh", "h.json: attestation.dev_peer_binaries: must be a non-empty array"},
      {{"orchestrator"}, "h.json: attestation.dev_peer_binaries[0]: must be an absolute path"},
      {{dir + "/missing"}, "h.json: attestation.dev_peer_binaries[0]: cannot read " + dir +
                               "/missing"}};
  for (const auto& [value, message] : cases) {
    s["dev_peer_binaries"] = value;
    auto st = Make(s, "h.json: attestation", "d");
    EXPECT_FALSE(st.ok()) << value;
    EXPECT_NE(st.status().message().find(message), std::string::npos) << st.status();
  }
  // Without the explicit development switch the field is never read.
  s["dev_peer_binaries"] = {"/proc/self/exe"};
  s.erase("allow_insecure_dev_attestation");
  EXPECT_EQ(Make(s, "h", "d").status().code(), absl::StatusCode::kPermissionDenied);
}

// Production never trusts whatever a path holds: the TDX backend refuses the
// field by name.
TEST(AttestationConfigTest, TdxRefusesDevPeerBinaries) {
  nlohmann::json tdx = WithPlaceholdersFilled(Section("holder-tdx.json"));
  tdx["dev_peer_binaries"] = {"/proc/self/exe"};
  auto st = Make(tdx, "h.json: attestation", "d");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(st.status().message().find("h.json: attestation.dev_peer_binaries: a development "
                                       "field (backend \"dev\" only)"),
            std::string::npos)
      << st.status();
  EXPECT_FALSE(CheckAttestationConfig(tdx, "h.json: attestation", "d",
                                      WithTrustedFiles(TestMeasurement(), tdx))
                   .ok());
}

// The offline check accepts what a daemon would, and refuses what it would,
// without touching the TD: no RTMR3 interface is needed.
TEST(AttestationConfigTest, CheckIsOfflineAndRefusesWhatStartRefuses) {
  nlohmann::json tdx = WithPlaceholdersFilled(Section("holder-tdx.json"));
  auto backend = CheckAttestationConfig(tdx, "h", "d", WithTrustedFiles(TestMeasurement(), tdx));
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ(*backend, "tdx");
  auto placeholders = CheckAttestationConfig(Section("holder-tdx.json"), "h", "d",
                                             TestMeasurement());
  EXPECT_FALSE(placeholders.ok());
  EXPECT_NE(placeholders.status().message().find("mrtd"), std::string::npos)
      << placeholders.status();
  const std::string dir = ::testing::TempDir() + "/check-dev";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST, true);
  nlohmann::json dev = DevSection(dir);
  backend = CheckAttestationConfig(dev, "h", "d", WithTrustedFiles(TestMeasurement(), dev));
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ(*backend, "dev");
}

TEST(AttestationConfigTest, RefusesAMissingMeasurement) {
  auto st = MakeAttestationFromConfig(WithPlaceholdersFilled(Section("holder-tdx.json")), "h",
                                      "d", RuntimeMeasurement{}, FreshTd());
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.status().message().find("no runtime measurement"), std::string::npos);
}

TEST(AttestationConfigTest, MissingOrUnknownBackendRefused) {
  EXPECT_FALSE(Make(nlohmann::json::object(), "x", "d").ok());
  auto st = Make(nlohmann::json::parse(R"({"backend": "sev"})"), "x", "d");
  EXPECT_NE(st.status().message().find("unknown attestation backend 'sev'"), std::string::npos);
}

// RED TEAM (P6, TOCTOU on the quote root): a host that serves Intel's root
// to the measurement's read of tdx.root_ca and its own CA to a later read (a
// host-served file system: virtiofs, 9p, or evicted pages) would get a
// daemon whose RTMR3 says "Intel root" while it verifies peers' quotes
// against the host's CA. The backend takes the root from the bytes the
// measurement read, never from the file again.
constexpr char kImpostorRootPem[] = R"PEM(-----BEGIN CERTIFICATE-----
MIICOjCCAeCgAwIBAgIURFFcm6p6bNVg1fAfXWkFjb3SQYkwCgYIKoZIzj0EAwIw
aDEaMBgGA1UEAwwRSW50ZWwgU0dYIFJvb3QgQ0ExGjAYBgNVBAoMEUludGVsIENv
cnBvcmF0aW9uMRQwEgYDVQQHDAtTYW50YSBDbGFyYTELMAkGA1UECAwCQ0ExCzAJ
BgNVBAYTAlVTMCAXDTI2MTEyMTA1NDAwNFoYDzIxMjYxMDI4MDU0MDA0WjBoMRow
GAYDVQQDDBFJbnRlbCBTR1ggUm9vdCBDQTEaMBgGA1UECgwRSW50ZWwgQ29ycG9y
YXRpb24xFDASBgNVBAcMC1NhbnRhIENsYXJhMQswCQYDVQQIDAJDQTELMAkGA1UE
BhMCVVMwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATEraFKM5bR81Jacgc0FqdC
YOjlj2m1yyLfFix1fh97FvgkI7rtxFTcsg8oBSof7sZDtQclXM1WUUir1wFFyq1i
o2YwZDAdBgNVHQ4EFgQUd0Fs5qiMGleMmuMnwYwEQg3wBr4wHwYDVR0jBBgwFoAU
d0Fs5qiMGleMmuMnwYwEQg3wBr4wEgYDVR0TAQH/BAgwBgEB/wIBATAOBgNVHQ8B
Af8EBAMCAQYwCgYIKoZIzj0EAwIDSAAwRQIhAINvlfa3BuetdVkO8KMkKJ5HDhAe
W5NnKHTHQCwrqfX0AiBbdnYnTYSxq7KXisfMonCIpe8gW+tKSU2MsyW2hGSP8Q==
-----END CERTIFICATE-----
)PEM";

TEST(AttestationConfigTest, RootCaSwappedAfterMeasurementIsNotTrusted) {
  nlohmann::json section =
      TdxSectionWithRootCa("swapped-root.pem", tdx::kIntelSgxRootCaPem);
  const std::string root_path = section["tdx"]["root_ca"].get<std::string>();
  const nlohmann::json config = {{"domain", "d"}, {"attestation", section}};
  // The daemon measures itself with Intel's root in the file ...
  auto m = MeasureDaemon("holder_agent", root_path, config, "h.json");
  ASSERT_TRUE(m.ok()) << m.status();
  auto measured_with_intel = CanonicalConfig("holder_agent", config, "h.json");
  ASSERT_TRUE(measured_with_intel.ok());
  // ... then the host swaps the file before the backend reads it.
  ASSERT_TRUE(WriteFile(root_path, kImpostorRootPem).ok());
  auto now = CanonicalConfig("holder_agent", config, "h.json");
  ASSERT_TRUE(now.ok());
  ASSERT_NE(now->dump(), measured_with_intel->dump()) << "the swap changes what is trusted";
  // The backend takes the root from the measurement's bytes (Intel's), never
  // from the file again: with the file swapped, or gone, it sets up the
  // same, so nothing the host puts there afterwards is trusted.
  auto st = MakeAttestationFromConfig(section, "h.json: attestation", "d", *m, FreshTd());
  EXPECT_TRUE(st.ok()) << st.status();
  ASSERT_EQ(::unlink(root_path.c_str()), 0);
  st = MakeAttestationFromConfig(section, "h.json: attestation", "d", *m, FreshTd());
  EXPECT_TRUE(st.ok()) << "the root file was read again: " << st.status();
  // A measurement that does not cover the root is refused, not filled in
  // from the disk.
  RuntimeMeasurement without = *m;
  without.trusted_files.clear();
  st = MakeAttestationFromConfig(section, "h.json: attestation", "d", without, FreshTd());
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition) << st.status();
}

// The binary event covers the executable file; environment that would have
// the loader or OpenSSL run other code (or inject failures) is refused by a
// TDX daemon, naming the variable. (Shared libraries and openssl.cnf on the
// disk are the residual: docs/tdx-attestation.md, "What it does not cover".)
TEST(AttestationConfigTest, TdxRefusesEnvironmentTheMeasurementDoesNotCover) {
  const nlohmann::json s = WithPlaceholdersFilled(Section("holder-tdx.json"));
  ASSERT_TRUE(Make(s, "h.json: attestation", "d").ok());
  for (const char* name : {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "OPENSSL_CONF",
                           "OPENSSL_MODULES", "GPUTRAVEL_FAILPOINT"}) {
    ASSERT_EQ(::setenv(name, "/host/lib", 1), 0);
    auto st = Make(s, "h.json: attestation", "d");
    ::unsetenv(name);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition) << name;
    EXPECT_NE(st.status().message().find(std::string("environment variable ") + name),
              std::string::npos)
        << st.status();
  }
}

}  // namespace
}  // namespace gputravel
