#include "orchestrator/checkpoint_seal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "util/files.h"
#include "util/test_dir.h"

namespace gputravel {
namespace {

TEST(CheckpointSealTest, KeyFileIsCreatedOnceAndPrivate) {
  const std::string key = MakeTestDir("cs-") + "/checkpoint.key";
  auto missing = CheckpointSeal::LoadOrCreate(key, /*may_create=*/false);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_NE(missing.status().message().find(key), std::string::npos);
  auto made = CheckpointSeal::LoadOrCreate(key, /*may_create=*/true);
  ASSERT_TRUE(made.ok()) << made.status();
  struct stat st;
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, static_cast<off_t>(kCheckpointKeyBytes));
  // The file is read again, not replaced: what one seals the other opens.
  auto again = CheckpointSeal::LoadOrCreate(key, /*may_create=*/true);
  ASSERT_TRUE(again.ok()) << again.status();
  auto sealed = made->Seal("c1", 3, "weights");
  ASSERT_TRUE(sealed.ok());
  auto opened = again->Open("c1", 3, *sealed);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, "weights");
}

TEST(CheckpointSealTest, KeyFileOthersMayReadOrOfTheWrongSizeIsRefused) {
  const std::string dir = MakeTestDir("cs-");
  const std::string key = dir + "/checkpoint.key";
  ASSERT_TRUE(WriteFile(key, std::string(kCheckpointKeyBytes, 'k'), 0600).ok());
  ASSERT_EQ(::chmod(key.c_str(), 0640), 0);
  auto loose = CheckpointSeal::LoadOrCreate(key, true);
  EXPECT_EQ(loose.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(loose.status().message().find("chmod 600 " + key), std::string::npos)
      << loose.status();
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);
  ASSERT_TRUE(WriteFile(key, "short", 0600).ok());
  auto shortk = CheckpointSeal::LoadOrCreate(key, true);
  EXPECT_EQ(shortk.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(shortk.status().message().find("holds 5 bytes"), std::string::npos)
      << shortk.status();
  // A link is not followed, even to a good key.
  ASSERT_TRUE(WriteFile(dir + "/real.key", std::string(kCheckpointKeyBytes, 'k'), 0600).ok());
  ASSERT_EQ(::symlink((dir + "/real.key").c_str(), (dir + "/link.key").c_str()), 0);
  EXPECT_FALSE(CheckpointSeal::LoadOrCreate(dir + "/link.key", true).ok());
}

// A key file of another user's is refused whatever its mode: its owner may
// read and rewrite it, so checkpoints sealed under it would be open to them.
// It is there if they could write its directory once, or a restore kept its
// owner.
TEST(CheckpointSealTest, KeyFileAnotherUserOwnsIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file away";
  const std::string key = MakeTestDir("cs-") + "/checkpoint.key";
  ASSERT_TRUE(WriteFile(key, std::string(kCheckpointKeyBytes, 'k'), 0600).ok());
  ASSERT_EQ(::chown(key.c_str(), 65534, 65534), 0);
  auto theirs = CheckpointSeal::LoadOrCreate(key, /*may_create=*/true);
  EXPECT_FALSE(theirs.ok()) << "checkpoint key file " << key << ", owned by uid 65534, was "
                            << "taken: its owner knows the key every checkpoint is sealed under";
}

// checkpoint_key_file may be outside state_dir. Whoever may write its
// directory could move the key aside (the orchestrator would then refuse to
// start, or make a new key on a database with no sealed checkpoint yet) or
// put back an older key file of this user's (say one that leaked), under
// which the next checkpoints would be sealed; every file is this user's, so
// no owner check sees it. A key in a directory group or others may write
// (no sticky bit) is refused, as state_dir is, and not created there either.
TEST(CheckpointSealTest, KeyFileInADirectoryOthersMayWriteIsRefused) {
  const std::string dir = MakeTestDir("cs-");
  const std::string key = dir + "/checkpoint.key";
  ASSERT_TRUE(WriteFile(key, std::string(kCheckpointKeyBytes, 'k'), 0600).ok());
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto loaded = CheckpointSeal::LoadOrCreate(key, /*may_create=*/true);
  EXPECT_FALSE(loaded.ok()) << "checkpoint key file " << key << " was taken from a directory "
                            << "anyone may write (mode 0777): any user may swap it for another "
                            << "file of this user's";
  ASSERT_EQ(::unlink(key.c_str()), 0);
  auto made = CheckpointSeal::LoadOrCreate(key, /*may_create=*/true);
  EXPECT_FALSE(made.ok()) << "a new checkpoint key was made in a directory anyone may write";
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
}

// The sealed bytes hide the checkpoint and open only for the campaign and
// trip they were sealed for, under the key they were sealed with.
TEST(CheckpointSealTest, SealedCheckpointOpensOnlyForItsCampaignTripAndKey) {
  const std::string dir = MakeTestDir("cs-");
  auto seal = *CheckpointSeal::LoadOrCreate(dir + "/a.key", true);
  auto other = *CheckpointSeal::LoadOrCreate(dir + "/b.key", true);
  const std::string plain = "CHECKPOINT-PLAINTEXT-0123456789";
  auto sealed = seal.Seal("c1", 7, plain);
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(sealed->find(plain), std::string::npos);
  EXPECT_EQ(static_cast<uint8_t>((*sealed)[0]), kCheckpointSealVersion);
  for (const auto& [campaign, trip] :
       std::vector<std::pair<std::string, uint64_t>>{{"c2", 7}, {"c1", 6}, {"c1", 8}}) {
    auto r = seal.Open(campaign, trip, *sealed);
    ASSERT_FALSE(r.ok()) << campaign << " " << trip;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find("campaign \"" + campaign + "\""), std::string::npos)
        << r.status();
    EXPECT_NE(r.status().message().find("swapped from another campaign or trip"),
              std::string::npos)
        << r.status();
  }
  auto wrong_key = other.Open("c1", 7, *sealed);
  EXPECT_EQ(wrong_key.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(wrong_key.status().message().find(dir + "/b.key"), std::string::npos);
  std::string flipped = *sealed;
  flipped[flipped.size() / 2] ^= 1;
  EXPECT_FALSE(seal.Open("c1", 7, flipped).ok());
  EXPECT_FALSE(seal.Open("c1", 7, plain).ok()) << "a clear checkpoint is not taken";
  EXPECT_EQ(*seal.Open("c1", 7, *sealed), plain);
}

}  // namespace
}  // namespace gputravel
