// The device layer over real gRPC and shared memory: the orchestrator's
// driver (GpuSession) and the holder's copy-engine path (H2dWriter) against
// the emulated GPU's services.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>


#include "device/device_relay.h"
#include "device/device_service.h"
#include "device/emulated_gpu.h"
#include "device/gpu_session.h"
#include "device/h2d_writer.h"
#include "device/window_digest.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "keyxfer/random.h"
#include "keyxfer/x509.h"
#include "util/grpc_status.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

class DeviceLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeSocketTestDir("gputravel-dl-");
    auto ca = *EcKey::Generate(Curve::kP384);
    ca_der_ = *IssueCertificate(ca, "device-ca", ca, "", true, 1);
    auto id = *EcKey::Generate(Curve::kP384);
    auto cert = *IssueCertificate(id, "EMU-7", ca, ca_der_, false, 1);
    cert_der_ = cert;
    ca_key_ = std::make_unique<EcKey>(std::move(ca));
    EmulatedGpuOptions o;
    o.serial = "EMU-7";
    o.memory_bytes = 64 << 20;
    o.shared_dirs["holder"] = dir_;  // the holder's rings: dir_ (its bounce_dir)
    gpu_ = std::make_unique<EmulatedGpu>(o, std::move(id), cert);
    orch_svc_ = std::make_unique<DeviceServiceImpl>(gpu_.get(), "orch");
    holder_svc_ = std::make_unique<DeviceServiceImpl>(gpu_.get(), "holder");
    orch_server_ = Serve(dir_ + "/orch.sock", orch_svc_.get());
    holder_server_ = Serve(dir_ + "/holder.sock", holder_svc_.get());
    gpu_->SetOwner("orch");
  }
  void TearDown() override {
    orch_server_->Shutdown();
    holder_server_->Shutdown();
    unlink((dir_ + "/orch.sock").c_str());
    unlink((dir_ + "/holder.sock").c_str());
    rmdir(dir_.c_str());
  }
  std::unique_ptr<grpc::Server> Serve(const std::string& path, grpc::Service* s) {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    b.SetMaxReceiveMessageSize(kMaxMessageBytes);
    b.SetMaxSendMessageSize(kMaxMessageBytes);
    b.RegisterService(s);
    return b.BuildAndStart();
  }
  std::string dir_, ca_der_, cert_der_;
  std::unique_ptr<EcKey> ca_key_;  // the device CA's signing key
  std::unique_ptr<EmulatedGpu> gpu_;
  std::unique_ptr<DeviceServiceImpl> orch_svc_, holder_svc_;
  std::unique_ptr<grpc::Server> orch_server_, holder_server_;
};

