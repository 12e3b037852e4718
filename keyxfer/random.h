#ifndef GPUTRAVEL_KEYXFER_RANDOM_H_
#define GPUTRAVEL_KEYXFER_RANDOM_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace gputravel {

// Cryptographically secure random bytes (OpenSSL RAND_bytes). Aborts if the
// DRBG fails: continuing without randomness would silently break nonces.
void RandomBytes(uint8_t* out, size_t n);
std::string RandomString(size_t n);

}  // namespace gputravel

#endif  // GPUTRAVEL_KEYXFER_RANDOM_H_
