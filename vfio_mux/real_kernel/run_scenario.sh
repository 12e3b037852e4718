#!/usr/bin/env bash
# One real-kernel scenario, one boot: QEMU (TCG, no KVM needed) with an
# emulated Intel IOMMU boots Debian's cloud kernel with the image
# build_image.sh made, the guest runs the scenario's GoogleTest suite against
# the real kernel, and its results come back over the second serial port as
# this test's results (XML_OUTPUT_FILE) and exit code. A machine that cannot
# run QEMU fails the test with the reason; nothing is skipped.
#
# With ROOTFS (the libvirt scenarios: build_libvirt_image.sh), the guest gets
# more memory and a second vCPU, boots the same kernel and initramfs, and
# switches to ROOTFS (attached read-only: writes go to a temporary overlay),
# where libvirtd runs and the tests of libvirt_guest nest VMs.
#
# Usage: run_scenario.sh SCENARIO VMLINUZ INITRD [ROOTFS]
set -uo pipefail

scenario=$1; kernel=$2; initrd=$3; rootfs=${4:-}
work=${TEST_TMPDIR:-$(mktemp -d)}

fail() {
  echo "real_kernel $scenario: FAILED: $*" >&2
  exit 1
}

qemu=$(command -v qemu-system-x86_64) ||
  fail "qemu-system-x86_64 not found: install qemu-system-x86 (tools/setup.sh does)"
mke2fs=$(PATH="$PATH:/sbin:/usr/sbin" command -v mke2fs) ||
  fail "mke2fs not found: install e2fsprogs (tools/setup.sh does)"
[ -r "$kernel" ] && [ -r "$initrd" ] || fail "boot image $kernel / $initrd missing"
if [ -n "$rootfs" ]; then
  [ -r "$rootfs" ] || fail "root file system image $rootfs missing"
  timeout_s=${REAL_KERNEL_TIMEOUT_S:-600}
  machine=(-m 2048 -smp 2)
  # After the test disk, so that the guest names it vdb.
  rootdisk=(-drive "file=$rootfs,format=raw,if=none,id=d1,snapshot=on" -device virtio-blk-pci,drive=d1)
  append="gt.root=/dev/vdb gt.binary=libvirt_guest"
else
  timeout_s=${REAL_KERNEL_TIMEOUT_S:-240}
  machine=(-m 512 -smp 1)
  rootdisk=()
  append=""
fi

disk=$work/data.img
rm -f "$disk"
truncate -s 64M "$disk" && "$mke2fs" -q -t ext4 -F "$disk" ||
  fail "making the ext4 test disk $disk failed"

console=$work/console.log
results=$work/results.txt
rm -f "$console" "$results"
start=$(date +%s.%N)
# The machine guest_machine.h describes. x-speed/x-width on the root ports:
# without them a bus reset fails ("Data Link Layer Link Active not set").
timeout --kill-after=10 "$timeout_s" "$qemu" \
  -machine q35,kernel-irqchip=split -accel tcg -cpu max "${machine[@]}" \
  -nodefaults -display none -monitor none -no-reboot \
  -device intel-iommu,intremap=on,caching-mode=on \
  -device pcie-root-port,id=rp1,chassis=1,slot=1,x-speed=2_5,x-width=1 \
  -device pcie-root-port,id=rp2,chassis=2,slot=2,x-speed=2_5,x-width=1 \
  -netdev user,id=n0,restrict=on -device virtio-net-pci,bus=rp1,disable-legacy=on,netdev=n0 \
  -device pcie-pci-bridge,id=br1,bus=rp2 \
  -device edu,bus=br1,addr=1 \
  -netdev user,id=n1,restrict=on -device virtio-net-pci,bus=br1,addr=2,netdev=n1 \
  -drive file="$disk",format=raw,if=none,id=d0 -device virtio-blk-pci,drive=d0 \
  "${rootdisk[@]}" \
  -kernel "$kernel" -initrd "$initrd" \
  -append "console=ttyS0 intel_iommu=on no_timer_check quiet loglevel=3 panic=-1 gt.scenario=$scenario $append" \
  -serial "file:$console" -serial "file:$results" > "$work/qemu.out" 2>&1
qemu_rc=$?
elapsed=$(echo "$(date +%s.%N) $start" | awk '{printf "%.1f", $1 - $2}')

echo "=== guest console ($scenario) ==="
tr -d '\r' < "$console" 2>/dev/null
echo "=== end of guest console ==="
echo "real_kernel $scenario: boot and run took ${elapsed}s (qemu exit $qemu_rc)"

if [ $qemu_rc -eq 124 ] || [ $qemu_rc -eq 137 ]; then
  fail "the guest did not power off within ${timeout_s}s (console above)"
fi
if [ $qemu_rc -ne 0 ]; then
  cat "$work/qemu.out" >&2
  fail "qemu-system-x86_64 exited $qemu_rc: it cannot run here (its output above)"
fi
[ -s "$results" ] || fail "the guest wrote no results (console above)"
tr -d '\r' < "$results" > "$results.clean"
if grep -q '^GT-ERROR' "$results.clean"; then
  fail "guest: $(sed -n 's/^GT-ERROR //p' "$results.clean")"
fi
kernel_version=$(sed -n 's/^GT-KERNEL //p' "$results.clean")
echo "real_kernel $scenario: guest kernel $kernel_version"
rc=$(sed -n 's/^GT-EXIT //p' "$results.clean")
[ -n "$rc" ] || fail "the guest stopped before reporting an exit code (console above)"
sed -n '/^GT-XML-BEGIN$/,/^GT-XML-END$/p' "$results.clean" | sed '1d;$d' > "$work/result.xml"
[ -s "$work/result.xml" ] || fail "the guest tests wrote no XML report (exit $rc)"
tests=$(grep -o '<testsuites [^>]*tests="[0-9]*"' "$work/result.xml" | sed 's/.*tests="\([0-9]*\)"/\1/')
[ -n "$tests" ] && [ "$tests" -gt 0 ] || fail "no guest test matched scenario $scenario"
if [ -n "${XML_OUTPUT_FILE:-}" ]; then
  cp "$work/result.xml" "$XML_OUTPUT_FILE"
fi
[ "$rc" = 0 ] || fail "$(grep -c '<failure' "$work/result.xml") guest assertion(s) failed (console above)"
echo "real_kernel $scenario: $tests guest tests passed"
