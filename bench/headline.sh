#!/usr/bin/env bash
# The seed's headline table (per run of the seed's training time, and of the
# built-in trainer's, measured on the same window) and its plot in one
# command (needs root):
#   bench/headline.sh [OUT_DIR] [-- headline_bench flags]
# writes OUT_DIR/headline.json, OUT_DIR/headline.txt and OUT_DIR/headline.png
# (default OUT_DIR: docs).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs}"
shift || true
[ "${1:-}" = "--" ] && shift
bazel build -c opt //bench:headline_bench
"$(bazel info -c opt bazel-bin 2>/dev/null)/bench/headline_bench" --json_out "$out/headline.json" "$@" | tee "$out/headline.txt"
/usr/bin/python3 bench/plot_headline.py "$out/headline.json" "$out/headline.png"
echo "plot: $out/headline.png"