TEST_F(DeviceLayerTest, TripThroughTheDeviceLayer) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  const uint64_t kSize = 5 * (1 << 20) + 4096;
  auto buffer = session.AllocBuffer(kSize);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::string data = RandomString(kSize);
  // The session's first hand-off gets the IV space nobody has used: channel
  // counter 0, the window from the first counter, no rotation.
  ChannelMaterial key = std::move((*session.H2dKeysForHandoff(1))[0]);
  EXPECT_EQ(key.channel_counter, 0u);
  auto q = session.QueryChannel();
  EXPECT_EQ(q->h2d_next_counter(), kFirstMessageCounter);
  EXPECT_EQ(q->h2d_channel_counter(), 0u);
  uint64_t old_session = session.session_id();

  gpu_->SetOwner("holder");  // route out
  H2dWriterOptions wo;
  wo.chunk_size = 1 << 20;
  wo.bounce_dir = dir_;
  H2dWriter writer(MakeChannel("unix:" + dir_ + "/holder.sock"), wo);
  CounterWindow window{kFirstMessageCounter, H2dWriter::ChunksFor(kSize, wo.chunk_size)};
  auto src = [&](uint64_t off, uint8_t* dst, size_t n) {
    std::memcpy(dst, data.data() + off, n);
    return absl::OkStatus();
  };
  auto stats = writer.Write(key, old_session, *buffer, 0, kSize, window, src);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->chunks, 6u);
  EXPECT_EQ(stats->bytes, kSize);

  gpu_->SetOwner("orch");  // route back
  ASSERT_TRUE(session.VerifyStillSameSession().ok());
  ASSERT_TRUE(session.Establish().ok());  // fresh re-key
  EXPECT_GT(session.session_id(), old_session);
  EXPECT_EQ(session.QueryChannel()->h2d_next_counter(), kFirstMessageCounter);
  std::string back;
  for (uint64_t off = 0; off < kSize; off += 4 << 20) {
    back += *session.Read(*buffer, off, std::min<uint64_t>(4 << 20, kSize - off));
  }
  EXPECT_TRUE(back == data);
  auto digest = WindowDigest(key, old_session, *buffer, 0, back, wo.chunk_size,
                             kFirstMessageCounter);
  EXPECT_EQ(*digest, stats->digest);

  // The holder keeps its old key and tries again after the re-key: refused.
  gpu_->SetOwner("holder");
  auto again = writer.Write(key, old_session, *buffer, 0, 1 << 20,
                            CounterWindow{kFirstMessageCounter, 1}, src);
  EXPECT_FALSE(again.ok());
  auto with_new_session = writer.Write(key, session.session_id(), *buffer, 0, 1 << 20,
                                       CounterWindow{kFirstMessageCounter, 1}, src);
  EXPECT_FALSE(with_new_session.ok());
  EXPECT_NE(with_new_session.status().message().find("tag check failed"),
            std::string::npos);
  gpu_->SetOwner("orch");
  ASSERT_TRUE(session.ScrubAndVerify(*buffer, kSize).ok());
  EXPECT_EQ(*session.Read(*buffer, 0, 64), std::string(64, '\0'));
}

// Each hand-off is a key fetch with an IV space of its own: a second
// hand-off in one session rotates the H2D IV on the device and here, so what
// was staged for the first window lands nowhere and the second window starts
// at the first counter again.
TEST_F(DeviceLayerTest, EachHandoffInASessionGetsItsOwnIvSpace) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  auto buffer = session.AllocBuffer(8192);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  const std::string data = RandomString(8192);
  auto from = [&data](uint64_t at) {
    return [&data, at](uint64_t off, uint8_t* dst, size_t n) {
      std::memcpy(dst, data.data() + at + off, n);
      return absl::OkStatus();
    };
  };
  const uint64_t sid = session.session_id();
  ChannelMaterial first = std::move((*session.H2dKeysForHandoff(1))[0]);
  EXPECT_EQ(first.channel_counter, 0u);
  H2dWriterOptions wo;
  wo.chunk_size = 4096;
  wo.bounce_dir = dir_;
  H2dWriter writer(MakeChannel("unix:" + dir_ + "/holder.sock"), wo);
  gpu_->SetOwner("holder");
  ASSERT_TRUE(writer.Write(first, sid, *buffer, 0, 4096, CounterWindow{kFirstMessageCounter, 1},
                           from(0)).ok());
  gpu_->SetOwner("orch");

  ChannelMaterial second = std::move((*session.H2dKeysForHandoff(1))[0]);
  EXPECT_EQ(session.session_id(), sid) << "a rotation, not a re-key";
  EXPECT_EQ(second.channel_counter, 1u);
  EXPECT_EQ(std::memcmp(second.key.data(), first.key.data(), kAesKeySize), 0)
      << "the same key, another IV space";
  auto q = session.QueryChannel();
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->h2d_channel_counter(), 1u);
  EXPECT_EQ(q->h2d_next_counter(), kFirstMessageCounter);
  EXPECT_EQ(q->h2d_chunks(), 1u) << "the key's use carries over (key rotation counts it)";

  gpu_->SetOwner("holder");
  // The first window's key, at the counter it would use next or at the first
  // one again: refused, nothing written (other bytes than the window's, so a
  // stale chunk that landed would show).
  const std::string other(4096, 'S');
  auto from_other = [&other](uint64_t off, uint8_t* dst, size_t n) {
    std::memcpy(dst, other.data() + off, n);
    return absl::OkStatus();
  };
  for (uint32_t c : {kFirstMessageCounter + 1, kFirstMessageCounter}) {
    auto stale = writer.Write(first, sid, *buffer, 4096, 4096, CounterWindow{c, 1}, from_other);
    EXPECT_EQ(stale.status().code(), absl::StatusCode::kUnauthenticated) << "counter " << c;
  }
  gpu_->SetOwner("orch");
  EXPECT_TRUE(*session.Read(*buffer, 4096, 4096) == std::string(4096, '\0'));
  gpu_->SetOwner("holder");
  auto landed = writer.Write(second, sid, *buffer, 4096, 4096,
                             CounterWindow{kFirstMessageCounter, 1}, from(4096));
  ASSERT_TRUE(landed.ok()) << landed.status();
  gpu_->SetOwner("orch");
  EXPECT_TRUE(*session.Read(*buffer, 0, 8192) == data);
  EXPECT_EQ(gpu_->Status().rejected_chunks(), 2u);
  EXPECT_EQ(gpu_->Status().copy_engines(0).h2d_channel_counter(), 1u);

  // A device whose H2D slot is not where this end expects it (its channel
  // counter moved behind the driver's back) is out of step: no key is
  // handed out, and the session must be established again.
  gpu_->SetChannelCounterForTest(7, 0, true);
  auto third = session.H2dKeysForHandoff(1);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kDataLoss) << third.status();
  EXPECT_FALSE(session.established());
  ASSERT_TRUE(session.Establish().ok());
  EXPECT_EQ((*session.H2dKeysForHandoff(1))[0].channel_counter, 0u) << "a fresh session's space";
}

