#!/bin/sh
# Builds the ext4 root image of the Linux user-side test: busybox-static, nvme-cli and fio from
# the host's Debian packages with exactly the shared libraries ldd lists, a given /init, no root.
#
# usage: rootfs.sh IMAGE INIT_SCRIPT [SIZE_MB]
# Device nodes are made with debugfs (no mknod privilege needed); /init mounts devtmpfs over /dev.
set -eu

img=${1:?usage: rootfs.sh IMAGE INIT_SCRIPT [SIZE_MB]}
init=${2:?usage: rootfs.sh IMAGE INIT_SCRIPT [SIZE_MB]}
size_mb=${3:-384}
bins="/usr/sbin/nvme /usr/bin/fio"

for b in /bin/busybox $bins; do
	if [ ! -x "$b" ]; then
		echo "user-rootfs: $b missing (install busybox-static, nvme-cli, fio)" >&2
		exit 1
	fi
done

root=$(mktemp -d "${TMPDIR:-/tmp}/lvmm-user-root-XXXXXX")
trap 'rm -rf "$root"' EXIT

mkdir -p "$root/bin" "$root/usr/bin" "$root/usr/sbin" "$root/dev" "$root/proc" "$root/sys" \
	"$root/tmp" "$root/etc"
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
for b in $bins; do
	cp -L "$b" "$root$b"
done

# Every library at the path the loader resolved on the host, so the guest needs no ld.so.cache
# lookup beyond the default directories (Debian's multiarch dirs are in the loader's built-in
# list; libceph-common lives in a private dir reached through RUNPATH).
libs=$(for b in $bins; do ldd "$b"; done |
	awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
for l in $libs; do
	mkdir -p "$root$(dirname "$l")"
	cp -L "$l" "$root$l"
done
# The host's cache lists the same paths, so the loader finds every library without a search.
if [ -e /etc/ld.so.cache ]; then
	cp /etc/ld.so.cache "$root/etc/ld.so.cache"
fi

# The test kernel has no System V IPC, which fio's job table needs: /init preloads this shim.
here=$(dirname "$0")
mkdir -p "$root/usr/lib"
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Werror -Wno-unused-parameter -fPIC -shared \
	-o "$root/usr/lib/lvmm-shm-shim.so" "$here/shm-shim.c"

cp "$init" "$root/init"
chmod 0755 "$root/init"
cat >"$root/etc/fstab" <<'FSTAB'
proc     /proc proc     defaults 0 0
sysfs    /sys  sysfs    defaults 0 0
devtmpfs /dev  devtmpfs defaults 0 0
tmpfs    /tmp  tmpfs    defaults 0 0
FSTAB

rm -f "$img"
mkfs.ext4 -q -F -d "$root" "$img" "${size_mb}M" >/dev/null
# The kernel opens /dev/console for init before any devtmpfs mount.
printf 'cd /dev\nmknod console c 5 1\nsif console mode 020600\nmknod null c 1 3\nsif null mode 020666\n' |
	debugfs -w -f - "$img" >/dev/null 2>&1
