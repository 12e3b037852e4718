#include "keyxfer/counter_window.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

class CounterWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gputravel-cw-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/counters";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_, path_;
};

TEST_F(CounterWindowTest, WindowsNeverOverlap) {
  auto a = *CounterWindowAllocator::Open(path_, "k1");
  auto w1 = *a.Allocate(10);
  auto w2 = *a.Allocate(5);
  EXPECT_EQ(w1.first, 1u);
  EXPECT_EQ(w2.first, w1.first + w1.count);
}

TEST_F(CounterWindowTest, CrashBetweenAllocationAndUseNeverReuses) {
  CounterWindow handed;
  {
    auto a = *CounterWindowAllocator::Open(path_, "k1");
    handed = *a.Allocate(100);
    // Simulated crash: the allocator vanishes before the window is used or
    // anything else is recorded.
  }
  auto b = *CounterWindowAllocator::Open(path_, "k1");
  auto next = *b.Allocate(1);
  EXPECT_GE(next.first, handed.first + handed.count);
}

TEST_F(CounterWindowTest, ExhaustionRefusedClearly) {
  auto a = *CounterWindowAllocator::Open(path_, "k1");
  ASSERT_TRUE(a.Allocate(0xFFFFFFF0u).ok());
  auto st = a.Allocate(100);
  EXPECT_EQ(st.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.status().message().find("re-key"), std::string::npos);
  EXPECT_TRUE(a.Allocate(15).ok());  // exactly the last counters still usable
  EXPECT_FALSE(a.Allocate(1).ok());
}

TEST_F(CounterWindowTest, StateOfAnotherKeyRefused) {
  { auto a = *CounterWindowAllocator::Open(path_, "k1"); (void)a.Allocate(3); }
  EXPECT_EQ(CounterWindowAllocator::Open(path_, "k2").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(CounterWindowTest, CorruptStateRefused) {
  std::ofstream(path_) << "garbage";
  EXPECT_EQ(CounterWindowAllocator::Open(path_, "k1").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(CounterWindowTest, ZeroSizedWindowRefused) {
  auto a = *CounterWindowAllocator::Open(path_, "k1");
  EXPECT_FALSE(a.Allocate(0).ok());
}

}  // namespace
}  // namespace gputravel
