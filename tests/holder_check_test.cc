// The orchestrator's preflight of a holder agent (CheckHolder) against the
// real daemons: an agent that answers as itself, in its TD, with the dataset
// asked for and evidence the policy accepts passes and shows what was
// verified; each way of being wrong fails with the check that caught it and
// without the orchestrator's local detail.
#include <stdlib.h>

#include <chrono>
#include <memory>
#include <string>

#include "cli/emulated_stack.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/orchestrator.grpc.pb.h"
#include "tests/operator_cli.h"
#include "tests/key_keeping_holder.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

class HolderCheckTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeSocketTestDir("gputravel-check-"));
    StackOptions o;
    o.holders = 2;
    o.log_level = 0;
    // An agent whose binary the orchestrator's policy does not allow: the
    // key-keeping holder's own MRTD is left out of the allowed list.
    KeyKeepingHolder::AddTo(&o, "stranger", *dir_);
    o.extra_holder_mrtd_hex.back() = std::string(96, 'a');
    auto stack = EmulatedStack::Start(o);
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = stack->release();
    auto stranger = KeyKeepingHolder::Serve(stack_, "stranger", *dir_);
    ASSERT_TRUE(stranger.ok()) << stranger.status();
    stranger_ = stranger->release();
  }
  static void TearDownTestSuite() {
    delete stranger_;
    if (stack_ != nullptr) stack_->Stop();
    delete stack_;
    if (dir_ != nullptr) (void)system(("rm -rf " + *dir_).c_str());
    delete dir_;
  }

  // The request a campaign spec's holders[i] would make.
  static v1::CheckHolderRequest RequestFor(int i) {
    const auto h = stack_->CampaignSpec()["holders"][i];
    v1::CheckHolderRequest req;
    req.set_endpoint(h["endpoint"].get<std::string>());
    req.set_name(h["name"].get<std::string>());
    req.set_domain(h["domain"].get<std::string>());
    req.set_dataset_name(h["dataset"]["name"].get<std::string>());
    return req;
  }

  static grpc::Status Check(const v1::CheckHolderRequest& req, v1::HolderCheck* out) {
    auto stub = stack_->OperatorClient();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub->CheckHolder(&ctx, req, out);
  }

  static std::string* dir_;
  static EmulatedStack* stack_;
  static KeyKeepingHolder* stranger_;
};

std::string* HolderCheckTest::dir_ = nullptr;
EmulatedStack* HolderCheckTest::stack_ = nullptr;
KeyKeepingHolder* HolderCheckTest::stranger_ = nullptr;

TEST_F(HolderCheckTest, AnAgentThatAnswersAsItselfAndAttestsPassesWithWhatWasVerified) {
  v1::CheckHolderRequest req = RequestFor(1);
  v1::HolderCheck got;
  grpc::Status s = Check(req, &got);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(got.name(), req.name());
  EXPECT_EQ(got.domain(), req.domain());
  EXPECT_EQ(got.dataset_name(), req.dataset_name());
  EXPECT_GT(got.dataset_bytes(), 0u);
  EXPECT_FALSE(got.dataset_format().empty());
  EXPECT_TRUE(got.has_training_policy());
  EXPECT_FALSE(got.attestation().format().empty());
  EXPECT_EQ(got.attestation().mrtd().size(), 96u);  // 48 bytes, hex
  EXPECT_EQ(got.attestation().rtmr_size(), 4);
  EXPECT_GT(got.attestation().verified_unix_ms(), 0);
  // Without a dataset name any dataset is accepted.
  req.clear_dataset_name();
  EXPECT_TRUE(Check(req, &got).ok());
}

TEST_F(HolderCheckTest, AnotherHoldersAgentAtTheEndpointIsUnreachableAsThisHolder) {
  v1::CheckHolderRequest req = RequestFor(0);
  req.set_name(RequestFor(1).name());  // holder 1's name at holder 0's agent
  v1::HolderCheck got;
  grpc::Status s = Check(req, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("holder '" + req.name() + "' unreachable"), std::string::npos)
      << s.error_message();
  // The orchestrator's paths stay in its log.
  EXPECT_EQ(s.error_message().find(stack_->dir()), std::string::npos) << s.error_message();
}

TEST_F(HolderCheckTest, AWrongDomainOrDatasetNamesTheFieldAndWhatTheAgentServes) {
  v1::CheckHolderRequest req = RequestFor(0);
  req.set_domain("td-elsewhere");
  v1::HolderCheck got;
  grpc::Status s = Check(req, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("domain: holder '" + req.name() + "' runs in TD '" +
                                   RequestFor(0).domain() + "', not 'td-elsewhere'"),
            std::string::npos)
      << s.error_message();
  req = RequestFor(0);
  req.set_dataset_name("other-data");
  s = Check(req, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("dataset.name: holder '" + req.name() + "' serves dataset '" +
                                   RequestFor(0).dataset_name() + "', not 'other-data'"),
            std::string::npos)
      << s.error_message();
}

TEST_F(HolderCheckTest, EvidenceOutsideThePolicyFailsTheCheckWithItsReason) {
  v1::CheckHolderRequest req;
  req.set_endpoint("unix:" + *dir_ + "/stranger.sock");
  req.set_name("stranger");
  req.set_domain("td-stranger");
  v1::HolderCheck got;
  grpc::Status s = Check(req, &got);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
              s.error_code() == grpc::StatusCode::UNAUTHENTICATED)
      << s.error_code() << " " << s.error_message();
  EXPECT_NE(s.error_message().find("holder 'stranger'"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("MRTD"), std::string::npos) << s.error_message();
}

TEST_F(HolderCheckTest, MalformedRequestsAreInvalidArguments) {
  v1::HolderCheck got;
  v1::CheckHolderRequest req = RequestFor(0);
  req.set_endpoint("relative/path");
  EXPECT_EQ(Check(req, &got).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req = RequestFor(0);
  req.set_name("Not A Name");
  EXPECT_EQ(Check(req, &got).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  req = RequestFor(0);
  req.clear_domain();
  grpc::Status s = Check(req, &got);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("domain"), std::string::npos) << s.error_message();
}

// The operator's CLI against the real orchestrator: what passes, and a
// check that fails with its exit code and the orchestrator's reason.
TEST_F(HolderCheckTest, TheCliChecksAHolderThroughTheOrchestrator) {
  auto run = [&](const std::vector<std::string>& extra, std::string* out) {
    std::vector<std::string> args = {"holders", "check"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunOperatorCli(*stack_, args, 60, out);
  };
  const v1::CheckHolderRequest req = RequestFor(0);
  std::string out;
  EXPECT_EQ(run({"--holder_endpoint=" + req.endpoint(), "--name=" + req.name(),
                 "--domain=" + req.domain(), "--dataset=" + req.dataset_name()},
                &out),
            0)
      << out;
  EXPECT_NE(out.find("holder " + req.name() + " answers in TD " + req.domain() +
                     ", serves dataset " + req.dataset_name()),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("MRTD"), std::string::npos) << out;
  EXPECT_EQ(run({"--holder_endpoint=" + req.endpoint(), "--name=" + req.name(),
                 "--domain=td-elsewhere"},
                &out),
            4)  // FAILED_PRECONDITION
      << out;
  EXPECT_NE(out.find("runs in TD '" + req.domain() + "', not 'td-elsewhere'"), std::string::npos)
      << out;
  EXPECT_EQ(run({"--holder_endpoint=" + req.endpoint(), "--name=" + req.name()}, &out), 2) << out;
  EXPECT_NE(out.find("holders check needs --domain"), std::string::npos) << out;
}

}  // namespace
}  // namespace gputravel
