#include "trainer/synthetic_corpus.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(SyntheticCorpusTest, SameSeedSameStream) {
  EXPECT_EQ(GenerateCorpus(3, 10000), GenerateCorpus(3, 10000));
  // A shorter stream is a prefix of a longer one.
  std::vector<uint16_t> a = GenerateCorpus(3, 100), b = GenerateCorpus(3, 1000);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
}

TEST(SyntheticCorpusTest, DifferentSeedsDifferentStreams) {
  EXPECT_NE(GenerateCorpus(1, 1000), GenerateCorpus(2, 1000));
}

TEST(SyntheticCorpusTest, LengthAndRange) {
  for (uint32_t vocab : {2u, 512u, 50257u, 65536u}) {
    std::vector<uint16_t> c = GenerateCorpus(5, 20000, vocab);
    ASSERT_EQ(c.size(), 20000u);
    EXPECT_LT(*std::max_element(c.begin(), c.end()), vocab == 65536u ? 65536u : vocab);
  }
  EXPECT_TRUE(GenerateCorpus(5, 0).empty());
}

TEST(SyntheticCorpusTest, FollowsTheFixedChainForEverySeed) {
  for (uint64_t seed : {1u, 2u, 1000u}) {
    std::vector<uint16_t> c = GenerateCorpus(seed, 100000);
    size_t first = 0, any = 0;
    for (size_t i = 0; i + 1 < c.size(); ++i) {
      for (int k = 0; k < 4; ++k) {
        if (c[i + 1] == CorpusSuccessor(c[i], k)) {
          any++;
          if (k == 0) first++;
          break;
        }
      }
    }
    const double n = c.size() - 1;
    // 96% of transitions go to a likely successor, half to the first.
    EXPECT_GT(any / n, 0.95) << "seed " << seed;
    EXPECT_NEAR(first / n, 0.50, 0.02) << "seed " << seed;
  }
}

}  // namespace
}  // namespace gputravel
