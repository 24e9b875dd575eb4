#!/usr/bin/env bash
# Builds what make bench-linux boots: OUT.cpio, the test guest's /init and busybox with the fio
# script as /lvmm-tests/fio.sh and the dynamic loader; and OUT.cpio's sibling OUT-fio.img, a
# read-only ext4 disk with fio from Debian's package (the host's /usr/bin/fio), every shared
# library it loads and the SysV shm shim fio needs on this kernel (fio-shm.c). fio and its 65
# libraries (84 MB) are not in the cpio itself: the test kernel unpacks an initramfs of that size
# for many minutes on kvm_pvm (instruction emulation), while a disk pages in only what fio touches.
# usage: build-bench-initramfs.sh GEN_INIT_CPIO OUT.cpio
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
guest=$here/../guest
gen=${1:?usage: build-bench-initramfs.sh GEN_INIT_CPIO OUT.cpio}
out=${2:?usage: build-bench-initramfs.sh GEN_INIT_CPIO OUT.cpio}
img=${out%.cpio}-fio.img
busybox=/bin/busybox
fio=/usr/bin/fio
for f in "$busybox" "$fio" "$gen" /usr/sbin/mke2fs; do
	[ -x "$f" ] || { echo "build-bench-initramfs: $f missing (busybox-static, fio, e2fsprogs, make guest)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$out.tmp" "$img.tmp"' EXIT
root=$tmp/root
mkdir -p "$root/usr/bin" "$root/lib"
cc -O2 -std=gnu11 -Wall -Wextra -Werror -shared -fPIC -o "$root/lib/fio-shm.so" \
	"$here/fio-shm.c"
cp "$fio" "$root/usr/bin/fio"
# every library ldd resolves, at the path the loader would find it under /opt
loader=
for l in $(ldd "$fio" | awk '/=> \// {print $3} /^[[:space:]]*\/[^ ]*ld-linux/ {print $1}'); do
	case $l in
	*/ld-linux*) loader=$l ;;
	*)
		mkdir -p "$root$(dirname "$l")"
		cp -L "$l" "$root$l"
		;;
	esac
done
[ -n "$loader" ] || { echo "build-bench-initramfs: no dynamic loader in ldd $fio" >&2; exit 1; }
kib=$(du -sk "$root" | cut -f1)
/usr/sbin/mke2fs -q -t ext4 -O ^has_journal -L lvmm-fio -d "$root" "$img.tmp" \
	"$((kib * 5 / 4 + 8192))k"
mv "$img.tmp" "$img"

{
	echo "dir /dev 0755 0 0"
	echo "nod /dev/console 0600 0 0 c 5 1"
	echo "nod /dev/null 0666 0 0 c 1 3"
	for d in /proc /sys /etc /bin /lvmm-tests /opt "$(dirname "$loader")"; do
		echo "dir $d 0755 0 0"
	done
	echo "dir /tmp 1777 0 0"
	echo "file /init $guest/init 0755 0 0"
	echo "file /etc/fstab $guest/fstab 0644 0 0"
	echo "file /bin/busybox $busybox 0755 0 0"
	for applet in sh mount poweroff reboot sleep; do
		echo "slink /bin/$applet busybox 0777 0 0"
	done
	echo "file /lvmm-tests/fio.sh $here/linux-fio.sh 0644 0 0"
	echo "file $loader $(readlink -f "$loader") 0755 0 0"
} >"$tmp/list"
"$gen" "$tmp/list" >"$out.tmp"
mv "$out.tmp" "$out"
printf '  BENCH   %s (%s bytes), %s (%s KiB: %s)\n' "$out" "$(stat -c %s "$out")" "$img" \
	"$kib" "$("$fio" --version)"
