// Runs inside the real-kernel guest (run_scenario.sh RouteJournal): the
// route table's journal and fencing on a real ext4 file system, across a MUX
// killed with SIGKILL in the middle of its work, with the sysfs backend on
// the real kernel underneath.
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vfio_mux/real_kernel/guest_machine.h"
#include "vfio_mux/real_kernel/stand_in_sysfs.h"
#include "vfio_mux/route_table.h"
#include "vfio_mux/sysfs/sysfs_backend.h"

namespace gputravel {
namespace {

constexpr long kExt4Magic = 0xEF53;

class RouteJournal : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> bdf = FindPciFunction(kStandInVendor, kStandInDevice);
    ASSERT_TRUE(bdf.ok()) << bdf.status();
    bdf_ = *bdf;
    struct statfs fs;
    ASSERT_EQ(statfs(kDataDir, &fs), 0);
    ASSERT_EQ(fs.f_type, kExt4Magic) << kDataDir << " is not the ext4 test disk";
    dir_ = absl::StrCat(kDataDir, "/journal-", getpid());
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
  }

  // A MUX's backend and table, as the daemon opens them at start.
  std::unique_ptr<SysfsBackend> NewBackend() {
    SysfsBackendOptions o;
    o.sysfs.driver_timeout = absl::Seconds(20);
    o.gpus = {{"gpu0", bdf_}};
    o.domains = {"td-a", "td-b"};
    o.prepare_on_start = true;
    auto b = SysfsBackend::Create(o, std::make_shared<StandInSysfsFs>("/sys", std::set<std::string>{bdf_}));
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  absl::StatusOr<std::unique_ptr<RouteTable>> OpenTable(RoutingBackend* backend) {
    RouteTableOptions to;
    to.domains = {"td-a", "td-b"};
    return RouteTable::Open(backend, dir_ + "/state.json", dir_ + "/audit.log", to);
  }

  std::string bdf_, dir_;
};

TEST_F(RouteJournal, AKilledMuxComesBackWithItsRoutesAndFencingTokens) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The first MUX: routes twice, says so, and is killed while it runs.
    close(ready[0]);
    auto backend = NewBackend();
    if (backend == nullptr) _exit(2);
    auto table = OpenTable(backend.get());
    if (!table.ok()) _exit(3);
    if (!(*table)->RouteTo("gpu0", "td-a", 5).ok()) _exit(4);
    if (!(*table)->RouteTo("gpu0", "td-b", 7).ok()) _exit(5);
    if (write(ready[1], "k", 1) != 1) _exit(6);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the first MUX failed before routing";
  close(ready[0]);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(PciDriver(bdf_), "vfio-pci") << "the device stays on vfio-pci across a MUX crash";

  // A torn last line: the crash came in the middle of a journal write.
  {
    std::ofstream audit(dir_ + "/audit.log", std::ios::app);
    audit << "{\"action\":\"route\",\"from\":\"td-b\",\"gpu\":\"gpu0\",\"res";
  }

  // The second MUX: replays the journal past the snapshot Open wrote.
  auto backend = NewBackend();
  ASSERT_NE(backend, nullptr);
  {
    auto table = OpenTable(backend.get());
    ASSERT_TRUE(table.ok()) << table.status();
    auto r = (*table)->Get("gpu0");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->domain, "td-b");
    EXPECT_EQ(r->fencing_token, 7u);
    // The fencing token survived: an older one is refused, a newer one moves.
    auto stale = (*table)->RouteTo("gpu0", "td-a", 6);
    EXPECT_FALSE(stale.ok());
    auto moved = (*table)->RouteTo("gpu0", "td-a", 8);
    ASSERT_TRUE(moved.ok()) << moved.status();
    EXPECT_TRUE((*table)->Close().ok());
  }

  // The file system itself: unmounted and mounted again, the third MUX finds
  // the same table (the snapshot Close wrote, on disk).
  ASSERT_EQ(umount(kDataDir), 0) << "umount " << kDataDir << ": errno " << errno;
  ASSERT_EQ(mount("/dev/vda", kDataDir, "ext4", 0, nullptr), 0) << "errno " << errno;
  {
    auto table = OpenTable(backend.get());
    ASSERT_TRUE(table.ok()) << table.status();
    auto r = (*table)->Get("gpu0");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->domain, "td-a");
    EXPECT_EQ(r->fencing_token, 8u);
    EXPECT_FALSE((*table)->RouteTo("gpu0", "td-b", 7).ok());
    auto unrouted = (*table)->RouteTo("gpu0", "", 9);
    EXPECT_TRUE(unrouted.ok()) << unrouted.status();
    EXPECT_TRUE((*table)->Close().ok());
  }
  absl::Status s = backend->Release("gpu0");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(PciDriver(bdf_), "virtio-pci");
  EXPECT_EQ(PciAttr(bdf_, "reset_method"), "flr pm bus");
}

}  // namespace
}  // namespace gputravel
