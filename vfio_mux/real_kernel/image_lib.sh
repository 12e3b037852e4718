# Shared by the real-kernel image builders (build_image.sh,
# build_libvirt_image.sh); sourced, not run. Each function fails the build
# with a message that says what to install or fix.

image_fail() {
  echo "real_kernel image: $*" >&2
  exit 1
}

# Prints the newest cloud kernel version installed whose modules are present.
cloud_kernel_version() {
  local kver="" v cand
  for v in /boot/vmlinuz-*-cloud-amd64; do
    [ -e "$v" ] || continue
    cand=${v#/boot/vmlinuz-}
    [ -d "/lib/modules/$cand" ] || continue
    if [ -z "$kver" ] || [ "$(printf '%s\n%s\n' "$kver" "$cand" | sort -V | tail -1)" = "$cand" ]; then
      kver=$cand
    fi
  done
  [ -n "$kver" ] || image_fail "no cloud kernel in /boot with modules in /lib/modules: install linux-image-cloud-amd64 (tools/setup.sh does)"
  [ -r "/boot/vmlinuz-$kver" ] || image_fail "/boot/vmlinuz-$kver is not readable by $(id -un): run as root, or make it readable (chmod a+r)"
  echo "$kver"
}

# copy_modules ROOT KVER MODULE...: the modules with their dependencies at
# their /lib/modules paths under ROOT, modules.order and modules.builtin*,
# and depmod's index.
copy_modules() {
  local root=$1 kver=$2 m deps f
  shift 2
  local moddir=/lib/modules/$kver
  mkdir -p "$root$moddir"
  for m in "$@"; do
    deps=$(modprobe -S "$kver" --show-depends "$m" 2>/dev/null | awk '$1=="insmod"{print $2}') ||
      image_fail "modprobe --show-depends $m for $kver failed"
    [ -n "$deps" ] || image_fail "module $m not found for kernel $kver"
    for f in $deps; do
      mkdir -p "$root$(dirname "$f")"
      cp "$f" "$root$f"
    done
  done
  cp "$moddir"/modules.order "$moddir"/modules.builtin* "$root$moddir/"
  depmod -b "$root" "$kver"
}

# copy_binaries ROOT DIR BINARY...: each binary into ROOT/DIR, and every
# shared library it loads at the path ldd names, unless ROOT has it already.
copy_binaries() {
  local root=$1 dir=$2 b lib
  shift 2
  mkdir -p "$root$dir"
  for b in "$@"; do
    install -m 0755 "$b" "$root$dir/$(basename "$b")"
    while read -r lib; do
      [ -n "$lib" ] || continue
      mkdir -p "$root$(dirname "$lib")"
      [ -e "$root$lib" ] || cp -L "$lib" "$root$lib"
    done < <(ldd "$b" | awk '/=> \//{print $3} /^\t\//{print $1}')
  done
}
