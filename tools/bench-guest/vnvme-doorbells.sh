#!/usr/bin/env bash
# Polled doorbell pages against eventfd doorbells (and the emulate path for scale) on this host:
# the bench guest's QD1 4 KiB read loop through each, rounds interleaved (the host is noisy),
# with lvmm's exits and the backend's commands from LVMM_STATS.
# usage: tools/bench-guest/vnvme-doorbells.sh [BUILD_DIR] [ROUNDS] [IOS]
set -euo pipefail

build=${1:-build}
rounds=${2:-3}
ios=${3:-5000}
lvmm=$build/lvmm
guest=$build/bench-guest/bench-guest.elf
dir=$(mktemp -d /tmp/lvmm-dbmeasure-XXXXXX)
export LVMM_RUN_DIR=$dir LVMM_STATE_DIR=/proc/lvmm-none LVMM_STATS=1
trap 'kill $ssd 2>/dev/null; wait $ssd 2>/dev/null; rm -rf "$dir"' EXIT

"$lvmm" ssd serve m0 --backing "$dir/backing.img" --size 256M >"$dir/ssd.log" 2>&1 &
ssd=$!
for _ in $(seq 100); do [ -S "$dir/ssd/m0.sock" ] && break; sleep 0.05; done

declare -A spec=(
	[poll]="m0:16M,vol=p,doorbell=poll|"
	[eventfd]="m0:16M,vol=e,doorbell=eventfd|bench.dbbuf=on"
	[emulate]="file=$dir/disk.img,size=16M|bench.dbbuf=on"
)
printf '%-8s %5s %10s %11s %15s %13s %8s\n' kind round ns/io "mmio exits" "lvmm wake-ups" "backend cmds" "wall s"
for r in $(seq "$rounds"); do
	for kind in poll eventfd emulate; do
		vn=${spec[$kind]%%|*}
		extra=${spec[$kind]#*|}
		start=$(date +%s.%N)
		out=$("$lvmm" run --kernel "$guest" --memory 64M --vnvme "$vn" \
			--cmdline "bench.mode=lio bench.ios=$ios bench.blocks=64 $extra" 2>"$dir/err")
		out+=$'\n'$(cat "$dir/err")
		end=$(date +%s.%N)
		ns=$(sed -n 's/.*lio qd1 4k read: [0-9]* I\/Os, \([0-9]*\) ns\/io.*/\1/p' <<<"$out")
		mmio=$(sed -n 's/.*vcpu 0 exits: .* mmio \([0-9]*\) .*/\1/p' <<<"$out")
		cmds=$(sed -n 's/.*mode .*backend cmds \([0-9]*\),.*/\1/p' <<<"$out")
		wake=$(sed -n 's/.*mode .*wake-ups \([0-9]*\),.*/\1/p' <<<"$out")
		grep -q "lio passed (0 failures)" <<<"$out" || { echo "$kind failed:"; echo "$out"; exit 1; }
		printf '%-8s %5s %10s %11s %15s %13s %8.2f\n' "$kind" "$r" "$ns" "$mmio" "$wake" \
			"$cmds" "$(echo "$end - $start" | bc)"
	done
done
