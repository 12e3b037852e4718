#include "util/failpoint.h"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

void Touch(const std::string& path) {
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  fclose(f);
}

// "hold:DIR": an unarmed point passes; an armed one holds (its arm file
// renamed NAME.held) until the test removes NAME.held, then goes on, once.
TEST(FailpointTest, HoldWaitsWhileArmedAndGoesOnWhenReleased) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/hold";
  ASSERT_EQ(system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  // Read once, at the first call: set before any.
  ASSERT_EQ(setenv("GPUTRAVEL_FAILPOINT", ("hold:" + dir).c_str(), 1), 0);
  const std::string name = "after_commit:rekey";

  CrashPoint(name);  // unarmed: returns at once
  EXPECT_FALSE(Exists(dir + "/" + name + ".held"));

  Touch(dir + "/" + name);
  std::atomic<bool> returned{false};
  std::thread held([&] {
    CrashPoint("after_commit:scrub");  // another point: not held
    CrashPoint(name);
    returned = true;
  });
  const std::string held_file = dir + "/" + name + ".held";
  for (int i = 0; i < 2000 && !Exists(held_file); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(Exists(held_file)) << "the armed point never held";
  EXPECT_FALSE(Exists(dir + "/" + name)) << "the arm is used up";
  // Nothing marks "still holding": a short look for an early return.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned) << "returned while held";
  ASSERT_EQ(unlink(held_file.c_str()), 0);
  held.join();
  EXPECT_TRUE(returned);

  CrashPoint(name);  // the arm was used: passes
  EXPECT_FALSE(Exists(held_file));
  unsetenv("GPUTRAVEL_FAILPOINT");
}

}  // namespace
}  // namespace gputravel
