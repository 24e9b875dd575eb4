#!/usr/bin/env bash
# Sums the samples of LVMM_PROFILE=FILE by guest kernel symbol:
#   tools/profile-guest.sh FILE VMLINUX [TOP]
# prints the TOP (default 40) symbols with their share of the samples; samples below the
# kernel's text (guest user space) are counted as "[user]".
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PROFILE VMLINUX [TOP]" >&2; exit 2; }
prof=$1 vmlinux=$2 top=${3:-40}
total=$(wc -l <"$prof")
[ "$total" -gt 0 ] || { echo "$prof: no samples" >&2; exit 1; }
# symbols ("S addr name") and samples ("X addr") merged in address order (fixed-width hex)
{
	nm -n "$vmlinux" | awk '$2 ~ /^[tTwW]$/ { a = sprintf("%16s", $1); gsub(/ /, "0", a); print a, "S", $3 }'
	awk '{ a = sprintf("%16s", $2); gsub(/ /, "0", a); print a, "X" }' "$prof"
} | LC_ALL=C sort -k1,1 -k2,2 |
	awk -v total="$total" '
	$2 == "S" { sym = $3; next }
	{ n[$1 < "ffff800000000000" ? "[user]" : (sym == "" ? "[unknown]" : sym)]++ }
	END { for (s in n) printf "%7d %5.1f%% %s\n", n[s], 100 * n[s] / total, s }' |
	sort -rn | head -n "$top"
echo "$total samples"
