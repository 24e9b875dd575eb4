#!/usr/bin/env bash
# Fetches the stock Debian cloud kernel (the versioned package linux-image-cloud-amd64 depends on)
# and extracts its uncompressed vmlinux. usage: fetch-debian-kernel.sh OUTDIR EXTRACT_VMLINUX
#
# Proves lvmm boots an unmodified distribution kernel; far too slow to boot on kvm_pvm hosts for
# CI (docs/design.md section 5). Re-downloads only when the package version changes.
set -euo pipefail

out=${1:?usage: fetch-debian-kernel.sh OUTDIR EXTRACT_VMLINUX}
extract=$(cd "$(dirname "${2:?usage: fetch-debian-kernel.sh OUTDIR EXTRACT_VMLINUX}")" &&
	pwd)/$(basename "$2")
mkdir -p "$out"
out=$(cd "$out" && pwd)

step() { printf '  GUEST   %s\n' "$*"; }
die() {
	echo "fetch-debian-kernel: $*" >&2
	exit 1
}

meta=linux-image-cloud-amd64
find_pkg() {
	apt-cache depends "$meta" 2>/dev/null |
		sed -n 's/^ *Depends: \(linux-image-6\.1\.[^ ]*-cloud-amd64\)$/\1/p' | head -n 1
}
pkg=$(find_pkg)
if [ -z "$pkg" ]; then
	step "apt-get update (package lists do not know $meta)"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -q >/dev/null
	pkg=$(find_pkg)
fi
[ -n "$pkg" ] || die "$meta: no linux-image-6.1.*-cloud-amd64 dependency in the package lists"
ver=$(apt-cache policy "$pkg" | sed -n 's/^ *Candidate: //p')

if [ -f "$out/vmlinux" ] && [ "$(cat "$out/stamp" 2>/dev/null)" = "$pkg $ver" ]; then
	step "Debian kernel up to date ($pkg $ver, $out/vmlinux)"
	exit 0
fi
rm -rf "$out/root" "$out"/*.deb "$out/stamp"
step "apt-get download $pkg $ver"
sandbox=()
[ "$(id -u)" -ne 0 ] || sandbox=(-o APT::Sandbox::User=root)
(cd "$out" && apt-get download -q "${sandbox[@]}" "$pkg" >/dev/null) || die "apt-get download $pkg failed"
step "dpkg -x $(basename "$out"/*.deb)"
dpkg -x "$out"/*.deb "$out/root"
bz=$(find "$out/root/boot" -name "vmlinuz-*" 2>/dev/null | head -n 1)
[ -n "$bz" ] || die "$pkg: no /boot/vmlinuz-* in the package"
"$extract" "$bz" "$out/vmlinux"
cp "$bz" "$out/bzImage"
echo "$pkg $ver" >"$out/stamp"
step "Debian kernel: $out/vmlinux"
