#!/usr/bin/env bash
# Builds lvmm's test guest kernel: Debian's linux-source-6.1, tinyconfig + tools/guest/kernel.config,
# tools/guest/patches/*.patch, then the LightIOV frontend series guest-driver/patches/6.1/*.patch
# (the test kernel carries it: it leaves every other NVMe device alone, so it is the default).
# usage: build-kernel.sh OUTDIR  ->  OUTDIR/vmlinux, OUTDIR/bzImage
#
# Rebuilt only when the fragment, a patch, this script or the source package version changes
# (stamp files). The kernel's make output goes to OUTDIR/kernel-build.log; its tail is shown on
# failure.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build-kernel.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tarball=/usr/src/linux-source-6.1.tar.xz
fragment=$here/kernel.config
series=$here/../../guest-driver/patches/6.1
tree=$out/linux
log=$out/kernel-build.log
jobs=$(nproc)

step() { printf '  GUEST   %s\n' "$*"; }
die() {
	echo "build-kernel: $*" >&2
	exit 1
}
run_logged() {
	if ! "$@" >>"$log" 2>&1; then
		echo "build-kernel: '$*' failed; last lines of $log:" >&2
		tail -n 30 "$log" >&2
		exit 1
	fi
}

[ -r "$tarball" ] || die "$tarball missing: install linux-source-6.1 (tools/install-deps.sh)"
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || stat -c %s-%Y "$tarball")

# The source stamp covers what ends up in the tree; the build stamp adds the configuration.
src_stamp=$( (echo "$srcver" && cat "$here"/patches/*.patch "$series"/*.patch) | sha256sum |
	cut -c1-16)
build_stamp=$( (echo "$src_stamp" && cat "$fragment" "$0") | sha256sum | cut -c1-16)

if [ -f "$out/vmlinux" ] && [ "$(cat "$out/kernel.stamp" 2>/dev/null)" = "$build_stamp" ]; then
	step "kernel up to date ($out/vmlinux)"
	exit 0
fi
rm -f "$out/kernel.stamp"
: >"$log"
start=$(date +%s)

if [ "$(cat "$tree/.lvmm-src-stamp" 2>/dev/null)" != "$src_stamp" ]; then
	step "unpack linux-source-6.1 $srcver"
	rm -rf "$tree" "$out/linux-source-6.1"
	run_logged tar -C "$out" -xf "$tarball"
	mv "$out/linux-source-6.1" "$tree"
	for p in "$here"/patches/*.patch "$series"/*.patch; do
		step "patch $(basename "$p")"
		run_logged patch -d "$tree" -p1 --forward -i "$p"
	done
	echo "$src_stamp" >"$tree/.lvmm-src-stamp"
fi

step "configure (tinyconfig + $(basename "$fragment"))"
run_logged make -C "$tree" ARCH=x86_64 tinyconfig
run_logged "$tree/scripts/kconfig/merge_config.sh" -m -O "$tree" "$tree/.config" "$fragment"
run_logged make -C "$tree" ARCH=x86_64 olddefconfig

# Every line of the fragment must have survived olddefconfig (a dependency silently dropping an
# option would otherwise give a kernel that boots without, say, NVMe).
missing=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=*) want=$line ;;
	'# CONFIG_'*' is not set')
		opt=${line#\# }
		opt=${opt%% *}
		# "not set" is also satisfied by an option that does not exist in this version.
		if grep -q "^$opt=" "$tree/.config"; then
			echo "build-kernel: $opt: wanted off, got $(grep "^$opt=" "$tree/.config")" >&2
			missing=1
		fi
		continue
		;;
	*) continue ;;
	esac
	if ! grep -qx -- "$want" "$tree/.config"; then
		opt=${want%%=*}
		got=$(grep -E "^($opt=|# $opt is not set)" "$tree/.config" || echo "absent")
		echo "build-kernel: wanted $want, got $got" >&2
		missing=1
	fi
done <"$fragment"
[ $missing -eq 0 ] || die "configuration check failed (see above; fix $fragment)"
[ "$("$tree/scripts/config" --file "$tree/.config" -s BLK_DEV_NVME)" = y ] ||
	die "CONFIG_BLK_DEV_NVME not set after olddefconfig"

step "compile vmlinux and bzImage (make -j$jobs, log in $log)"
run_logged make -C "$tree" ARCH=x86_64 -j"$jobs" vmlinux bzImage
cp "$tree/vmlinux" "$out/vmlinux.tmp"
strip --strip-debug "$out/vmlinux.tmp"
mv "$out/vmlinux.tmp" "$out/vmlinux"
cp "$tree/arch/x86/boot/bzImage" "$out/bzImage"
cp "$tree/.config" "$out/kernel.config"
echo "$build_stamp" >"$out/kernel.stamp"
step "kernel built in $(($(date +%s) - start)) s: $out/vmlinux ($(stat -c %s "$out/vmlinux") bytes)"
