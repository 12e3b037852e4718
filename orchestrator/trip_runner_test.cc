// TripRunner's attribution of a failed attested channel (TripFault), and
// its MUX calls when the MUX restarts or is down.
#include "orchestrator/trip_runner.h"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "keyxfer/attested_channel.h"
#include "keyxfer/dev_attester.h"
#include "keyxfer/ec_key.h"
#include "keyxfer/x509.h"
#include "proto/attestation.pb.h"
#include "proto/holder.grpc.pb.h"
#include "proto/mux.grpc.pb.h"
#include "util/grpc_status.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

const std::string kHolderMrtd(48, 'H');
const std::string kOrchMrtd(48, 'O');

// The quote as the host's quote generation returns it. On TDX a TD's quote
// is signed outside the TD, by the quoting enclave that the host runs and
// reaches through the host (GetQuote goes to the VMM and on to its quote
// generation service): the host can return a quote for holder H that does
// not verify (a corrupted signature here; an outdated quoting enclave, a
// revoked PCK certificate on real hardware) while every other TD's quotes
// verify.
class HostCorruptedQuote : public Attester {
 public:
  explicit HostCorruptedQuote(Attester* inner) : inner_(inner) {}
  absl::StatusOr<Evidence> Attest(const ReportData& report_data) override {
    auto e = inner_->Attest(report_data);
    if (!e.ok()) return e;
    v1::DevEvidence body;
    if (!body.ParseFromString(e->blob())) return absl::InternalError("not dev evidence");
    std::string sig = body.signature_der();
    sig[sig.size() - 1] ^= 0x01;
    body.set_signature_der(sig);
    e->set_blob(body.SerializeAsString());
    return e;
  }

 private:
  Attester* inner_;
};

// A holder agent's OpenChannel: answers with evidence from `attester`.
class ChannelOnlyHolder final : public v1::HolderAgent::Service {
 public:
  explicit ChannelOnlyHolder(Attester* attester) : attester_(attester) {}
  grpc::Status OpenChannel(grpc::ServerContext*, const v1::OpenChannelRequest* req,
                           v1::OpenChannelResponse* out) override {
    auto r = ChannelResponder::Respond(req->orchestrator_public_key(),
                                       req->orchestrator_nonce(), *attester_);
    if (!r.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, std::string(r.status().message()));
    out->set_channel_id("c");
    out->set_holder_public_key(r->public_key());
    out->set_holder_nonce(r->nonce());
    *out->mutable_evidence() = r->evidence();
    return grpc::Status::OK;
  }

 private:
  Attester* attester_;
};

class TripRunnerChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::make_unique<EcKey>(*EcKey::Generate(Curve::kP256));
    root_der_ = *IssueCertificate(*root_, "dev root", *root_, "", true, 1);
    orch_ = Make("orchestrator", kOrchMrtd);
    DevPolicy holders;
    holders.allowed_mrtd = {kHolderMrtd};
    verifier_ = std::make_unique<DevVerifier>(root_der_, holders);
    // A Unix socket path must be short: TEST_TMPDIR can be too long.
    dir_ = MakeSocketTestDir("trip_runner_test.");
    socket_ = dir_ + "/holder.sock";
  }
  void TearDown() override {
    ::unlink(socket_.c_str());
    ::rmdir(dir_.c_str());
  }

  std::unique_ptr<DevAttester> Make(const std::string& domain, const std::string& mrtd) {
    auto k = *EcKey::Generate(Curve::kP256);
    auto cert = *IssueCertificate(k, domain, *root_, root_der_, false, 1);
    return *DevAttester::Create(domain, std::move(k), cert, mrtd);
  }

  // PrepareChannel against a holder answering with `attester`'s evidence.
  TripFault FaultWith(Attester* attester) {
    ChannelOnlyHolder service(attester);
    grpc::ServerBuilder b;
    ::unlink(socket_.c_str());
    b.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    b.RegisterService(&service);
    auto server = b.BuildAndStart();
    if (server == nullptr) {
      ADD_FAILURE() << "cannot serve on " << socket_;
      return TripFault::kNone;
    }
    auto stub = v1::HolderAgent::NewStub(MakeChannel("unix:" + socket_));
    TripRunner runner("orchestrator-td", "gpu0", nullptr, nullptr, orch_.get(), verifier_.get());
    TripFault fault = TripFault::kNone;
    auto ch = runner.PrepareChannel("holder-a", stub.get(), 10, nullptr, &fault);
    EXPECT_FALSE(ch.ok());
    last_error_ = ch.ok() ? "" : std::string(ch.status().message());
    server->Shutdown();
    return fault;
  }

  std::unique_ptr<EcKey> root_;
  std::string root_der_, dir_, socket_, last_error_;
  std::unique_ptr<DevAttester> orch_;
  std::unique_ptr<DevVerifier> verifier_;
};

