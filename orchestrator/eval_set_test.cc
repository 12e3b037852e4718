#include "orchestrator/eval_set.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "holder_agent/dataset.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

std::string TempPath(const std::string& name) {
  return TestTmpDir() + "/" + name;
}

TEST(EvalSetTest, ReadsAnLlmcShardCappedAtTheMaximum) {
  std::vector<uint16_t> tokens(kMaxEvalTokens + 100);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i * 7);
  const std::string path = TempPath("eval.bin");
  ASSERT_TRUE(WriteLlmcShard(path, tokens.data(), tokens.size()).ok());
  auto got = LoadEvalTokens(path);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), kMaxEvalTokens);
  EXPECT_EQ((*got)[0], 0);
  EXPECT_EQ((*got)[1], 7);
  EXPECT_EQ(got->back(), static_cast<uint16_t>((kMaxEvalTokens - 1) * 7));
}

TEST(EvalSetTest, ErrorsNameTheFieldAndFile) {
  auto missing = LoadEvalTokens(TempPath("absent.bin"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("eval_tokens: "), absl::string_view::npos);
  EXPECT_NE(missing.status().message().find("absent.bin"), absl::string_view::npos);
  const std::string one = TempPath("one.raw");
  ASSERT_TRUE(WriteFile(one, std::string("\x01\x00", 2)).ok());
  auto short_set = LoadEvalTokens(one);
  ASSERT_FALSE(short_set.ok());
  EXPECT_NE(short_set.status().message().find("fewer than 2 tokens"), absl::string_view::npos)
      << short_set.status();
}

}  // namespace
}  // namespace gputravel
