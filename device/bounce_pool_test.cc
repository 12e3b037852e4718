#include "device/bounce_pool.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

class BouncePoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/dev/shm/bounce-pool-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ::rmdir(dir_.c_str()); }  // fails if a ring leaked

  static bool Exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }
  std::string dir_;
};

TEST_F(BouncePoolTest, SameGeometryReusesTheRingAndItsContent) {
  BouncePool pool(dir_);
  std::string path;
  {
    auto lease = pool.Acquire(4, 4096);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(lease->fresh());
    path = lease->ring()->path();
    lease->ring()->slot(3)[0] = 0x5a;
  }
  auto again = pool.Acquire(4, 4096);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->fresh());
  EXPECT_EQ(again->ring()->path(), path);
  EXPECT_EQ(again->ring()->slot(3)[0], 0x5a);  // the same mapping
  EXPECT_EQ(pool.created(), 1u);
}

TEST_F(BouncePoolTest, OtherGeometryReplacesTheKeptRing) {
  BouncePool pool(dir_);
  std::string first;
  {
    auto lease = pool.Acquire(4, 4096);
    ASSERT_TRUE(lease.ok()) << lease.status();
    first = lease->ring()->path();
  }
  auto lease = pool.Acquire(2, 8192);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(lease->fresh());
  EXPECT_EQ(lease->ring()->slots(), 2u);
  EXPECT_EQ(lease->ring()->slot_size(), 8192u);
  EXPECT_NE(lease->ring()->path(), first);
  EXPECT_FALSE(Exists(first)) << "the replaced ring must be removed";
  EXPECT_EQ(pool.created(), 2u);
}

TEST_F(BouncePoolTest, SecondLeaseWhileLentGetsAPrivateRingRemovedAfterUse) {
  BouncePool pool(dir_);
  auto a = pool.Acquire(4, 4096);
  ASSERT_TRUE(a.ok()) << a.status();
  std::string private_path;
  {
    auto b = pool.Acquire(4, 4096);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(b->fresh());
    EXPECT_NE(b->ring(), a->ring());
    private_path = b->ring()->path();
    EXPECT_TRUE(Exists(private_path));
  }
  EXPECT_FALSE(Exists(private_path));
  EXPECT_TRUE(Exists(a->ring()->path()));
  // The kept ring is lent until `a` ends; afterwards it is lent again.
  std::string kept = a->ring()->path();
  *a = BouncePool::Lease();
  auto c = pool.Acquire(4, 4096);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->fresh());
  EXPECT_EQ(c->ring()->path(), kept);
}

TEST_F(BouncePoolTest, RingIsPrivateToItsOwnerAndGoesWithThePool) {
  std::string path;
  {
    BouncePool pool(dir_);
    auto lease = pool.Acquire(1, 4096);
    ASSERT_TRUE(lease.ok()) << lease.status();
    path = lease->ring()->path();
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  EXPECT_FALSE(Exists(path));
}

TEST_F(BouncePoolTest, RemoveKeptRingRemovesTheFileEvenWhileLent) {
  BouncePool pool(dir_);
  std::string path;
  {
    auto lease = pool.Acquire(2, 4096);
    ASSERT_TRUE(lease.ok()) << lease.status();
    path = lease->ring()->path();
    pool.RemoveKeptRing();
    EXPECT_FALSE(Exists(path));
    lease->ring()->slot(1)[0] = 1;  // the write in progress keeps its mapping
  }
  // The next write gets a new ring, with a file the device can map.
  auto next = pool.Acquire(2, 4096);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->fresh());
  EXPECT_NE(next->ring()->path(), path);
  EXPECT_TRUE(Exists(next->ring()->path()));
  *next = BouncePool::Lease();
  pool.RemoveKeptRing();  // not lent: removed at once
  EXPECT_EQ(pool.created(), 2u);
}

TEST_F(BouncePoolTest, BadGeometryIsRefusedAndLeavesThePoolUsable) {
  BouncePool pool(dir_);
  auto bad = pool.Acquire(0, 4096);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  auto good = pool.Acquire(2, 4096);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(good->fresh());
}

TEST_F(BouncePoolTest, MissingDirectoryIsAnActionableError) {
  BouncePool pool(dir_ + "/missing");
  auto lease = pool.Acquire(2, 4096);
  ASSERT_FALSE(lease.ok());
  EXPECT_NE(lease.status().message().find("cannot create bounce buffer"),
            std::string::npos)
      << lease.status();
}

TEST_F(BouncePoolTest, ARestartedOwnerRemovesTheRingsOfItsKilledPredecessorOnly) {
  // A predecessor killed with its ring in place: a child that takes a ring
  // and leaves without running a destructor.
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    BouncePool* pool = new BouncePool(dir_, "h1");
    auto lease = pool->Acquire(2, 4096);
    ::_exit(lease.ok() ? 0 : 1);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  // A live holder whose name extends this one's, and an unrelated file.
  BouncePool neighbour(dir_, "h1-a");
  auto neighbour_ring = neighbour.Acquire(2, 4096);
  ASSERT_TRUE(neighbour_ring.ok()) << neighbour_ring.status();
  const std::string unrelated = dir_ + "/gputravel-bounce-h1-notaring";
  FILE* f = std::fopen(unrelated.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);

  BouncePool restarted(dir_, "h1");
  auto removed = restarted.RemoveOrphanedRings();
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_TRUE(Exists(neighbour_ring->ring()->path()));
  EXPECT_TRUE(Exists(unrelated));
  auto again = restarted.RemoveOrphanedRings();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 0);
  ::unlink(unrelated.c_str());
}

TEST_F(BouncePoolTest, OrphanSweepNeedsAnOwnerAndAReadableDirectory) {
  EXPECT_EQ(BouncePool(dir_).RemoveOrphanedRings().status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto missing = BouncePool(dir_ + "/missing", "h1").RemoveOrphanedRings();
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir_ + "/missing"), std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace gputravel