// The host makes holder-a's quote fail verification (its quote generation
// is the host's): a failure the host can cause is no evidence against the
// holder, so the holder is not charged (under on_holder_failure: skip the
// host would otherwise choose who is dropped).
TEST_F(TripRunnerChannelTest, AQuoteTheHostCorruptedIsNotChargedToTheHolder) {
  auto genuine = Make("holder-a", kHolderMrtd);
  HostCorruptedQuote corrupted(genuine.get());
  EXPECT_STREQ(TripFaultName(FaultWith(&corrupted)), "undetermined")
      << "the holder is charged for a quote the host's quote generation spoiled: "
      << last_error_;
}

// Authentic evidence of a TD outside the policy charges nobody either: the
// host launches the holder's TD (it loads the firmware MRTD measures and
// attaches the disk the agent's binary comes from), so another measurement
// may be the host's substitution as well as the holder's mistake. The
// campaign pauses, and an operator decides.
TEST_F(TripRunnerChannelTest, EvidenceOfABinaryOutsideThePolicyChargesNobody) {
  auto other_binary = Make("holder-a", std::string(48, 'X'));
  EXPECT_STREQ(TripFaultName(FaultWith(other_binary.get())), "undetermined") << last_error_;
  EXPECT_NE(last_error_.find("holder-a"), std::string::npos) << last_error_;
}

// A MUX that records each Route it is sent and answers `answer`.
class RecordingMux final : public v1::Mux::Service {
 public:
  explicit RecordingMux(grpc::Status answer = grpc::Status::OK) : answer_(answer) {}
  grpc::Status Route(grpc::ServerContext*, const v1::RouteRequest* req,
                     v1::RouteResponse*) override {
    absl::MutexLock l(&mu_);
    tokens_.push_back(req->fencing_token());
    return answer_;
  }
  std::vector<uint64_t> tokens() {
    absl::MutexLock l(&mu_);
    return tokens_;
  }

 private:
  const grpc::Status answer_;
  absl::Mutex mu_;
  std::vector<uint64_t> tokens_ ABSL_GUARDED_BY(mu_);
};

class TripRunnerMuxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeSocketTestDir("trip_runner_mux.");
    address_ = "unix:" + dir_ + "/mux.sock";
    stub_ = v1::Mux::NewStub(MakeChannel(address_));
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    ::unlink((dir_ + "/mux.sock").c_str());
    ::rmdir(dir_.c_str());
  }
  void Serve(RecordingMux* mux) {
    grpc::ServerBuilder b;
    b.AddListeningPort(address_, grpc::InsecureServerCredentials());
    b.RegisterService(mux);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr) << "cannot serve on " << address_;
  }

  std::string dir_, address_;
  std::unique_ptr<v1::Mux::Stub> stub_;
  std::unique_ptr<grpc::Server> server_;
};

// The MUX restarts while the orchestrator's channel to it is failing: the
// next route goes through instead of pausing the campaign, and the MUX sees
// the request once, with its token. While the MUX is down, a route fails
// UNAVAILABLE naming the MUX within the bounded wait.
TEST_F(TripRunnerMuxTest, ARouteRightAfterTheMuxComesBackGoesThrough) {
  TripRunner runner("orchestrator-td", "gpu0", stub_.get(), nullptr, nullptr, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status down = runner.RouteHome(7);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(absl::IsUnavailable(down)) << down;
  EXPECT_NE(down.message().find("MUX Route gpu0"), std::string::npos) << down;
  EXPECT_LT(waited, TripRunner::kMuxReconnectSeconds + 25) << "the wait is bounded";

  RecordingMux mux;
  Serve(&mux);
  absl::Status s = runner.RouteHome(8);
  EXPECT_TRUE(s.ok()) << "a route right after the MUX came back failed: " << s;
  EXPECT_EQ(mux.tokens(), std::vector<uint64_t>({8}));
}

// UNAVAILABLE from the MUX itself (its disk failing) is tried once more with
// the same token, and then stands.
TEST_F(TripRunnerMuxTest, AnUnavailableMuxIsAskedOnceMoreWithTheSameToken) {
  RecordingMux mux(grpc::Status(grpc::StatusCode::UNAVAILABLE, "cannot write MUX state"));
  Serve(&mux);
  TripRunner runner("orchestrator-td", "gpu0", stub_.get(), nullptr, nullptr, nullptr);
  absl::Status s = runner.RouteHome(9);
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("cannot write MUX state"), std::string::npos) << s;
  EXPECT_EQ(mux.tokens(), std::vector<uint64_t>({9, 9}));
}

}  // namespace
}  // namespace gputravel
