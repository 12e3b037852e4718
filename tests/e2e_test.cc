// End-to-end: the real daemons (emulated GPU, MUX, holder agents,
// orchestrator) as separate processes, real gRPC over Unix sockets, real
// cryptography, real bytes in device memory.
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/synchronization/mutex.h"
#include "cli/emulated_stack.h"
#include "device/h2d_writer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/handoff.h"
#include "keyxfer/random.h"
#include "keyxfer/x509.h"
#include "proto/device.grpc.pb.h"
#include "proto/holder.grpc.pb.h"
#include "proto/mux.grpc.pb.h"
#include "util/files.h"
#include "util/grpc_status.h"

namespace gputravel {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EndToEndTest, ThreeHoldersEveryTripVerified) {
  StackOptions o;
  o.holders = 3;
  o.log_level = 2;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->error();
  ASSERT_EQ(report->trips_size(), 3);
  std::set<uint64_t> sizes, trips;
  for (const auto& t : report->trips()) {
    EXPECT_TRUE(t.digest_match()) << t.holder();
    EXPECT_TRUE(t.scrub_verified()) << t.holder();
    EXPECT_TRUE(t.rekeyed()) << t.holder();
    EXPECT_EQ(t.error(), "");
    EXPECT_GT(t.bytes(), 0u);
    sizes.insert(t.bytes());
    trips.insert(t.trip());
  }
  EXPECT_EQ(sizes.size(), 3u) << "datasets must differ in size";
  EXPECT_EQ(trips.size(), 3u) << "trip ids are unique";
  // The MUX audited every move: out and back for each trip.
  std::string audit = ReadAll((*stack)->dir() + "/logs/mux-audit.jsonl");
  for (const auto& h : (*stack)->holder_names()) {
    EXPECT_NE(audit.find("\"to\":\"td-" + h + "\""), std::string::npos) << h;
  }
}

TEST(EndToEndTest, DatasetLargerThanBufferTakesSeveralTrips) {
  StackOptions o;
  o.holders = 1;
  o.dataset_bytes = {(5u << 20) + 1234};
  o.buffer_bytes = 2u << 20;
  o.chunk_bytes = 512u << 10;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->error();
  ASSERT_EQ(report->trips_size(), 3);
  uint64_t total = 0;
  for (const auto& t : report->trips()) {
    EXPECT_EQ(t.window_offset(), total);
    total += t.bytes();
    EXPECT_TRUE(t.digest_match());
  }
  EXPECT_EQ(total, (5u << 20) + 1234);
}

TEST(EndToEndTest, HolderNotRunningFailsCleanlyNamingIt) {
  StackOptions o;
  o.holders = 2;
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  (*stack)->process("holder-b")->Terminate();
  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->ok());
  EXPECT_NE(report->error().find("holder-b"), std::string::npos) << report->error();
  EXPECT_EQ(report->trips_size(), 0) << "nothing may leave before every holder answers";
}

TEST(EndToEndTest, MissingDatasetStopsStartNamingTheFile) {
  StackOptions o;
  o.holders = 2;
  o.dataset_files = {"/nonexistent/gputravel/train_000.bin"};
  auto stack = EmulatedStack::Start(o);
  ASSERT_FALSE(stack.ok());
  EXPECT_NE(stack.status().message().find("/nonexistent/gputravel/train_000.bin"),
            std::string::npos) << stack.status();
  EXPECT_NE(stack.status().message().find("holder-a"), std::string::npos);
}

TEST(EndToEndTest, MalformedDatasetStopsStartNamingTheProblem) {
  char tmpl[] = "/tmp/gputravel-bad-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string path = dir + "/bad.bin";
  std::string header(1024, '\0');
  int32_t magic = 20240520, version = 1, count = 1000;  // claims 1000 tokens
  std::memcpy(&header[0], &magic, 4);
  std::memcpy(&header[4], &version, 4);
  std::memcpy(&header[8], &count, 4);
  ASSERT_TRUE(WriteFile(path, header + std::string(10, 'x')).ok());
  StackOptions o;
  o.holders = 1;
  o.dataset_files = {path};
  auto stack = EmulatedStack::Start(o);
  ASSERT_FALSE(stack.ok());
  EXPECT_NE(stack.status().message().find("1000 tokens"), std::string::npos) << stack.status();
  (void)system(("rm -rf " + dir).c_str());
}

