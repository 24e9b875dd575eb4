#!/usr/bin/env bash
# Builds the test guest's root file system: busybox-static, /init and the /init test scripts,
# either as an initramfs (OUT.cpio: an uncompressed newc cpio) or as a read-only ext4 disk image
# (OUT.img, for root=/dev/vda on a virtio-blk disk: docs/boot.md). Both from one file list.
# usage: build-initramfs.sh KERNEL_TREE OUT.cpio|OUT.img
#
# The archive comes from the list through the kernel's usr/gen_init_cpio, so owners and the
# /dev/console node are right without root privileges. Uncompressed on purpose: decompressing in
# an emulated guest kernel costs far more than copying (docs/design.md section 5). The image
# comes from the same list through mke2fs -d and debugfs (the device nodes), also without root
# privileges; its /etc/fstab mounts a tmpfs on /tmp as well.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tree=${1:?usage: build-initramfs.sh KERNEL_TREE OUT.cpio|OUT.img}
out=${2:?usage: build-initramfs.sh KERNEL_TREE OUT.cpio|OUT.img}
busybox=/bin/busybox

[ -x "$busybox" ] || {
	echo "build-initramfs: $busybox missing: install busybox-static" >&2
	exit 1
}
list=$(mktemp)
stage=$(mktemp -d)
trap 'rm -rf "$list" "$stage" "$out.tmp"' EXIT
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

case $out in
*.img)
	# The list's entries as a directory tree; device nodes as debugfs commands (the kernel opens
	# /dev/console for init before /init mounts devtmpfs over /dev).
	nodes=""
	while read -r kind path a b _ type major minor; do
		case $kind in
		dir) mkdir -p "$stage$path" && chmod "$a" "$stage$path" ;;
		file) cp "$a" "$stage$path" && chmod "$b" "$stage$path" ;;
		slink) ln -s "$a" "$stage$path" ;;
		nod)
			nodes+="cd ${path%/*}"$'\n'"mknod ${path##*/} $type $major $minor"$'\n'
			nodes+="sif ${path##*/} mode 020${a#0}"$'\n'
			;;
		*) echo "build-initramfs: unknown list entry '$kind'" >&2 && exit 1 ;;
		esac
	done <"$list"
	{
		cat "$here/fstab"
		echo "tmpfs    /tmp  tmpfs    defaults 0 0"
	} >"$stage/etc/fstab"
	# 8 MiB: busybox and the scripts with room for the tests' own files; no journal (read-only).
	truncate -s 8M "$out.tmp"
	mke2fs -q -F -t ext4 -O ^has_journal -L lvmm-guest -E root_owner=0:0 -d "$stage" "$out.tmp"
	printf '%s' "$nodes" | debugfs -w -f - "$out.tmp" >/dev/null 2>&1
	mv "$out.tmp" "$out"
	printf '  GUEST   root disk image %s (%s bytes)\n' "$out" "$(stat -c %s "$out")"
	;;
*)
	gen=$(dirname "$out")/gen_init_cpio
	if [ ! -x "$gen" ] || [ "$gen" -ot "$tree/usr/gen_init_cpio.c" ]; then
		cc -O2 -o "$gen" "$tree/usr/gen_init_cpio.c"
	fi
	"$gen" "$list" >"$out.tmp"
	mv "$out.tmp" "$out"
	printf '  GUEST   initramfs %s (%s bytes)\n' "$out" "$(stat -c %s "$out")"
	;;
esac