// As the driver, the session rotates its D2H IV before a read-back once at
// most the threshold of counters is left; the rotation lifts exhaustion, and
// the reads that follow open at the new channel counter.
TEST_F(DeviceLayerTest, DriverRotatesTheD2hIvBeforeItRunsLow) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  EXPECT_EQ(session.iv_rotation_threshold(), kIvRotationThreshold);
  auto buffer = session.AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  // One counter more than the threshold left: read in the same IV space.
  const uint32_t above = static_cast<uint32_t>(kLastMessageCounter - kIvRotationThreshold);
  gpu_->SetD2hCounterForTest(above);
  session.SetD2hCounterForTest(above);
  ASSERT_TRUE(session.Read(*buffer, 0, 64).ok());
  auto q = session.QueryChannel();
  EXPECT_EQ(q->d2h_channel_counter(), 0u);
  EXPECT_EQ(q->d2h_next_counter(), above + 1);
  // Now at most 2^31 counters are left: rotated first, then read at the
  // first counter of channel 1.
  ASSERT_TRUE(session.Read(*buffer, 0, 64).ok());
  q = session.QueryChannel();
  EXPECT_EQ(q->d2h_channel_counter(), 1u);
  EXPECT_EQ(q->d2h_next_counter(), kFirstMessageCounter + 1);
  EXPECT_EQ(q->d2h_copies(), 2u);

  // The scrub's read-back does the same; the last counter is spent first
  // (a threshold of 0: rotate only when nothing is left).
  session.set_iv_rotation_threshold(0);
  gpu_->SetD2hCounterForTest(kLastMessageCounter);
  session.SetD2hCounterForTest(kLastMessageCounter);
  ASSERT_TRUE(session.Read(*buffer, 0, 64).ok());  // the last counter
  EXPECT_EQ(session.QueryChannel()->d2h_channel_counter(), 1u);
  ASSERT_TRUE(session.ScrubAndVerify(*buffer, 4096).ok());
  q = session.QueryChannel();
  EXPECT_EQ(q->d2h_channel_counter(), 2u);
  EXPECT_EQ(q->d2h_next_counter(), kFirstMessageCounter + 1);
  EXPECT_TRUE(session.VerifyStillSameSession().ok());

  // A device whose rotation this end does not follow (its channel counter
  // moved behind the driver's back) is out of step: refused, and the session
  // must be established again.
  gpu_->SetChannelCounterForTest(7, 0, false);
  EXPECT_EQ(session.RotateIv(false).code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(session.established());
}

