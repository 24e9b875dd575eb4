#!/usr/bin/env bash
# A bounded run of every fuzz target: make test shares FUZZ_BUDGET seconds (default 220) among
# them, make fuzz FUZZ_TIME=S runs each for S seconds. Each target is one case and prints how many
# inputs it executed; a target that cannot run here exits 77 saying "SKIP: why" and is skipped.
# The last line is "N passed, N failed, N skipped" (and, with LVMM_TEST_TOTALS set, the three
# numbers are appended there, as tests/run.sh does). New inputs that grow coverage are not kept.
set -u
budget=${FUZZ_BUDGET:-220}
secs=${FUZZ_SECONDS:-$((budget / ($# > 0 ? $# : 1)))}
[ "$secs" -ge 5 ] || secs=5
passed=0
fail=0
skipped=0
for f in "$@"; do
	name=$(basename "$f")
	corpus=tests/fuzz/corpus/$name
	mkdir -p "$corpus"
	echo "== fuzz: $name for ${secs}s"
	work=$(mktemp -d)
	"$f" -max_total_time="$secs" -print_final_stats=1 "$work" "$corpus" >"$work.log" 2>&1
	rc=$?
	if [ $rc -eq 77 ] && grep -q 'SKIP:' "$work.log"; then
		echo "SKIP: $name: $(grep -h -m1 -o 'SKIP:.*' "$work.log" | cut -c7-)"
		skipped=$((skipped + 1))
	elif [ $rc -ne 0 ]; then
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
[ -n "${LVMM_TEST_TOTALS:-}" ] && echo "fuzz $passed $fail $skipped" >>"$LVMM_TEST_TOTALS"
echo "== fuzz: totals"
echo "$passed passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
