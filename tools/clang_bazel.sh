#!/usr/bin/env bash
# Bazel in the clang output base: the default output base's path with
# "_clang" appended, so its toolchain (clang-14, --config=clang and the
# sanitizer configs of .bazelrc) never replaces the default one's gcc.
#   tools/clang_bazel.sh test --config=asan //util/...
set -euo pipefail
cd "$(dirname "$0")/.."
exec bazel --output_base="$(bazel info output_base)_clang" "$@"
