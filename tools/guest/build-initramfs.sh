#!/usr/bin/env bash
# Builds the test guest's initramfs: an uncompressed newc cpio with busybox-static, /init and the
# /init test scripts. usage: build-initramfs.sh KERNEL_TREE OUT.cpio
#
# The archive comes from a file list through the kernel's usr/gen_init_cpio, so owners and the
# /dev/console node are right without root privileges. Uncompressed on purpose: decompressing in
# an emulated guest kernel costs far more than copying (docs/design.md section 5).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tree=${1:?usage: build-initramfs.sh KERNEL_TREE OUT.cpio}
out=${2:?usage: build-initramfs.sh KERNEL_TREE OUT.cpio}
busybox=/bin/busybox

[ -x "$busybox" ] || {
	echo "build-initramfs: $busybox missing: install busybox-static" >&2
	exit 1
}
gen=$(dirname "$out")/gen_init_cpio
if [ ! -x "$gen" ] || [ "$gen" -ot "$tree/usr/gen_init_cpio.c" ]; then
	cc -O2 -o "$gen" "$tree/usr/gen_init_cpio.c"
fi

list=$(mktemp)
trap 'rm -f "$list" "$out.tmp"' EXIT
{
	echo "dir /dev 0755 0 0"
	echo "nod /dev/console 0600 0 0 c 5 1"
	echo "nod /dev/null 0666 0 0 c 1 3"
	for d in /proc /sys /etc /bin /lvmm-tests; do
		echo "dir $d 0755 0 0"
	done
	echo "dir /tmp 1777 0 0"
	echo "file /init $here/init 0755 0 0"
	echo "file /etc/fstab $here/fstab 0644 0 0"
	echo "file /bin/busybox $busybox 0755 0 0"
	# Only what /init runs: each cpio entry costs the emulated kernel ~0.1 s to unpack. The
	# interactive shell (lvmm.shell=1) installs the other applets at run time.
	for applet in sh mount poweroff reboot; do
		echo "slink /bin/$applet busybox 0777 0 0"
	done
	for t in "$here"/tests/*.sh; do
		[ -e "$t" ] && echo "file /lvmm-tests/$(basename "$t") $t 0644 0 0"
	done
} >"$list"

"$gen" "$list" >"$out.tmp"
mv "$out.tmp" "$out"
printf '  GUEST   initramfs %s (%s bytes)\n' "$out" "$(stat -c %s "$out")"
