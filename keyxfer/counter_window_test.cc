#include "keyxfer/counter_window.h"

#include "gtest/gtest.h"
#include "keyxfer/cc_channel.h"

namespace gputravel {
namespace {

TEST(CounterWindowTest, StartsAtTheEnginesNextCounter) {
  auto w = CounterWindowAt(17, 4);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->first, 17u);
  EXPECT_EQ(w->count, 4u);
}

TEST(CounterWindowTest, LastCounterIsUsableButNotPassed) {
  auto last = CounterWindowAt(kLastMessageCounter, 1);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->first, kLastMessageCounter);
  auto ends_on_last = CounterWindowAt(kLastMessageCounter - 9, 10);
  EXPECT_TRUE(ends_on_last.ok());
  auto passes = CounterWindowAt(kLastMessageCounter - 9, 11);
  EXPECT_EQ(passes.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(passes.status().message().find("fresh key exchange"), std::string::npos);
  // The engine's counter after exhaustion is past the 32-bit range.
  EXPECT_EQ(CounterWindowAt(uint64_t{kLastMessageCounter} + 1, 1).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(CounterWindowTest, EmptyWindowAndCounterZeroRefused) {
  EXPECT_EQ(CounterWindowAt(1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CounterWindowAt(0, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gputravel
