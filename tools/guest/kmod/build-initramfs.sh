#!/usr/bin/env bash
# The initramfs of the lightiov.ko test guest: busybox-static, tools/guest/kmod/init as /init,
# the module and the static VM-side test program. The default test initramfs stays as it is.
# usage: build-initramfs.sh GEN_INIT_CPIO LIGHTIOV_KO TEST_PROGRAM OUT.cpio
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
gen=${1:?usage: build-initramfs.sh GEN_INIT_CPIO LIGHTIOV_KO TEST_PROGRAM OUT.cpio}
ko=${2:?usage}
prog=${3:?usage}
out=${4:?usage}
busybox=/bin/busybox

[ -x "$busybox" ] || {
	echo "kmod-initramfs: $busybox missing: install busybox-static" >&2
	exit 1
}
list=$(mktemp)
trap 'rm -f "$list" "$out.tmp"' EXIT
{
	echo "dir /dev 0755 0 0"
	echo "nod /dev/console 0600 0 0 c 5 1"
	echo "nod /dev/null 0666 0 0 c 1 3"
	for d in /proc /sys /etc /bin; do
		echo "dir $d 0755 0 0"
	done
	echo "dir /tmp 1777 0 0"
	echo "file /init $here/init 0755 0 0"
	echo "file /etc/fstab $here/../fstab 0644 0 0"
	echo "file /bin/busybox $busybox 0755 0 0"
	for applet in sh mount insmod rmmod dd poweroff; do
		echo "slink /bin/$applet busybox 0777 0 0"
	done
	echo "file /lightiov.ko $ko 0644 0 0"
	echo "file /bin/lio-kmod-test $prog 0755 0 0"
} >"$list"
"$gen" "$list" >"$out.tmp"
mv "$out.tmp" "$out"
printf '  GUEST   kmod initramfs %s (%s bytes)\n' "$out" "$(stat -c %s "$out")"
