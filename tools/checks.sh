#!/usr/bin/env bash
# The clang checks, in the clang output base (tools/clang_bazel.sh), each
# timed (docs/building.md, "Checks"):
#   asan   every target built with clang-14: the thread-safety analysis of
#          the ABSL_GUARDED_BY annotations as errors; every test under
#          AddressSanitizer (leaks included) and UndefinedBehaviorSanitizer.
#   tsan   the concurrent components' tests under ThreadSanitizer.
#   fuzz   every fuzzer for SECONDS_EACH seconds (tools/fuzz.sh).
#
#   tools/checks.sh               # all three
#   tools/checks.sh tsan fuzz     # some
#   ASAN_TEST_SIZES=small,medium tools/checks.sh   # what CI runs
#                                 # (tools/test.sh): every target still
#                                 # built, only those tests run under ASan
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
B=tools/clang_bazel.sh
export SECONDS_EACH="${SECONDS_EACH:-30}"

# Not built or run under the sanitizers: the QEMU guests of
# vfio_mux/real_kernel (tag real_kernel). Their images are built per output
# base from the host's kernel and, for libvirt, a Debian root file system
# made by mmdebstrap from Debian's archive (minutes, network); the host code
# they drive is what the gcc suite already runs in them, and its logic is
# unit-tested here under the sanitizers. Their guest programs are still
# compiled (the thread-safety analysis covers them).
NO_GUESTS=(
  -//vfio_mux/real_kernel/...
  //vfio_mux/real_kernel:real_kernel_guest
  //vfio_mux/real_kernel:libvirt_guest
)

# The concurrent components under TSan, in process: the emulated GPU (copy
# engines, sessions, bounce pool), the holder's copy-engine writer (over the
# device's gRPC stream), the campaign engine's trip runner and state store,
# and the MUX's route table. Not under TSan: the tests of gRPC services
# (device_layer_test, h2d_stream_test, holder_service_test, mux_service_test)
# and of the whole stack as processes (//tests:e2e_test,
# external_trainer_test). Debian's gRPC is not built with TSan, so what it
# hands between its threads (a request to a handler, a response back to the
# caller) is unordered for TSan and every such hand-off is reported; the
# stack's deadlines are also sized for uninstrumented daemons.
TSAN_TESTS=(
  //device:emulated_gpu_test
  //device:copy_engine_test
  //device:bounce_pool_test
  //holder_agent:dataset_source_test
  //orchestrator:trip_runner_test
  //orchestrator:state_store_test
  //vfio_mux:route_table_test
)

step() {
  local name="$1"
  shift
  local t0=$SECONDS
  echo "checks: $name ..." >&2
  "$@"
  echo "checks: $name: ok in $((SECONDS - t0)) s" >&2
}

run_asan() {
  local sizes=()
  [[ -n "${ASAN_TEST_SIZES:-}" ]] && sizes=(--test_size_filters="$ASAN_TEST_SIZES")
  "$B" test --keep_going --config=asan "${sizes[@]}" -- //... "${NO_GUESTS[@]}"
}

run_tsan() {
  "$B" test --keep_going --config=tsan -- "${TSAN_TESTS[@]}"
}

run_fuzz() {
  bash tools/fuzz.sh
}

parts=("$@")
[[ ${#parts[@]} -eq 0 ]] && parts=(asan tsan fuzz)
for p in "${parts[@]}"; do
  case "$p" in
    asan) step "asan (clang -Wthread-safety, ASan+UBSan suite)" run_asan ;;
    tsan) step "tsan (concurrent components)" run_tsan ;;
    fuzz) step "fuzz (${SECONDS_EACH} s per fuzzer)" run_fuzz ;;
    *) echo "checks: unknown part '$p' (asan, tsan, fuzz)" >&2; exit 2 ;;
  esac
done