// The read-back rides on the re-key (one round trip): it is answered under
// the session that ends, and the new session is in force afterwards.
TEST_F(DeviceLayerTest, ReadBackRidesOnTheRekey) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  // Without a session there is nothing to send the command in.
  GpuSession::PriorOutcome outcome;
  v1::DeviceCommand query;
  query.mutable_query();
  ASSERT_TRUE(session.EstablishAfter(query, &outcome).ok());
  EXPECT_EQ(outcome.session.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(outcome.reply.ok());

  auto buffer = session.AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ChannelMaterial key = std::move((*session.H2dKeysForHandoff(1))[0]);
  const uint64_t handed = session.session_id();
  const std::string data = RandomString(4096);
  gpu_->SetOwner("holder");
  H2dWriterOptions wo;
  wo.chunk_size = 4096;
  wo.bounce_dir = dir_;
  H2dWriter writer(MakeChannel("unix:" + dir_ + "/holder.sock"), wo);
  auto stats = writer.Write(key, handed, *buffer, 0, 4096, CounterWindow{kFirstMessageCounter, 1},
                            [&](uint64_t off, uint8_t* dst, size_t n) {
                              std::memcpy(dst, data.data() + off, n);
                              return absl::OkStatus();
                            });
  ASSERT_TRUE(stats.ok()) << stats.status();
  gpu_->SetOwner("orch");

  v1::DeviceCommand read;
  read.mutable_read()->set_buffer_id(*buffer);
  read.mutable_read()->set_length(4096);
  ASSERT_TRUE(session.EstablishAfter(read, &outcome).ok());
  EXPECT_TRUE(outcome.session.ok()) << outcome.session;
  ASSERT_TRUE(outcome.reply.ok()) << outcome.reply.status();
  EXPECT_TRUE(outcome.reply->data() == data);
  EXPECT_GT(session.session_id(), handed);
  EXPECT_TRUE(session.VerifyStillSameSession().ok());
  // The holder's key died with the session the read was answered in.
  gpu_->SetOwner("holder");
  EXPECT_FALSE(writer.Write(key, handed, *buffer, 0, 4096, CounterWindow{kFirstMessageCounter, 1},
                            [](uint64_t, uint8_t*, size_t) { return absl::OkStatus(); })
                   .ok());
  gpu_->SetOwner("orch");

  // A read-back on another copy engine (whose D2H key this driver does not
  // hold) is refused before anything is sent: the session and the device's
  // counters are as they were.
  const uint64_t before = session.session_id();
  const v1::DeviceStatus status_before = gpu_->Status();
  v1::DeviceCommand elsewhere = read;
  elsewhere.mutable_read()->set_copy_engine(1);
  GpuSession::PriorOutcome unsent;
  EXPECT_EQ(session.EstablishAfter(elsewhere, &unsent).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session.session_id(), before);
  EXPECT_EQ(gpu_->Status().session_id(), before);
  EXPECT_EQ(gpu_->Status().copy_engines_size(), status_before.copy_engines_size());
  EXPECT_TRUE(session.VerifyStillSameSession().ok());

  // The device's own refusal is authenticated: the session held.
  read.mutable_read()->set_buffer_id(*buffer + 100);
  ASSERT_TRUE(session.EstablishAfter(read, &outcome).ok());
  EXPECT_TRUE(outcome.session.ok()) << outcome.session;
  EXPECT_EQ(outcome.reply.status().code(), absl::StatusCode::kNotFound);

  // A reset while the GPU was away wiped the session: the command cannot be
  // answered in it, which the trip reports; the exchange still succeeds.
  gpu_->Reset();
  gpu_->SetOwner("orch");
  ASSERT_TRUE(session.EstablishAfter(query, &outcome).ok());
  EXPECT_EQ(outcome.session.code(), absl::StatusCode::kFailedPrecondition) << outcome.session;
  EXPECT_EQ(outcome.reply.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(session.VerifyStillSameSession().ok());
}

TEST_F(DeviceLayerTest, DeviceFromAnotherCaRefused) {
  auto other = *EcKey::Generate(Curve::kP384);
  auto other_der = *IssueCertificate(other, "other-ca", other, "", true, 1);
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), other_der, "");
  auto st = session.Establish();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated);
}

