#!/usr/bin/env bash
# make test: runs every suite, also after one failed, and sums the test cases of all of them. Each
# suite's runner (tests/run.sh, tests/fuzz-short.sh) appends "LABEL PASSED FAILED SKIPPED" to
# $LVMM_TEST_TOTALS; a suite that fails without a failed case reported (a build error, a hooked
# script) counts one failed case, one that passes without any report one passed case. The last
# line is "N passed, N failed, N skipped" over all suites.
# usage: tests/run-suites.sh TOTALS_FILE MAKE SUITE...
set -u
totals=$1
mk=$2
shift 2
export LVMM_TEST_TOTALS=$totals
: >"$totals"
st=0
times=""
for s in "$@"; do
	before=$(wc -l <"$totals")
	start=$SECONDS
	$mk --no-print-directory "$s"
	rc=$?
	times="$times $s=$((SECONDS - start))s"
	# what this suite's runners reported: a suite that fails must show a failed case, and
	# one that ran without any runner (a hooked script) counts as one case
	fails=$(tail -n +$((before + 1)) "$totals" | awk '{ f += $3 } END { print f + 0 }')
	if [ $rc -ne 0 ]; then
		st=1
		[ "$fails" -eq 0 ] && echo "$s 0 1 0" >>"$totals"
	elif [ "$(wc -l <"$totals")" -eq "$before" ]; then
		echo "$s 1 0 0" >>"$totals"
	fi
done
echo "== make test: seconds per suite:$times (all $SECONDS s)"
echo "== make test: per suite (passed failed skipped)"
cat "$totals"
awk '{ p += $2; f += $3; s += $4 } END { printf "%d passed, %d failed, %d skipped\n", p, f, s }' \
	"$totals"
exit $st
