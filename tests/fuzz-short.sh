#!/usr/bin/env bash
# A short bounded run of every fuzz target (make test); make fuzz builds them for long runs.
set -u
secs=${FUZZ_SECONDS:-20}
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
	fi
	rm -rf "$work" "$work.log"
done
[ $fail -eq 0 ]
