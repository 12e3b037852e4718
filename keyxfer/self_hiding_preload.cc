// A hostile LD_PRELOAD library for attestation_environment_test: the code
// the environment check of a TDX daemon (CheckMeasurableEnvironment in
// keyxfer/attestation_config.cc) is meant to keep out. The dynamic loader
// runs its constructor before the daemon's main, so by the time the daemon
// reads its environment the library can have removed the variable that
// loaded it. With GT_PRELOAD_HIDE set it does exactly that; without, it
// does nothing (the control case: a preload that stays visible).
#include <stdlib.h>

__attribute__((constructor)) static void HideFromTheEnvironment() {
  if (::getenv("GT_PRELOAD_HIDE") != nullptr) ::unsetenv("LD_PRELOAD");
}
