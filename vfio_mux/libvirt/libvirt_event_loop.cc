#include "vfio_mux/libvirt/libvirt_event_loop.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gputravel {
namespace {

void QuietErrorHandler(void* /*opaque*/, virErrorPtr /*error*/) {}

absl::Status StartLoop() {
  if (virInitialize() < 0) {
    return absl::InternalError(
        "libvirt: virInitialize failed; is libvirt0 installed correctly?");
  }
  virSetErrorFunc(nullptr, QuietErrorHandler);
  if (virEventRegisterDefaultImpl() < 0) {
    virErrorPtr e = virGetLastError();
    return absl::InternalError(absl::StrCat(
        "libvirt: cannot register the default event loop: ",
        e != nullptr && e->message != nullptr ? e->message : "unknown error"));
  }
  // The loop lives as long as the process: libvirt offers no way to
  // unregister it, and connections opened later depend on it.
  std::thread([]() {
    for (;;) {
      if (virEventRunDefaultImpl() < 0) absl::SleepFor(absl::Milliseconds(100));
    }
  }).detach();
  return absl::OkStatus();
}

}  // namespace

absl::Status EnsureLibvirtEventLoop() {
  static std::once_flag once;
  static absl::Status* status = nullptr;
  std::call_once(once, []() { status = new absl::Status(StartLoop()); });
  return *status;
}

}  // namespace gputravel