// A holder that keeps its key after its trip (what P3 must make useless).
// It runs the real protocol with the real crypto, in this test process.
class KeyKeepingHolder final : public v1::HolderAgent::Service {
 public:
  KeyKeepingHolder(std::unique_ptr<Attester> attester, std::unique_ptr<Verifier> verifier,
                   std::string device_endpoint, std::string bounce_dir)
      : attester_(std::move(attester)), verifier_(std::move(verifier)),
        device_endpoint_(std::move(device_endpoint)), bounce_dir_(std::move(bounce_dir)) {}

  grpc::Status GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*,
                       v1::HolderInfo* out) override {
    out->set_name("keeper");
    out->set_dataset_bytes(1 << 20);
    out->set_dataset_format("raw");
    return grpc::Status::OK;
  }
  grpc::Status OpenChannel(grpc::ServerContext*, const v1::OpenChannelRequest* req,
                           v1::OpenChannelResponse* out) override {
    auto r = ChannelResponder::Respond(req->orchestrator_public_key(),
                                       req->orchestrator_nonce(), *attester_);
    if (!r.ok()) return ToGrpc(r.status());
    out->set_channel_id("c");
    out->set_holder_public_key(r->public_key());
    out->set_holder_nonce(r->nonce());
    *out->mutable_evidence() = r->evidence();
    absl::MutexLock l(&mu_);
    responder_ = std::make_unique<ChannelResponder>(std::move(*r));
    return grpc::Status::OK;
  }
  grpc::Status Provision(grpc::ServerContext*, const v1::ProvisionRequest* req,
                         v1::ProvisionReport* out) override {
    absl::MutexLock l(&mu_);
    auto ch = responder_->Confirm(req->orchestrator_evidence(), *verifier_);
    if (!ch.ok()) return ToGrpc(ch.status());
    auto key = UnwrapHandoff(ch->handoff_key, req->binding(), req->wrapped_handoff());
    if (!key.ok()) return ToGrpc(key.status());
    kept_ = key->Clone();
    binding_ = req->binding();
    H2dWriterOptions wo;
    wo.chunk_size = req->binding().chunk_size();
    wo.bounce_dir = bounce_dir_;
    data_ = RandomString(req->binding().window_length());
    H2dWriter w(MakeChannel(device_endpoint_), wo);
    auto stats = w.Write(*key, req->binding().gpu_session(), req->binding().buffer_id(), 0,
                         data_.size(),
                         CounterWindow{req->binding().first_counter(),
                                       req->binding().counter_count()},
                         [this](uint64_t off, uint8_t* dst, size_t n) {
                           std::memcpy(dst, data_.data() + off, n);
                           return absl::OkStatus();
                         });
    if (!stats.ok()) return ToGrpc(stats.status());
    out->set_bytes(stats->bytes);
    out->set_chunks(stats->chunks);
    out->set_digest(stats->digest);
    out->set_seconds(stats->total_seconds);
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  std::unique_ptr<Attester> attester_;
  std::unique_ptr<Verifier> verifier_;
  std::string device_endpoint_, bounce_dir_;
  std::unique_ptr<ChannelResponder> responder_;
  ChannelMaterial kept_;
  v1::HandoffBinding binding_;
  std::string data_;
};

