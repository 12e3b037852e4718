#ifndef GPUTRAVEL_CLI_REQUEST_ID_H_
#define GPUTRAVEL_CLI_REQUEST_ID_H_

#include <string>

namespace gputravel::cli {

// A random version-4 UUID ("xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx",
// lowercase), the default idempotency token of `create`. The bytes come from
// the project's random source (keyxfer/random.h, OpenSSL's DRBG).
std::string RandomRequestId();

}  // namespace gputravel::cli

#endif  // GPUTRAVEL_CLI_REQUEST_ID_H_
