#!/usr/bin/env bash
# Every test: installs what is missing, builds everything, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build //...
bazel test //... "$@"
# The demo itself is part of the suite: it must exit 0 (every trip verified).
bazel run --noshow_progress //:gputravel -- demo --json > /tmp/gputravel-demo.json
python3 -c 'import json,sys; r=json.load(open("/tmp/gputravel-demo.json")); sys.exit(0 if r["ok"] and len(r["trips"])==3 else 1)'
echo "demo: ok"
# The clang checks (docs/building.md, "Checks"): every target built by
# clang with the thread-safety analysis as errors; the small and medium
# tests under ASan+UBSan (the large ones, whole stacks of processes, are
# `tools/checks.sh asan`: under ASan they would take this run past an hour
# on two cores); the concurrent components under TSan; every fuzzer for 10 s.
SECONDS_EACH=10 ASAN_TEST_SIZES=small,medium bash tools/checks.sh
