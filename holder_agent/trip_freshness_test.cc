#include "holder_agent/trip_freshness.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

TEST(TripFreshnessTest, PerOrchestratorAndGpuAndKeptAcrossARestart) {
  const std::string path = MakeTestDir("tf-") + "/freshness.json";
  {
    auto f = TripFreshness::Open(path);
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE((*f)->Accept("orch", "GPU-1", 7, "c1").ok());
    ASSERT_TRUE((*f)->Accept("orch", "GPU-2", 3, "c2").ok());
    ASSERT_TRUE((*f)->Accept("other-orch", "GPU-1", 1, "c9").ok());
    absl::Status again = (*f)->Accept("orch", "GPU-1", 7, "c1");
    EXPECT_EQ(again.code(), absl::StatusCode::kPermissionDenied) << again;
    EXPECT_NE(again.message().find("hand-off for trip 7 of campaign 'c1' is not fresh (trip 7 "
                                   "from orchestrator 'orch' on GPU 'GPU-1' was already accepted)"),
              std::string::npos)
        << again;
  }
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A restarted agent reads what was accepted.
  auto f = TripFreshness::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->Check("orch", "GPU-1", 6, "c1").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*f)->Check("orch", "GPU-1", 7, "c1").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE((*f)->Check("orch", "GPU-1", 8, "c1").ok());
  EXPECT_EQ((*f)->Check("orch", "GPU-2", 3, "c2").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE((*f)->Check("orch", "GPU-2", 4, "c2").ok());
  EXPECT_EQ((*f)->Check("other-orch", "GPU-1", 1, "c9").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE((*f)->Check("third-orch", "GPU-1", 1, "c1").ok());
  ASSERT_TRUE((*f)->Accept("orch", "GPU-1", 8, "c1").ok());
  auto g = TripFreshness::Open(path);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->Check("orch", "GPU-1", 8, "c1").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*g)->Check("orch", "GPU-2", 3, "c2").code(), absl::StatusCode::kPermissionDenied);
}

// A damaged record is not taken as "nothing accepted yet": the agent does
// not start.
TEST(TripFreshnessTest, DamagedRecordRefusedNamingTheFile) {
  const std::string dir = MakeTestDir("tf-");
  const std::string path = dir + "/freshness.json";
  for (const std::string& text :
       {std::string("{"), std::string("{\"version\": 1}"),
        std::string("{\"version\": 2, \"accepted\": []}"),
        std::string("{\"version\": 1, \"accepted\": [{\"gpu\": \"G\", \"trip\": 3}]}"),
        std::string("[]")}) {
    ASSERT_TRUE(WriteFile(path, text, 0600).ok());
    auto f = TripFreshness::Open(path);
    ASSERT_FALSE(f.ok()) << text;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss) << f.status();
    EXPECT_NE(f.status().message().find(path), std::string::npos) << f.status();
  }
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/elsewhere").c_str(), path.c_str()), 0);
  EXPECT_EQ(TripFreshness::Open(path).status().code(), absl::StatusCode::kDataLoss);
}

// A trip whose record cannot be written is not accepted.
TEST(TripFreshnessTest, UnwritableRecordAcceptsNothing) {
  const std::string path = MakeTestDir("tf-") + "/missing-dir/freshness.json";
  auto f = TripFreshness::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  absl::Status s = (*f)->Accept("orch", "GPU-1", 7, "c1");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
  EXPECT_TRUE((*f)->Check("orch", "GPU-1", 7, "c1").ok());
}

}  // namespace
}  // namespace gputravel