// Swaps the device behind the orchestrator's socket for `gpu` (the host
// re-plugging another function at the same place).
class SwappedDeviceTest : public DeviceLayerTest {
 protected:
  void SwapIn(std::unique_ptr<EmulatedGpu> gpu) {
    orch_server_->Shutdown();
    unlink((dir_ + "/orch.sock").c_str());
    swapped_ = std::move(gpu);
    swapped_->SetOwner("orch");
    swapped_svc_ = std::make_unique<DeviceServiceImpl>(swapped_.get(), "orch");
    orch_server_ = Serve(dir_ + "/orch.sock", swapped_svc_.get());
  }
  std::unique_ptr<EmulatedGpu> swapped_;
  std::unique_ptr<DeviceServiceImpl> swapped_svc_;
};

// The certificate check is cached by the certificate's exact bytes: a
// different certificate after a good one is checked again and refused.
TEST_F(SwappedDeviceTest, CachedCertificateDoesNotCoverAnotherOne) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  auto rogue_ca = *EcKey::Generate(Curve::kP384);
  auto rogue_ca_der = *IssueCertificate(rogue_ca, "device-ca", rogue_ca, "", true, 1);
  auto id = *EcKey::Generate(Curve::kP384);
  auto cert = *IssueCertificate(id, "EMU-7", rogue_ca, rogue_ca_der, false, 1);
  EmulatedGpuOptions o;
  o.serial = "EMU-7";
  SwapIn(std::make_unique<EmulatedGpu>(o, std::move(id), cert));
  EXPECT_EQ(session.Establish().code(), absl::StatusCode::kUnauthenticated);
}

// An impostor replaying the genuine (cached) certificate without its key:
// the transcript signature, checked beside the ECDH, still refuses it.
TEST_F(SwappedDeviceTest, ReplayedCertificateWithoutTheKeyRefused) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  EmulatedGpuOptions o;
  o.serial = "EMU-7";
  SwapIn(std::make_unique<EmulatedGpu>(o, *EcKey::Generate(Curve::kP384), cert_der_));
  auto st = session.Establish();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(st.message().find("signature"), std::string::npos) << st.message();
  EXPECT_FALSE(session.established());
}

// A session keeps the device identity it checked; another genuine GPU of the
// same vendor CA routed in its place cannot answer for it (its signature is
// over its own serial with its own key), and the identity fetched again
// names the substitution (P5).
TEST_F(SwappedDeviceTest, AnotherGenuineGpuAfterAnExchangeIsNamed) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  auto id = *EcKey::Generate(Curve::kP384);
  auto cert = *IssueCertificate(id, "EMU-9", *ca_key_, ca_der_, false, 1);
  EmulatedGpuOptions o;
  o.serial = "EMU-9";
  SwapIn(std::make_unique<EmulatedGpu>(o, std::move(id), cert));
  auto st = session.Establish();
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_NE(st.message().find("different GPU"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("EMU-9"), std::string::npos) << st.message();
  EXPECT_FALSE(session.established());
}

