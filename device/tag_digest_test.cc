#include "device/tag_digest.h"

#include "gtest/gtest.h"
#include "keyxfer/aes_gcm.h"

namespace gputravel {
namespace {

TEST(TagDigestTest, SameTagsSameDigestOtherTagsOther) {
  const uint8_t a[kGcmTagSize] = {1}, b[kGcmTagSize] = {2};
  TagDigest d1, d2, d3;
  d1.Add(a);
  d2.Add(a);
  d3.Add(b);
  auto x = d1.Final(), y = d2.Final(), z = d3.Final();
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  EXPECT_EQ(x->size(), 32u);
  EXPECT_EQ(*x, *y);
  EXPECT_NE(*x, *z);
}

// Two digests whose hashing failed must not compare equal as two empty
// strings: the failure is an error.
TEST(TagDigestTest, FailedHashingIsAnErrorNotAnEmptyDigest) {
  const uint8_t a[kGcmTagSize] = {1};
  TagDigest d;
  d.Add(a);
  d.FailForTest();
  EXPECT_EQ(d.Final().status().code(), absl::StatusCode::kInternal);
}

TEST(TagDigestTest, SecondFinalRefused) {
  TagDigest d;
  ASSERT_TRUE(d.Final().ok());
  EXPECT_FALSE(d.Final().ok());
}

}  // namespace
}  // namespace gputravel
