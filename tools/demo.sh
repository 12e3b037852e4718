#!/usr/bin/env bash
# The demo: installs what is missing, builds, and runs one campaign on the
# emulated stack. Extra arguments go to `gputravel demo` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec bazel run --ui_event_filters=-info --noshow_progress //:gputravel -- demo "$@"
