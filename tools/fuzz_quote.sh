#!/usr/bin/env bash
# Fuzzes the TDX quote parser (keyxfer/tdx/quote.cc) with libFuzzer, ASan and
# UBSan. Outside Bazel on purpose: the Bazel toolchain is gcc, which has no
# libFuzzer. Needs Debian's clang-14 and libabsl-dev.
#
#   tools/fuzz_quote.sh                 # 1,000,000 runs
#   RUNS=10000000 tools/fuzz_quote.sh   # more
#   WORK=/tmp/fq tools/fuzz_quote.sh    # keep corpus and artifacts there
#
# A crash leaves crash-* in $WORK; copy it into keyxfer/tdx/testdata/
# fuzz_corpus/ once fixed, so //keyxfer/tdx:quote_fuzzer_replay_test keeps it.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-1000000}"
WORK="${WORK:-/tmp/gputravel-fuzz-quote}"
CXX="${CXX:-clang++-14}"

mkdir -p "$WORK/corpus"
cp keyxfer/tdx/testdata/fuzz_corpus/* "$WORK/corpus/"

# Link flags for the absl pieces quote.cc uses, from Debian's .pc files.
ABSL_LIBS="$(pkg-config --libs absl_status absl_statusor absl_str_format \
  absl_strings)"

echo "building $WORK/quote_fuzzer with $CXX" >&2
# shellcheck disable=SC2086  # ABSL_LIBS is a list of flags
"$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I. keyxfer/tdx/quote.cc keyxfer/tdx/quote_fuzzer.cc \
  $ABSL_LIBS -o "$WORK/quote_fuzzer"

echo "running $RUNS executions" >&2
set +e
"$WORK/quote_fuzzer" -runs="$RUNS" -max_len=8192 -print_final_stats=1 \
  -artifact_prefix="$WORK/" "$WORK/corpus" 2>&1 | tee "$WORK/fuzz.log"
rc=${PIPESTATUS[0]}
set -e

execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/fuzz.log")"
if [[ $rc -eq 0 ]]; then
  echo "fuzz_quote: ${execs:-?} executions, no crash (corpus: $WORK/corpus)"
else
  echo "fuzz_quote: FAILED (exit $rc) after ${execs:-?} executions;" \
    "artifacts in $WORK" >&2
fi
exit "$rc"
