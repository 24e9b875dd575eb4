#!/usr/bin/env bash
# Runs Check test programs one after another and prints one summary line per suite.
# usage: tests/run.sh LABEL BIN...
set -u
label=$1
shift
fail=0
total=0
for t in "$@"; do
	total=$((total + 1))
	echo "== $label: $(basename "$t")"
	if ! "$t"; then
		echo "!! $label: $(basename "$t") FAILED"
		fail=$((fail + 1))
	fi
done
echo "== $label: $((total - fail))/$total test programs passed"
[ $fail -eq 0 ]
