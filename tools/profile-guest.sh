#!/usr/bin/env bash
# Sums the samples of LVMM_PROFILE=FILE by guest kernel symbol:
#   tools/profile-guest.sh FILE VMLINUX [TOP]
# prints the TOP (default 40) symbols with their share of the samples; samples below the
# kernel's text (guest user space) are counted as "[user]".
#   tools/profile-guest.sh --callers SYMBOL FILE VMLINUX [TOP]
# for a profile taken with LVMM_PROFILE=FILE,HZ,stack: the samples in SYMBOL grouped by the
# functions that the kernel-text words on their stacks fall in (innermost first, each named once,
# up to 6): a guessing unwinder's view, stale words included, enough to tell callers apart.
set -euo pipefail
callers=
if [ "${1:-}" = --callers ]; then
	[ $# -ge 4 ] || { echo "usage: $0 --callers SYMBOL PROFILE VMLINUX [TOP]" >&2; exit 2; }
	callers=$2
	shift 2
fi
[ $# -ge 2 ] || { echo "usage: $0 [--callers SYMBOL] PROFILE VMLINUX [TOP]" >&2; exit 2; }
prof=$1 vmlinux=$2 top=${3:-40}
total=$(wc -l <"$prof")
[ "$total" -gt 0 ] || { echo "$prof: no samples" >&2; exit 1; }
# symbols ("S addr name") and addresses ("X addr sample word") merged in address order
# (fixed-width hex); word 0 is the RIP, the others the stack's words
symbolize() {
	{
		nm -n "$vmlinux" | awk 'NF == 3 { a = sprintf("%16s", $1); gsub(/ /, "0", a)
			print a, "S", ($2 ~ /^[tTwW]$/ && $3 != "_etext" && $3 != "_einittext" ? $3 : "[data]") }'
		awk -v all="$1" '{ for (k = 2; k <= (all ? NF : 2); k++) {
			a = sprintf("%16s", $k); gsub(/ /, "0", a); print a, "X", NR, k - 2 } }' "$prof"
	} | LC_ALL=C sort -k1,1 -k2,2 |
		awk '$2 == "S" { sym = $3; next }
		{ print $3, $4, ($1 < "ffff800000000000" ? "[user]" : (sym == "" ? "[unknown]" : sym)) }'
}
if [ -z "$callers" ]; then
	symbolize 0 | awk -v total="$total" '{ n[$3]++ }
		END { for (s in n) printf "%7d %5.1f%% %s\n", n[s], 100 * n[s] / total, s }' |
		sort -rn | head -n "$top"
	echo "$total samples"
	exit 0
fi
symbolize 1 | sort -k1,1n -k2,2n | awk -v target="$callers" '
	function flush() {
		if (cur != "" && hit) { n[chain == "" ? "(no kernel words on the stack)" : chain]++; tot++ }
	}
	$1 != cur { flush(); cur = $1; hit = 0; chain = ""; depth = 0; delete seen }
	$2 == 0 { hit = ($3 == target); next }
	hit && depth < 6 && $3 != target && $3 != "[data]" && !($3 in seen) {
		seen[$3] = 1; chain = chain (chain == "" ? "" : " < ") $3; depth++
	}
	END { flush(); for (c in n) printf "%7d %s\n", n[c], c; printf "%7d samples in %s\n", tot, target > "/dev/stderr" }' |
	sort -rn | head -n "$top"
