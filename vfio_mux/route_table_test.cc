#include "vfio_mux/route_table.h"

#include <stdlib.h>

#include "gtest/gtest.h"
#include "util/files.h"

namespace gputravel {
namespace {

// Records moves; fails on demand.
class FakeBackend : public RoutingBackend {
 public:
  std::string Name() const override { return "fake"; }
  absl::StatusOr<std::vector<GpuDevice>> ListGpus() override {
    return std::vector<GpuDevice>{{"gpu0", "", "", ""}};
  }
  absl::Status Move(const std::string& gpu, const std::string& from,
                    const std::string& to) override {
    if (fail) return absl::UnavailableError("backend down");
    moves.push_back(from + ">" + to);
    return absl::OkStatus();
  }
  absl::Status Reset(const std::string&) override {
    ++resets;
    return absl::OkStatus();
  }
  std::vector<std::string> moves;
  int resets = 0;
  bool fail = false;
};

class RouteTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gputravel-rt-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { (void)system(("rm -rf " + dir_).c_str()); }
  std::unique_ptr<RouteTable> Open() {
    return *RouteTable::Open(&backend_, dir_ + "/state.json", dir_ + "/audit.log");
  }
  std::string dir_;
  FakeBackend backend_;
};

TEST_F(RouteTableTest, RoutesAndReportsOwner) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  ASSERT_TRUE(t->RouteTo("gpu0", "orch", 1).ok());  // same token: route back
  EXPECT_EQ(backend_.moves, (std::vector<std::string>{">holder-a", "holder-a>orch"}));
}

TEST_F(RouteTableTest, StaleTokenRefused) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 5).ok());
  auto st = t->RouteTo("gpu0", "holder-b", 4);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.status().message().find("stale fencing token 4"), std::string::npos);
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  EXPECT_FALSE(t->Reset("gpu0", 3).ok());
}

TEST_F(RouteTableTest, RestartRemembersOwnerAndToken) {
  {
    auto t = Open();
    ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 9).ok());
  }
  auto t = Open();
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 9u);
  EXPECT_FALSE(t->RouteTo("gpu0", "orch", 8).ok());
}

TEST_F(RouteTableTest, EveryAttemptIsAudited) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 2).ok());
  (void)t->RouteTo("gpu0", "holder-b", 1);
  auto log = *ReadFile(dir_ + "/audit.log");
  EXPECT_NE(log.find("\"to\":\"holder-a\""), std::string::npos);
  EXPECT_NE(log.find("stale fencing token 1"), std::string::npos);
}

TEST_F(RouteTableTest, BackendFailureLeavesRouteUnchanged) {
  auto t = Open();
  ASSERT_TRUE(t->RouteTo("gpu0", "holder-a", 1).ok());
  backend_.fail = true;
  EXPECT_FALSE(t->RouteTo("gpu0", "holder-b", 2).ok());
  EXPECT_EQ(t->Get("gpu0")->domain, "holder-a");
  EXPECT_EQ(t->Get("gpu0")->fencing_token, 1u);
}

TEST_F(RouteTableTest, UnknownGpuNamed) {
  auto t = Open();
  auto st = t->RouteTo("gpu9", "x", 1);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.status().message().find("gpu0"), std::string::npos);
}

TEST_F(RouteTableTest, CorruptStateRefused) {
  ASSERT_TRUE(WriteFile(dir_ + "/state.json", "{not json").ok());
  EXPECT_EQ(RouteTable::Open(&backend_, dir_ + "/state.json", dir_ + "/audit.log")
                .status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gputravel
