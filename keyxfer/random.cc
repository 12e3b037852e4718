#include "keyxfer/random.h"

#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>

namespace gputravel {

void RandomBytes(uint8_t* out, size_t n) {
  if (n == 0) return;
  if (RAND_bytes(out, static_cast<int>(n)) != 1) {
    std::fprintf(stderr, "fatal: OpenSSL RAND_bytes failed\n");
    std::abort();
  }
}

std::string RandomString(size_t n) {
  std::string s(n, '\0');
  RandomBytes(reinterpret_cast<uint8_t*>(&s[0]), n);
  return s;
}

}  // namespace gputravel
