#!/usr/bin/env bash
# make test: runs every suite, also after one failed, and sums the test cases of all of them. Each
# suite's runner (tests/run.sh, tests/fuzz-short.sh) appends "LABEL PASSED FAILED SKIPPED" to
# $LVMM_TEST_TOTALS; a suite that failed before reporting (a build error) counts as one failed
# case. The last line is "N passed, N failed, N skipped" over all suites.
# usage: tests/run-suites.sh TOTALS_FILE MAKE SUITE...
set -u
totals=$1
mk=$2
shift 2
export LVMM_TEST_TOTALS=$totals
: >"$totals"
st=0
for s in "$@"; do
	before=$(wc -l <"$totals")
	if ! $mk --no-print-directory "$s"; then
		st=1
		[ "$(wc -l <"$totals")" -eq "$before" ] && echo "$s 0 1 0" >>"$totals"
	fi
done
echo "== make test: per suite (passed failed skipped)"
cat "$totals"
awk '{ p += $2; f += $3; s += $4 } END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' \
	"$totals"
exit $st
