#!/usr/bin/env bash
# Runs libFuzzer targets to a number of executions each (make fuzz FUZZ_RUNS=N, run-bundle.sh):
# J workers per target share one working corpus, their executions summed; a summary per target.
#
#   FUZZ_RUNS=N            executions per target, over all its workers (required)
#   FUZZ_JOBS=J            worker processes per target (default 1)
#   FUZZ_TARGETS_AT_ONCE=T targets fuzzed side by side (default 1)
#   FUZZ_CORPUS=DIR        seed corpora, DIR/NAME per target (default tests/fuzz/corpus)
#   FUZZ_OUT=DIR           logs, working corpora, crash inputs, summary.txt (default fuzz-runs)
#   FUZZ_TIMEOUT=S         libFuzzer -timeout per input (default 25)
#   FUZZ_MAX_TIME=S        stop a worker after S seconds even short of its share (default none)
# Prints one line per target: name, executions, workers, seconds, findings, result; exit status
# non-zero when any target had a finding or a worker failed.
set -u
runs=${FUZZ_RUNS:?FUZZ_RUNS=N: executions per target}
jobs=${FUZZ_JOBS:-1}
at_once=${FUZZ_TARGETS_AT_ONCE:-1}
corpus_root=${FUZZ_CORPUS:-tests/fuzz/corpus}
out=${FUZZ_OUT:-fuzz-runs}
timeout=${FUZZ_TIMEOUT:-25}
max_time=${FUZZ_MAX_TIME:-0}
[ "$jobs" -ge 1 ] 2>/dev/null || { echo "fuzz-runs: FUZZ_JOBS=$jobs is not a count" >&2; exit 2; }
[ "$at_once" -ge 1 ] 2>/dev/null || { echo "fuzz-runs: FUZZ_TARGETS_AT_ONCE=$at_once" >&2; exit 2; }
[ "$runs" -ge 1 ] 2>/dev/null || { echo "fuzz-runs: FUZZ_RUNS=$runs is not a count" >&2; exit 2; }
[ $# -ge 1 ] || { echo "usage: FUZZ_RUNS=N $0 FUZZ_BINARY..." >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary=$out/summary.txt

# executions of one worker: libFuzzer's final stats, else its last "#N" progress line
worker_execs() {
	local n
	n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$1" | tail -1)
	[ -z "$n" ] && n=$(sed -n 's/^#\([0-9][0-9]*\)[[:space:]].*/\1/p' "$1" | tail -1)
	echo "${n:-0}"
}

# one target: J workers of ceil(N/J) runs each, one working corpus they all reload from
run_target() {
	local bin=$1 name dir share seeds res start end total=0 bad=0 w pids=() findings
	name=$(basename "$bin")
	dir=$out/$name
	rm -rf "$dir"
	mkdir -p "$dir/corpus" "$dir/artifacts"
	share=$(((runs + jobs - 1) / jobs))
	seeds=
	[ -d "$corpus_root/$name" ] && seeds=$corpus_root/$name
	start=$(date +%s)
	for ((w = 0; w < jobs; w++)); do
		"$bin" -runs="$share" -seed=$((1000 + w)) -timeout="$timeout" -print_final_stats=1 \
			-max_total_time="$max_time" -artifact_prefix="$dir/artifacts/" \
			"$dir/corpus" $seeds >"$dir/worker$w.log" 2>&1 &
		pids+=($!)
	done
	for w in "${!pids[@]}"; do
		wait "${pids[$w]}" || bad=$((bad + 1))
	done
	end=$(date +%s)
	for ((w = 0; w < jobs; w++)); do
		total=$((total + $(worker_execs "$dir/worker$w.log")))
	done
	findings=$(find "$dir/artifacts" -type f | wc -l)
	if [ "$bad" -eq 0 ] && [ "$findings" -eq 0 ]; then
		res=clean
	else
		res="FAILED ($bad of $jobs workers failed; inputs in $dir/artifacts)"
	fi
	printf '%-20s %12s execs %4s workers %7ss %3s findings  %s\n' "$name" "$total" "$jobs" \
		$((end - start)) "$findings" "$res" >"$dir/result.txt"
	cat "$dir/result.txt"
}

echo "== fuzz-runs: $# targets to $runs executions each, $jobs workers per target," \
	"$at_once at once; logs in $out"
running=0
for bin in "$@"; do
	run_target "$bin" &
	running=$((running + 1))
	if [ "$running" -ge "$at_once" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait
{
	echo "# fuzz-runs $(date -u +%FT%TZ) on $(hostname), $(nproc) cores: FUZZ_RUNS=$runs" \
		"FUZZ_JOBS=$jobs FUZZ_TARGETS_AT_ONCE=$at_once"
	for bin in "$@"; do
		cat "$out/$(basename "$bin")/result.txt"
	done
} >"$summary"
echo "== fuzz-runs: summary ($summary)"
cat "$summary"
! grep -q FAILED "$summary"
