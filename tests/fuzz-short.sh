#!/usr/bin/env bash
# A bounded run of every fuzz target: make test runs each for FUZZ_SECONDS (default 20), make fuzz
# FUZZ_TIME=S for S seconds. Each target is one case and prints how many inputs it executed; the
# last line is "N passed, N failed, N skipped" (and, with LVMM_TEST_TOTALS set, the three numbers
# are appended there, as tests/run.sh does). New inputs that grow coverage are not kept.
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
	if ! "$f" -max_total_time="$secs" -print_final_stats=1 "$work" "$corpus" >"$work.log" 2>&1; then
		tail -40 "$work.log"
		echo "!! fuzz: $name FAILED"
		fail=$((fail + 1))
	else
		passed=$((passed + 1))
	fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log" | tail -1)
	echo "== fuzz: $name ran ${execs:-?} inputs"
	rm -rf "$work" "$work.log"
done
[ -n "${LVMM_TEST_TOTALS:-}" ] && echo "fuzz $passed $fail 0" >>"$LVMM_TEST_TOTALS"
echo "== fuzz: totals"
echo "$passed passed, $fail failed, 0 skipped"
[ $fail -eq 0 ]
