#!/usr/bin/env bash
# Runs libFuzzer targets to a number of executions each (make fuzz FUZZ_RUNS=N, run-bundle.sh):
# J workers per target share one working corpus, their executions summed; a summary per target.
#
#   FUZZ_RUNS=N            executions per target, over all its workers (required)
#   FUZZ_JOBS=J            worker processes per target (default 1); FUZZ_JOBS_NAME=J for one
#   FUZZ_LAUNCHER=CMD      prefix of every worker's command line (e.g. a dynamic loader)
#   FUZZ_TARGETS_AT_ONCE=T targets fuzzed side by side (default 1)
#   FUZZ_CORPUS=DIR        seed corpora, DIR/NAME per target (default tests/fuzz/corpus)
#   FUZZ_OUT=DIR           logs, working corpora, crash inputs, summary.txt (default fuzz-runs)
#   FUZZ_TIMEOUT=S         libFuzzer -timeout per input (default 25)
#   FUZZ_MAX_TIME=S        stop a worker after S seconds even short of its share (default none)
# Prints one line per target: name, executions, workers, seconds, findings, result; exit status
# non-zero when any target had a finding or a worker failed. A target that cannot run on this
# host exits 77 after saying "SKIP: why" (fuzz_file_backend without io_uring): skipped, not clean.
set -u
runs=${FUZZ_RUNS:?FUZZ_RUNS=N: executions per target}
jobs_default=${FUZZ_JOBS:-1}
at_once=${FUZZ_TARGETS_AT_ONCE:-1}
corpus_root=${FUZZ_CORPUS:-tests/fuzz/corpus}
out=${FUZZ_OUT:-fuzz-runs}
timeout=${FUZZ_TIMEOUT:-25}
max_time=${FUZZ_MAX_TIME:-0}
[ "$jobs_default" -ge 1 ] 2>/dev/null || { echo "fuzz-runs: FUZZ_JOBS=$jobs_default is not a count" >&2; exit 2; }
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
	local bin=$1 name dir share res start end total=0 bad=0 skip=0 w pids=() findings jobs rc
	local var seeds
	name=$(basename "$bin")
	var=FUZZ_JOBS_$name
	jobs=${!var:-$jobs_default}
	dir=$out/$name
	rm -rf "$dir"
	mkdir -p "$dir/corpus" "$dir/artifacts"
	share=$(((runs + jobs - 1) / jobs))
	seeds=()
	[ -d "$corpus_root/$name" ] && seeds=("$corpus_root/$name")
	start=$(date +%s)
	for ((w = 0; w < jobs; w++)); do
		${FUZZ_LAUNCHER:-} "$bin" -runs="$share" -seed=$((1000 + w)) -timeout="$timeout" -print_final_stats=1 \
			-max_total_time="$max_time" -artifact_prefix="$dir/artifacts/" \
			"$dir/corpus" "${seeds[@]}" >"$dir/worker$w.log" 2>&1 &
		pids+=($!)
	done
	for w in "${!pids[@]}"; do
		wait "${pids[$w]}"
		rc=$?
		if [ $rc -eq 77 ] && grep -q 'SKIP:' "$dir/worker$w.log"; then
			skip=$((skip + 1))
		elif [ $rc -ne 0 ]; then
			bad=$((bad + 1))
		fi
	done
	end=$(date +%s)
	for ((w = 0; w < jobs; w++)); do
		total=$((total + $(worker_execs "$dir/worker$w.log")))
	done
	findings=$(find "$dir/artifacts" -type f | wc -l)
	if [ "$skip" -gt 0 ] && [ "$bad" -eq 0 ] && [ "$findings" -eq 0 ]; then
		res="skipped ($(grep -h -m1 -o 'SKIP:.*' "$dir/worker0.log"))"
	elif [ "$bad" -eq 0 ] && [ "$findings" -eq 0 ]; then
		res=clean
	else
		res="FAILED ($bad of $jobs workers failed; inputs in $dir/artifacts)"
		# the first thing a failed worker said: the harness's own line or the sanitizer's
		grep -h -m1 -E '^fuzz_[a-z_]+: |ERROR: |SUMMARY: ' "$dir"/worker*.log |
			head -1 >"$dir/first-finding.txt"
		[ -s "$dir/first-finding.txt" ] && res="$res: $(cut -c1-160 "$dir/first-finding.txt")"
	fi
	printf '%-20s %12s execs %4s workers %7ss %3s findings  %s\n' "$name" "$total" "$jobs" \
		$((end - start)) "$findings" "$res" >"$dir/result.txt"
	cat "$dir/result.txt"
}

echo "== fuzz-runs: $# targets to $runs executions each, $jobs_default workers per target," \
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
		"FUZZ_JOBS=$jobs_default FUZZ_TARGETS_AT_ONCE=$at_once"
	for bin in "$@"; do
		cat "$out/$(basename "$bin")/result.txt"
	done
} >"$summary"
echo "== fuzz-runs: summary ($summary)"
cat "$summary"
! grep -q FAILED "$summary"
