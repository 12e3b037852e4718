#ifndef GPUTRAVEL_VFIO_MUX_LIBVIRT_LIBVIRT_EVENT_LOOP_H_
#define GPUTRAVEL_VFIO_MUX_LIBVIRT_LIBVIRT_EVENT_LOOP_H_

#include "absl/status/status.h"

namespace gputravel {

// Registers libvirt's default event loop and runs it on a background thread,
// once per process (later calls return the first call's result). Must run
// before the virConnectOpen whose domain events (DEVICE_REMOVED) and
// keepalives are wanted: libvirt binds a connection to the event loop that
// exists when it is opened. Also stops libvirt from printing every error to
// stderr; callers report errors through absl::Status instead.
absl::Status EnsureLibvirtEventLoop();

}  // namespace gputravel

#endif  // GPUTRAVEL_VFIO_MUX_LIBVIRT_LIBVIRT_EVENT_LOOP_H_
