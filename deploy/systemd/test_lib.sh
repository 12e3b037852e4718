# Sourced by deploy/systemd's shell tests: where their files are, and a
# failure count.

# find_file PATH: PATH (relative to deploy/systemd, or ../examples/NAME) in
# Bazel's runfiles, or beside the test script when run by hand.
find_file() {
  local rel=$1 c
  for c in "${TEST_SRCDIR:-}/${TEST_WORKSPACE:-gputravel}/deploy/systemd/$rel" \
           "$(dirname "$0")/$rel"; do
    if [[ -f "$c" ]]; then echo "$c"; return 0; fi
  done
  echo "$rel not found" >&2
  return 1
}

FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
