#!/usr/bin/env bash
# Builds fuzzers (tools/fuzzer.bzl) with clang-14, libFuzzer, ASan and UBSan
# (--config=asan, in the clang output base: tools/clang_bazel.sh) and runs
# each over its corpus, one after the other. Needs Debian's clang-14 and
# libclang-rt-14-dev.
#
#   tools/fuzz.sh                              # every fuzzer, 60 s each
#   tools/fuzz.sh handoff_fuzzer dataset_fuzzer    # some, by name
#   SECONDS_EACH=30 tools/fuzz.sh              # another time limit
#   RUNS=10000000 tools/fuzz.sh quote_fuzzer   # a number of executions
#   WORK=/tmp/f tools/fuzz.sh                  # keep corpora and logs there
#
# New inputs go to $WORK/NAME/corpus (the checked-in corpus is only read);
# a crash leaves $WORK/NAME/crash-* and fails the script. Once the bug is
# fixed, copy the input into the fuzzer's corpus (its corpus= tag) so
# NAME_replay_test keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
WORK="${WORK:-/tmp/gputravel-fuzz}"
SECONDS_EACH="${SECONDS_EACH:-60}"
RUNS="${RUNS:-}"
B=tools/clang_bazel.sh

# Every fuzzer as "name label max_len corpus", from its BUILD file's tags.
mapfile -t FUZZERS < <("$B" query --noshow_progress \
  'attr(tags, "\bfuzzer\b", //...)' --output=build 2>/dev/null | python3 -c '
import re, sys
for block in re.findall(r"cc_binary\(\n(.*?)\n\)", sys.stdin.read(), re.S):
    name = re.search(r"name = \"(\w+)_bin\"", block).group(1)
    tags = dict(t.split("=", 1) for t in re.findall(r"\"(\w+=[^\"]*)\"", block))
    package = tags["corpus"].split("/testdata/")[0]
    print(name, "//%s:%s_bin" % (package, name), tags["max_len"], tags["corpus"])
')
if [[ ${#FUZZERS[@]} -eq 0 ]]; then
  echo "fuzz: no fuzzer found (bazel query failed?)" >&2
  exit 1
fi

selected=()
for f in "${FUZZERS[@]}"; do
  read -r name _ <<< "$f"
  if [[ $# -eq 0 ]] || [[ " $* " == *" $name "* ]]; then selected+=("$f"); fi
done
if [[ ${#selected[@]} -eq 0 ]]; then
  echo "fuzz: no fuzzer named $*; there are: $(printf '%s\n' "${FUZZERS[@]}" | cut -d' ' -f1 | tr '\n' ' ')" >&2
  exit 1
fi

labels=()
for f in "${selected[@]}"; do read -r _ label _ <<< "$f"; labels+=("$label"); done
"$B" build --noshow_progress --config=asan "${labels[@]}"
BIN="$("$B" info --config=asan bazel-bin 2>/dev/null)"

if [[ -n "$RUNS" ]]; then LIMIT=(-runs="$RUNS"); else LIMIT=(-max_total_time="$SECONDS_EACH"); fi
failed=0
for f in "${selected[@]}"; do
  read -r name label max_len corpus <<< "$f"
  dir="$WORK/$name"
  mkdir -p "$dir/corpus"
  bin="$BIN/${label#//}"; bin="${bin/://}"
  echo "fuzz: $name (${LIMIT[*]}, corpus $corpus)" >&2
  set +e
  "$bin" "${LIMIT[@]}" -max_len="$max_len" -print_final_stats=1 -detect_leaks=1 \
    -artifact_prefix="$dir/" "$dir/corpus" "$corpus" > "$dir/fuzz.log" 2>&1
  rc=$?
  set -e
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/fuzz.log")"
  secs="$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$dir/fuzz.log")"
  if [[ $rc -eq 0 ]]; then
    echo "fuzz: $name: ${execs:-?} executions in ${secs:-?} s, no crash"
  else
    echo "fuzz: $name FAILED (exit $rc) after ${execs:-?} executions; log and input in $dir:" >&2
    tail -40 "$dir/fuzz.log" >&2
    failed=1
  fi
done
exit "$failed"
