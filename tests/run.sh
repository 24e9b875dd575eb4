#!/usr/bin/env bash
# Runs test programs one after another and accounts test cases, not programs: Check's summary
# line ("NN%: Checks: N, Failures: F, Errors: E", summed over programs) gives the cases run and
# failed, each output line starting with "SKIP: " (testutil_skip) one skipped case. A program that
# fails without a failed case counts as one failed case, one without a summary that passes as one
# passed case. The last line is "N passed, N failed, N skipped"; with LVMM_TEST_TOTALS set, the
# three numbers are also appended to that file (make test sums the suites).
# usage: tests/run.sh LABEL BIN...       each BIN is a test program
#        tests/run.sh --cmd LABEL CMD... one command (a sub-make) whose output is accounted
# LVMM_TEST_NEEDS_KVM=1: every program boots VMs (the Linux suite); on a host without KVM each
# is one skipped case ("SKIP: NAME: /dev/kvm not usable here"), not run (CI included).
# LVMM_TEST_JOBS=N: up to N programs at once (in the order given: put the longest first), each
# one's output printed whole when it ends; 1 (the default) streams the output as it comes.
set -u
cmd=0
if [ "${1:-}" = --cmd ]; then
	cmd=1
	shift
fi
label=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
passed=0 failed=0 skipped=0

# Adds one program's (or command's) cases to the totals: $1 its exit status, output in $log.
account() {
	local rc=$1 checks fails skips
	read -r checks fails < <(awk '
		/[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+/ {
			for (i = 1; i <= NF; i++) {
				if ($i == "Checks:") c += $(i + 1)
				if ($i == "Failures:" || $i == "Errors:") f += $(i + 1)
			}
			seen = 1
		}
		END { print (seen ? c : -1), f + 0 }' "$log")
	skips=$(grep -c '^SKIP: ' "$log")
	if [ "$checks" -lt 0 ]; then
		# no Check summary: the program is one case, or as many as it skipped
		if [ "$rc" -eq 0 ]; then
			checks=$((skips > 0 ? skips : 1))
		else
			checks=$((skips + 1))
			fails=1
		fi
	elif [ "$rc" -ne 0 ] && [ "$fails" -eq 0 ]; then
		checks=$((checks + 1)) # died outside its cases (crash, setup)
		fails=1
	fi
	[ "$skips" -gt $((checks - fails)) ] && skips=$((checks - fails))
	passed=$((passed + checks - fails - skips))
	failed=$((failed + fails))
	skipped=$((skipped + skips))
	[ "$fails" -eq 0 ]
}

if [ $cmd -eq 1 ]; then
	echo "== $label: $*"
	"$@" 2>&1 | tee "$log"
	account "${PIPESTATUS[0]}" || echo "!! $label: FAILED"
elif [ "${LVMM_TEST_NEEDS_KVM:-0}" = 1 ] && ! "$(dirname "$0")/../tools/kvm-usable.sh"; then
	for t in "$@"; do
		echo "SKIP: $(basename "$t"): /dev/kvm not usable here" | tee "$log"
		account 0
	done
elif [ "${LVMM_TEST_JOBS:-1}" -le 1 ]; then
	for t in "$@"; do
		echo "== $label: $(basename "$t")"
		start=$SECONDS
		"$t" 2>&1 | tee "$log"
		account "${PIPESTATUS[0]}" || echo "!! $label: $(basename "$t") FAILED"
		echo "== $label: $(basename "$t") took $((SECONDS - start)) s"
	done
else
	outs=$(mktemp -d)
	trap 'rm -rf "$log" "$outs"' EXIT
	declare -A running=()
	# one program in the background: its output, then "STATUS SECONDS" in OUT.rc
	start_one() {
		local t=$1 out=$2 start=$SECONDS rc
		"$t" >"$out" 2>&1
		rc=$?
		echo "$rc $((SECONDS - start))" >"$out.rc"
	}
	# the program whose job ended: its output whole, then its cases accounted
	finish_one() {
		local pid t out rc secs
		wait -n -p pid
		t=${running[$pid]}
		unset "running[$pid]"
		out=$outs/$(basename "$t")
		read -r rc secs <"$out.rc" || { rc=1 secs=?; }
		echo "== $label: $(basename "$t")"
		cat "$out"
		cp "$out" "$log"
		account "$rc" || echo "!! $label: $(basename "$t") FAILED"
		echo "== $label: $(basename "$t") took $secs s"
	}
	for t in "$@"; do
		while [ ${#running[@]} -ge "$LVMM_TEST_JOBS" ]; do
			finish_one
		done
		echo "== $label: $(basename "$t") started ($((${#running[@]} + 1)) running)"
		start_one "$t" "$outs/$(basename "$t")" &
		running[$!]=$t
	done
	while [ ${#running[@]} -gt 0 ]; do
		finish_one
	done
fi
# one word per label: tests/run-suites.sh sums the fields after it
[ -n "${LVMM_TEST_TOTALS:-}" ] && echo "${label// /-} $passed $failed $skipped" >>"$LVMM_TEST_TOTALS"
echo "== $label: totals ($SECONDS s)"
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
