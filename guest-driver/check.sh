#!/usr/bin/env bash
# CI checks of the LightIOV frontend (make test-extra): the 6.1 series applies without fuzz to
# pristine linux-source-6.1 files, both series and the module's source pass checkpatch --strict,
# and lightiov_nvme.ko builds without a warning against Debian's linux-headers.
# usage: check.sh WORKDIR CHECKPATCH   (WORKDIR caches the pristine files per source version)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=${1:?usage: check.sh WORKDIR CHECKPATCH}
checkpatch=${2:?usage: check.sh WORKDIR CHECKPATCH}
tarball=/usr/src/linux-source-6.1.tar.xz
failed=0

say() { printf '  CHECK   %s\n' "$*"; }
bad() {
	echo "guest-driver check: $*" >&2
	failed=1
}

mkdir -p "$work"
work=$(cd "$work" && pwd)
[ -r "$tarball" ] || { echo "guest-driver check: $tarball missing" >&2; exit 1; }
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || stat -c %s-%Y "$tarball")

# 1. The series on pristine copies of just the files it touches (one tar pass per version).
mapfile -t files < <(sed -n 's|^+++ b/||p' "$here"/patches/6.1/*.patch | sort -u)
pristine=$work/pristine-$srcver
if [ ! -f "$pristine/.complete" ]; then
	rm -rf "$pristine" && mkdir -p "$pristine"
	tar -C "$pristine" -xJf "$tarball" --strip-components=1 \
		"${files[@]/#/linux-source-6.1/}"
	touch "$pristine/.complete"
fi
tree=$work/apply
rm -rf "$tree" && cp -r "$pristine" "$tree"
for p in "$here"/patches/6.1/*.patch; do
	if ! out=$(patch -d "$tree" -p1 --forward --batch --fuzz=0 -i "$p" 2>&1); then
		bad "$(basename "$p") does not apply to linux-source-6.1 $srcver: $out"
	elif grep -q 'offset\|fuzz' <<<"$out"; then
		bad "$(basename "$p") applies only with offsets: $out"
	fi
done
# shellcheck disable=SC2012
[ $failed -eq 0 ] && say "patches/6.1: $(ls "$here"/patches/6.1/*.patch | wc -l) patches apply to linux-source-6.1 $srcver"

# 2. checkpatch --strict: both series, and the module as a file.
for p in "$here"/patches/6.1/*.patch "$here"/patches/mainline/*.patch; do
	[ -e "$p" ] || continue
	if ! out=$("$checkpatch" --strict --quiet "$p" 2>&1); then
		bad "checkpatch --strict ${p#"$here"/}:"$'\n'"$out"
	fi
done
if ! out=$("$checkpatch" --strict --quiet --no-tree --file "$here"/module/lightiov_nvme.c 2>&1); then
	bad "checkpatch --strict module/lightiov_nvme.c:"$'\n'"$out"
fi
[ $failed -eq 0 ] && say "patches/6.1, patches/mainline, module: checkpatch --strict clean"

# 4. install.sh into a staging root: the module and the persistence files, a module built for
# another kernel refused, --uninstall leaves nothing behind.
stage_install() {
	local ko=$1 kver=$2 stage=$work/stage out
	rm -rf "$stage" && mkdir -p "$stage/etc/initramfs-tools"
	if ! out=$(LIO_ROOT=$stage LIO_KVER=$kver "$here/install.sh" --ko "$ko" 2>&1); then
		bad "install.sh --ko (staged): $out"
		return
	fi
	for f in lib/modules/$kver/extra/lightiov_nvme.ko etc/modules-load.d/lightiov_nvme.conf \
		etc/udev/rules.d/60-lightiov-nvme.rules usr/local/sbin/lightiov-nvme-bind \
		etc/initramfs-tools/hooks/lightiov_nvme; do
		[ -s "$stage/$f" ] || bad "install.sh (staged) did not write $f"
	done
	if LIO_ROOT=$stage LIO_KVER=0.0.0-other "$here/install.sh" --ko "$ko" >/dev/null 2>&1; then
		bad "install.sh took a module built for $kver on kernel 0.0.0-other"
	fi
	LIO_ROOT=$stage LIO_KVER=$kver "$here/install.sh" --uninstall >/dev/null 2>&1 ||
		bad "install.sh --uninstall (staged) failed"
	if [ -n "$(find "$stage" -type f)" ]; then
		bad "install.sh --uninstall left $(find "$stage" -type f | tr '\n' ' ')"
	fi
	[ $failed -ne 0 ] || say "install.sh: staged install and --uninstall ($kver)"
}

# 3. The module against the distribution's headers (what install.sh does in a Debian guest).
# shellcheck disable=SC2012
kdir=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$kdir" ]; then
	bad "no /usr/src/linux-headers-*-amd64 (apt-get install linux-headers-amd64)"
else
	mod=$work/debian
	rm -rf "$mod" && mkdir -p "$mod"
	ln -s "$here"/module/lightiov_nvme.c "$here"/module/Kbuild "$here"/module/Makefile "$mod"/
	if ! make -C "$mod" KDIR="$kdir" >"$mod/build.log" 2>&1; then
		bad "lightiov_nvme.ko against $kdir failed:"$'\n'"$(tail -n 20 "$mod/build.log")"
	elif grep -E 'warning:|WARNING:' "$mod/build.log" >&2; then
		bad "lightiov_nvme.ko against $kdir: warnings"
	else
		say "lightiov_nvme.ko builds against $(basename "$kdir")"
		kver=$(tr '\000' '\n' <"$mod/lightiov_nvme.ko" | sed -n 's/^vermagic=//p' | cut -d' ' -f1)
		stage_install "$mod/lightiov_nvme.ko" "$kver"
	fi
fi
exit $failed
