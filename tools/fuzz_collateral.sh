#!/usr/bin/env bash
# Fuzzes the TDX collateral parsers (keyxfer/tdx/collateral.cc, tcb_info.cc,
# pck_extensions.cc) with libFuzzer, ASan and UBSan, like tools/fuzz_quote.sh.
# Needs Debian's clang-14, libabsl-dev, libssl-dev and nlohmann-json3-dev.
#
#   tools/fuzz_collateral.sh                 # 200,000 runs
#   RUNS=2000000 tools/fuzz_collateral.sh    # more
#
# A crash leaves crash-* in $WORK; copy it into keyxfer/tdx/testdata/
# collateral_fuzz_corpus/ once fixed, so
# //keyxfer/tdx:collateral_fuzzer_replay_test keeps it.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-200000}"
WORK="${WORK:-/tmp/gputravel-fuzz-collateral}"
CXX="${CXX:-clang++-14}"

mkdir -p "$WORK/corpus"
cp keyxfer/tdx/testdata/collateral_fuzz_corpus/* "$WORK/corpus/"

ABSL_LIBS="$(pkg-config --libs absl_status absl_statusor absl_str_format \
  absl_strings absl_time)"

echo "building $WORK/collateral_fuzzer with $CXX" >&2
# shellcheck disable=SC2086  # ABSL_LIBS is a list of flags
"$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. keyxfer/tdx/collateral.cc keyxfer/tdx/tcb_info.cc \
  keyxfer/tdx/pck_extensions.cc keyxfer/tdx/openssl_util.cc \
  keyxfer/tdx/hex.cc keyxfer/tdx/collateral_fuzzer.cc \
  $ABSL_LIBS -lssl -lcrypto -o "$WORK/collateral_fuzzer"

echo "running $RUNS executions" >&2
set +e
"$WORK/collateral_fuzzer" -runs="$RUNS" -max_len=32768 -print_final_stats=1 \
  -artifact_prefix="$WORK/" "$WORK/corpus" 2>&1 | tee "$WORK/fuzz.log"
rc=${PIPESTATUS[0]}
set -e

execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/fuzz.log")"
if [[ $rc -eq 0 ]]; then
  echo "fuzz_collateral: ${execs:-?} executions, no crash (corpus: $WORK/corpus)"
else
  echo "fuzz_collateral: FAILED (exit $rc) after ${execs:-?} executions;" \
    "artifacts in $WORK" >&2
fi
exit "$rc"
