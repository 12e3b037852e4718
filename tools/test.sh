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
# The clang checks (thread-safety analysis, the suite under ASan+UBSan, the
# concurrent components under TSan, every fuzzer for a bounded time) are
# `bash tools/checks.sh`, not run here: on a 2-core machine they would take
# the whole run past an hour (docs/building.md, "Checks").
