#include "keyxfer/tdx/testdata.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace gputravel::tdx::testing {

std::string ReadTestFile(absl::string_view name) {
  std::string path = absl::StrCat("keyxfer/tdx/testdata/", name);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open test data %s (run under bazel test)\n",
                 path.c_str());
    std::abort();
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string RealQuote() { return ReadTestFile("tdx_quote_v4_cos113.dat"); }

std::string RootCaPem() { return ReadTestFile("intel_sgx_root_ca.pem"); }

absl::Time RealQuoteValidTime() {
  return absl::FromCivil(absl::CivilSecond(2025, 1, 1, 0, 0, 0),
                         absl::UTCTimeZone());
}

std::string DcapQuote() { return ReadTestFile("dcap/tdx_quote.dat"); }
std::string DcapQuoteCollateral() {
  return ReadTestFile("dcap/tdx_quote_collateral.json");
}
std::string DcapOutdatedQuote() {
  return ReadTestFile("dcap/tdx_quote_outdated.dat");
}
std::string DcapOutdatedQuoteCollateral() {
  return ReadTestFile("dcap/tdx_quote_outdated_collateral.json");
}

absl::Time DcapQuoteValidTime() {
  return absl::FromCivil(absl::CivilSecond(2025, 7, 1, 0, 0, 0),
                         absl::UTCTimeZone());
}

absl::Time DcapOutdatedQuoteValidTime() {
  return absl::FromCivil(absl::CivilSecond(2026, 3, 1, 0, 0, 0),
                         absl::UTCTimeZone());
}

}  // namespace gputravel::tdx::testing
