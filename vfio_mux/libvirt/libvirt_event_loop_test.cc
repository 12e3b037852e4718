#include "vfio_mux/libvirt/libvirt_event_loop.h"

#include <libvirt/libvirt.h>

#include "gtest/gtest.h"

namespace gputravel {
namespace {

TEST(LibvirtEventLoopTest, StartsOnceAndConnectionsCanSubscribe) {
  ASSERT_TRUE(EnsureLibvirtEventLoop().ok());
  ASSERT_TRUE(EnsureLibvirtEventLoop().ok());  // idempotent
  virConnectPtr conn = virConnectOpen("test:///default");
  ASSERT_NE(conn, nullptr);
  // Event registration fails without a registered loop implementation.
  int id = virConnectDomainEventRegisterAny(
      conn, nullptr, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
      VIR_DOMAIN_EVENT_CALLBACK(
          +[](virConnectPtr, virDomainPtr, const char*, void*) { return 0; }),
      nullptr, nullptr);
  EXPECT_GE(id, 0);
  if (id >= 0) {
    EXPECT_EQ(virConnectDomainEventDeregisterAny(conn, id), 0);
  }
  virConnectClose(conn);
}

}  // namespace
}  // namespace gputravel
