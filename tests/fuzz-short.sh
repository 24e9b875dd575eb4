#!/usr/bin/env bash
# A short bounded run of every fuzz target (make test); make fuzz builds them for long runs. Each
# target is one case; the last line is "N passed, N failed, N skipped" (and, with
# LVMM_TEST_TOTALS set, the three numbers are appended there, as tests/run.sh does).
set -u
secs=${FUZZ_SECONDS:-20}
passed=0
fail=0
for f in "$@"; do
	name=$(basename "$f")
	corpus=tests/fuzz/corpus/$name
	mkdir -p "$corpus"
	echo "== fuzz: $name for ${secs}s"
	work=$(mktemp -d)
	if ! "$f" -max_total_time="$secs" -print_final_stats=0 "$work" "$corpus" >"$work.log" 2>&1; then
		tail -40 "$work.log"
		echo "!! fuzz: $name FAILED"
		fail=$((fail + 1))
	else
		passed=$((passed + 1))
	fi
	rm -rf "$work" "$work.log"
done
[ -n "${LVMM_TEST_TOTALS:-}" ] && echo "fuzz $passed $fail 0" >>"$LVMM_TEST_TOTALS"
echo "== fuzz: totals"
echo "$passed passed, $fail failed, 0 skipped"
[ $fail -eq 0 ]