// The same GPU with a new certificate from its CA (re-provisioned identity
// key): the kept identity no longer verifies, the new one is fetched,
// checked and used.
TEST_F(SwappedDeviceTest, RecertifiedGpuIsCheckedAgainAndAccepted) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  auto id = *EcKey::Generate(Curve::kP384);
  auto cert = *IssueCertificate(id, "EMU-7", *ca_key_, ca_der_, false, 1);
  EmulatedGpuOptions o;
  o.serial = "EMU-7";
  SwapIn(std::make_unique<EmulatedGpu>(o, std::move(id), cert));
  auto st = session.Establish();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(session.serial(), "EMU-7");
  EXPECT_TRUE(session.VerifyStillSameSession().ok());
}

// A GPU routed in place of the one that left cannot answer the command that
// rides on the re-key, even when it is genuine and the exchange with it
// succeeds: the trip learns of the substitution from that answer (P5).
TEST_F(SwappedDeviceTest, SubstituteCannotAnswerUnderTheSessionThatLeft) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  auto id = *EcKey::Generate(Curve::kP384);
  auto cert = *IssueCertificate(id, "EMU-7", *ca_key_, ca_der_, false, 1);
  EmulatedGpuOptions o;
  o.serial = "EMU-7";
  SwapIn(std::make_unique<EmulatedGpu>(o, std::move(id), cert));
  v1::DeviceCommand query;
  query.mutable_query();
  GpuSession::PriorOutcome outcome;
  ASSERT_TRUE(session.EstablishAfter(query, &outcome).ok());
  EXPECT_FALSE(outcome.session.ok());
  EXPECT_FALSE(outcome.reply.ok());
}

// Many exchanges in a row (each with its own pre-generated key) all work,
// and every one starts a new session.
TEST_F(DeviceLayerTest, RepeatedEstablishGivesFreshSessions) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(session.Establish().ok());
    EXPECT_GT(session.session_id(), last);
    last = session.session_id();
    EXPECT_TRUE(session.VerifyStillSameSession().ok());
  }
}

TEST_F(DeviceLayerTest, SubstitutedGpuDetected) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "EMU-8");
  auto st = session.Establish();
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("different GPU"), std::string::npos);
}

TEST_F(DeviceLayerTest, NotRoutedDomainRefused) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/holder.sock"), ca_der_, "");
  EXPECT_EQ(session.Establish().code(), absl::StatusCode::kFailedPrecondition);
}

// The driver's own re-key keeps device memory (it authorises the exchange
// under the session in force, and the device signs that it kept it); a
// driver without that session (a restarted orchestrator) finds it wiped.
TEST_F(DeviceLayerTest, DriverKeepsMemoryOnlyThroughItsOwnSession) {
  GpuSession session(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  EXPECT_FALSE(session.memory_kept()) << "nothing authorised the first exchange";
  auto buffer = session.AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(session.Establish().ok());
  EXPECT_TRUE(session.memory_kept());
  auto kept = session.ScrubUnlessGone(*buffer, 4096);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, GpuSession::ScrubResult::kScrubbed);

  GpuSession restarted(MakeChannel("unix:" + dir_ + "/orch.sock"), ca_der_, "");
  ASSERT_TRUE(restarted.Establish().ok());
  EXPECT_FALSE(restarted.memory_kept());
  auto gone = restarted.ScrubUnlessGone(*buffer, 4096);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(*gone, GpuSession::ScrubResult::kGone);
}