TEST(EndToEndTest, HolderRetryingWithItsOldKeyAfterRekeyIsRefused) {
  char tmpl[] = "/tmp/gputravel-keeper-XXXXXX";
  std::string mydir = mkdtemp(tmpl);
  auto self_mrtd = MeasureFile("/proc/self/exe");
  ASSERT_TRUE(self_mrtd.ok());
  StackOptions o;
  o.holders = 2;
  o.log_level = 3;  // most verbose: the logs must still hold no key bytes
  o.extra_holders = {HolderConfig{"keeper", "unix:" + mydir + "/keeper.sock", "td-keeper"}};
  o.extra_holder_mrtd_hex = {HexEncode(*self_mrtd)};
  auto stack = EmulatedStack::Start(o);
  ASSERT_TRUE(stack.ok()) << stack.status();
  const DevPki& pki = (*stack)->pki();
  auto key = EcKey::FromPrivatePem(*ReadFile(pki.domains.at("td-keeper").key));
  auto cert = CertificatePemToDer(*ReadFile(pki.domains.at("td-keeper").cert));
  auto root = CertificatePemToDer(*ReadFile(pki.attestation_root));
  auto attester = DevAttester::Create("td-keeper", std::move(*key), *cert, *self_mrtd);
  ASSERT_TRUE(attester.ok());
  KeyKeepingHolder keeper(std::move(*attester), std::make_unique<DevVerifier>(*root, DevPolicy{}),
                          (*stack)->device_socket("td-keeper"), mydir);
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + mydir + "/keeper.sock", grpc::InsecureServerCredentials());
  b.RegisterService(&keeper);
  auto server = b.BuildAndStart();
  ASSERT_TRUE(server);

  auto report = (*stack)->RunCampaign();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->error();
  ASSERT_EQ(report->trips_size(), 3);
  ASSERT_FALSE(keeper.kept_.key.empty()) << "the keeper took part in the campaign";

  // A malicious host routes the GPU back to the keeper after its trip.
  auto mux = v1::Mux::NewStub(MakeChannel((*stack)->mux_endpoint()));
  v1::RouteRequest rr;
  rr.set_gpu("gpu0");
  rr.set_domain("td-keeper");
  rr.set_fencing_token(1000000);
  v1::RouteResponse rresp;
  grpc::ClientContext rctx;
  ASSERT_TRUE(mux->Route(&rctx, rr, &rresp).ok());

  auto admin = v1::DeviceAdmin::NewStub(MakeChannel((*stack)->device_admin_endpoint()));
  v1::DeviceStatus before;
  {
    grpc::ClientContext c;
    ASSERT_TRUE(admin->GetStatus(&c, {}, &before).ok());
  }
  EXPECT_GT(before.session_id(), keeper.binding_.gpu_session()) << "re-keyed since the trip";

  H2dWriterOptions wo;
  wo.chunk_size = keeper.binding_.chunk_size();
  wo.bounce_dir = mydir;
  H2dWriter w(MakeChannel((*stack)->device_socket("td-keeper")), wo);
  auto src = [](uint64_t, uint8_t* dst, size_t n) {
    std::memset(dst, 0x5A, n);
    return absl::OkStatus();
  };
  // With the session it was handed: dead.
  auto old_session = w.Write(keeper.kept_, keeper.binding_.gpu_session(),
                             keeper.binding_.buffer_id(), 0, wo.chunk_size,
                             CounterWindow{1, 1}, src);
  EXPECT_EQ(old_session.status().code(), absl::StatusCode::kFailedPrecondition)
      << old_session.status();
  // Claiming the current session, with the old key: the tag check fails, at
  // every counter it might guess.
  for (uint32_t counter : {1u, 2u, keeper.binding_.first_counter() + keeper.binding_.counter_count()}) {
    auto st = w.Write(keeper.kept_, before.session_id(), keeper.binding_.buffer_id(), 0,
                      wo.chunk_size, CounterWindow{counter, 1}, src);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kUnauthenticated) << st.status();
  }
  v1::DeviceStatus after;
  {
    grpc::ClientContext c;
    ASSERT_TRUE(admin->GetStatus(&c, {}, &after).ok());
  }
  EXPECT_GE(after.rejected_chunks(), before.rejected_chunks() + 4);
  server->Shutdown();

  // Key material never reaches a log, even at the most verbose level.
  std::string raw(reinterpret_cast<const char*>(keeper.kept_.key.data()), 32);
  std::string hex = HexEncode(raw);
  for (const auto& log : (*stack)->logs()) {
    std::string text = ReadAll(log.second);
    EXPECT_FALSE(text.empty()) << log.first;
    EXPECT_EQ(text.find(raw), std::string::npos) << log.first;
    EXPECT_EQ(text.find(hex), std::string::npos) << log.first;
    EXPECT_EQ(text.find(hex.substr(0, 16)), std::string::npos) << log.first;
  }
  (*stack)->Stop();
  (void)system(("rm -rf " + mydir).c_str());
}

}  // namespace
}  // namespace gputravel
