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

# 3. The module against the distribution's headers (what install.sh does in a Debian guest).
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
	fi
fi
exit $failed