// P2: a host that answers the scrub with a bare NOT_FOUND does not make the
// buffer "gone": only the device's sealed reply can say so.
TEST_F(DeviceLayerTest, TransportNotFoundIsNeverTakenAsGone) {
  DeviceRelay relay("unix:" + dir_ + "/orch.sock");
  auto server = Serve(dir_ + "/relay.sock", &relay);
  GpuSession session(MakeChannel("unix:" + dir_ + "/relay.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  auto buffer = session.AllocBuffer(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  relay.AnswerControlWith(grpc::StatusCode::NOT_FOUND);
  auto scrub = session.ScrubUnlessGone(*buffer, 4096);
  EXPECT_FALSE(scrub.ok());
  EXPECT_EQ(scrub.status().code(), absl::StatusCode::kUnavailable) << scrub.status();
  EXPECT_FALSE(session.ScrubAndVerify(*buffer, 4096).ok());
  EXPECT_NE(session.ScrubAndVerify(*buffer, 4096).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(gpu_->Status().buffers(), 1u);
  server->Shutdown();
  unlink((dir_ + "/relay.sock").c_str());
}

TEST_F(DeviceLayerTest, WindowThatDoesNotFitRefusedBeforeAnyWrite) {
  gpu_->SetOwner("holder");
  H2dWriterOptions wo;
  wo.bounce_dir = dir_;
  H2dWriter writer(MakeChannel("unix:" + dir_ + "/holder.sock"), wo);
  ChannelMaterial key;
  key.key = SecretBytes(32);
  auto st = writer.Write(key, 1, 1, 0, 10 << 20, CounterWindow{1, 2},
                         [](uint64_t, uint8_t*, size_t) { return absl::OkStatus(); });
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gputravel

namespace gputravel {
namespace {

// The host's relay of the orchestrator's device socket, which passes each
// exchange on to the device and then spoils the answer: flips a bit of the
// device's signature, or answers with a transport UNAUTHENTICATED.
class SpoilingRelay : public DeviceRelay {
 public:
  using DeviceRelay::DeviceRelay;
  std::atomic<int> flip_signature{0}, transport_unauthenticated{0};
  grpc::Status KeyExchange(grpc::ServerContext* ctx, const v1::KeyExchangeRequest* req,
                           v1::KeyExchangeResponse* resp) override {
    grpc::Status st = DeviceRelay::KeyExchange(ctx, req, resp);
    if (!st.ok()) return st;
    if (flip_signature.fetch_sub(1) > 0) {
      resp->mutable_signature_der()->back() ^= 1;
    } else if (transport_unauthenticated.fetch_sub(1) > 0) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "relay says no");
    }
    return st;
  }
};

// ATTACK (host spoils the driver's authorised re-key after the device ran
// it; the defence holds): the device kept memory for an exchange whose
// answer the driver cannot verify (or never sees). The driver's second
// exchange carries no authorisation, so it starts from wiped memory, says so
// (memory_kept false, retried), and the session the first exchange made on
// the device (which kept memory, for a key the driver has dropped) is ended
// by the second. The riding command's answer is still the device's own when
// the relay passed it on, and an error when it did not.
TEST_F(DeviceLayerTest, SpoiledRekeyIsRetriedFromWipedMemory) {
  SpoilingRelay relay("unix:" + dir_ + "/orch.sock");
  auto server = Serve(dir_ + "/relay.sock", &relay);
  GpuSession session(MakeChannel("unix:" + dir_ + "/relay.sock"), ca_der_, "");
  ASSERT_TRUE(session.Establish().ok());
  for (bool flip : {true, false}) {
    SCOPED_TRACE(flip ? "signature flipped" : "transport UNAUTHENTICATED");
    auto buffer = session.AllocBuffer(4096);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    const uint64_t before = gpu_->Status().session_id();
    (flip ? relay.flip_signature : relay.transport_unauthenticated) = 1;
    v1::DeviceCommand query;
    query.mutable_query();
    GpuSession::PriorOutcome outcome;
    ASSERT_TRUE(session.EstablishAfter(query, &outcome).ok());
    EXPECT_TRUE(outcome.retried);
    EXPECT_EQ(outcome.session.ok(), flip) << outcome.session;
    EXPECT_FALSE(session.memory_kept());
    EXPECT_EQ(gpu_->Status().session_id(), before + 2);
    EXPECT_EQ(session.session_id(), before + 2);
    EXPECT_EQ(gpu_->Status().buffers(), 0u);
    auto gone = session.ScrubUnlessGone(*buffer, 4096);
    ASSERT_TRUE(gone.ok()) << gone.status();
    EXPECT_EQ(*gone, GpuSession::ScrubResult::kGone);
  }
  server->Shutdown();
  unlink((dir_ + "/relay.sock").c_str());
}

}  // namespace
}  // namespace gputravel
