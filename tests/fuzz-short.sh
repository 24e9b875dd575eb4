#!/usr/bin/env bash
# A bounded run of every fuzz target: make test shares FUZZ_BUDGET seconds (default 220) among
# them, make fuzz FUZZ_TIME=S runs each for S seconds. Each target is one case and prints how many
# inputs it executed; a target that cannot run here exits 77 saying "SKIP: why" and is skipped.
# The last line is "N passed, N failed, N skipped" (and, with LVMM_TEST_TOTALS set, the three
# numbers are appended there, as tests/run.sh does). New inputs that grow coverage are not kept.
# FUZZ_AT_ONCE=N runs N targets side by side (libFuzzer uses one core): each still runs its share
# of the budget, the whole takes budget / N.
set -u
budget=${FUZZ_BUDGET:-220}
at_once=${FUZZ_AT_ONCE:-1}
[ "$at_once" -ge 1 ] 2>/dev/null || at_once=1
secs=${FUZZ_SECONDS:-$((budget / ($# > 0 ? $# : 1)))}
[ "$secs" -ge 5 ] || secs=5
passed=0
fail=0
skipped=0
# one target: its log and exit status under $2 ($2.log, $2.rc)
run_one() {
	local f=$1 work=$2 name corpus
	name=$(basename "$f")
	corpus=tests/fuzz/corpus/$name
	mkdir -p "$corpus"
	"$f" -max_total_time="$secs" -print_final_stats=1 "$work" "$corpus" >"$work.log" 2>&1
	echo $? >"$work.rc"
}
# a target that ended: its result accounted, its work directory removed
account() {
	local name=$1 work=$2 rc execs
	echo "== fuzz: $name for ${secs}s"
	rc=$(cat "$work.rc" 2>/dev/null || echo 1)
	if [ "$rc" -eq 77 ] && grep -q 'SKIP:' "$work.log"; then
		echo "SKIP: $name: $(grep -h -m1 -o 'SKIP:.*' "$work.log" | cut -c7-)"
		skipped=$((skipped + 1))
	elif [ "$rc" -ne 0 ]; then
		tail -40 "$work.log"
		echo "!! fuzz: $name FAILED"
		fail=$((fail + 1))
	else
		passed=$((passed + 1))
	fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log" | tail -1)
	echo "== fuzz: $name ran ${execs:-?} inputs"
	rm -rf "$work" "$work.log" "$work.rc"
}
while [ $# -gt 0 ]; do
	names=() works=()
	for _ in $(seq "$at_once"); do
		[ $# -gt 0 ] || break
		works+=("$(mktemp -d)")
		names+=("$(basename "$1")")
		run_one "$1" "${works[-1]}" &
		shift
	done
	wait
	for i in "${!names[@]}"; do
		account "${names[$i]}" "${works[$i]}"
	done
done
[ -n "${LVMM_TEST_TOTALS:-}" ] && echo "fuzz $passed $fail $skipped" >>"$LVMM_TEST_TOTALS"
echo "== fuzz: totals"
echo "$passed passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
