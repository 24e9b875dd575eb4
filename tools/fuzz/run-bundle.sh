#!/usr/bin/env bash
# A self-contained fuzzing bundle: "pack" here gathers the fuzz binaries, seed corpora and shared
# libraries into one directory; "run" there fuzzes every target to N executions on all cores.
#
#   tools/fuzz/run-bundle.sh pack [BUILD]     (default BUILD=build/y1) -> BUILD/fuzz-bundle/ and
#                                             BUILD/fuzz-bundle.tar.gz
#   cd fuzz-bundle && ./run-bundle.sh run     on the other machine; environment:
#       FUZZ_RUNS=N      executions per target (default 10000000)
#       FUZZ_WORKERS=W   processes in all (default $(nproc)), split over the targets by weight
#       FUZZ_OUT=DIR     logs, crash inputs and summary.txt (default ./results)
#       FUZZ_MAX_TIME=S  stop each worker after S seconds even short of its share (default none)
#       FUZZ_LOADER=1    run through the bundled dynamic loader and C library (a host whose glibc
#                        is older than this one's)
set -u
here=$(cd "$(dirname "$0")" && pwd)

# Core-seconds a target needs for its executions, relative (measured on a 16-core host with one
# worker per target, 2026-12-01: fuzz_file_backend ~1,000 inputs/s, fuzz_api_conn ~1,600,
# fuzz_voltable ~2,300, fuzz_exit ~3,300, fuzz_nvme_prod ~4,600, fuzz_pci, fuzz_api and
# fuzz_nvme ~9,000-10,000, fuzz_loader ~14,000, the rest 24,000-190,000): workers go where the
# time goes, so that all targets end at about the same time.
weight() {
	case $1 in
	fuzz_file_backend) echo 50 ;;
	fuzz_api_conn) echo 32 ;;
	fuzz_voltable) echo 22 ;;
	fuzz_exit) echo 15 ;;
	fuzz_nvme_prod) echo 11 ;;
	fuzz_pci | fuzz_api) echo 6 ;;
	fuzz_nvme) echo 5 ;;
	fuzz_loader) echo 4 ;;
	fuzz_platform | fuzz_virtqueue) echo 2 ;;
	*) echo 1 ;;
	esac
}

pack() {
	local build=${1:-build/y1} root bundle lib b
	root=$(cd "$here/../.." && pwd)
	cd "$root" || exit 1
	make --no-print-directory -j2 BUILD="$build" fuzz || exit 1
	bundle=$build/fuzz-bundle
	rm -rf "$bundle" "$bundle.tar.gz"
	mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/glibc" "$bundle/corpus"
	for b in "$build"/fuzz/fuzz_*; do
		[ -x "$b" ] && [ -f "$b" ] || continue
		case $b in *.d | *.a) continue ;; esac
		cp "$b" "$bundle/bin/"
		[ -d "tests/fuzz/corpus/$(basename "$b")" ] &&
			cp -r "tests/fuzz/corpus/$(basename "$b")" "$bundle/corpus/"
		# every shared library it loads; glibc's own apart (LD_LIBRARY_PATH must not
		# mix them with another host's loader, FUZZ_LOADER=1 uses them together)
		ldd "$b" | awk '/=>/ && $3 ~ /^\// {print $3} !/=>/ && $1 ~ /^\// {print $1}' |
			while read -r lib; do
				case $(basename "$lib") in
				ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | \
					librt.so* | libresolv.so*)
					cp -L "$lib" "$bundle/glibc/" ;;
				*) cp -L "$lib" "$bundle/lib/" ;;
				esac
			done
	done
	cp tools/fuzz/fuzz-runs.sh tools/fuzz/run-bundle.sh "$bundle/"
	git rev-parse HEAD >"$bundle/COMMIT" 2>/dev/null
	tar -C "$build" -czf "$bundle.tar.gz" fuzz-bundle
	echo "fuzz bundle: $bundle ($(ls "$bundle/bin" | wc -l) targets," \
		"$(du -sh "$bundle" | cut -f1)), $bundle.tar.gz ($(du -sh "$bundle.tar.gz" | cut -f1))"
}

run() {
	local runs=${FUZZ_RUNS:-10000000} workers=${FUZZ_WORKERS:-$(nproc)} out=${FUZZ_OUT:-results}
	local total=0 b name n bins=() loader
	cd "$here" || exit 1
	for b in bin/fuzz_*; do
		bins+=("$here/$b")
		total=$((total + $(weight "$(basename "$b")")))
	done
	[ ${#bins[@]} -gt 0 ] || { echo "run-bundle: no targets in $here/bin" >&2; exit 2; }
	# workers per target by weight, at least one each
	for b in "${bins[@]}"; do
		name=$(basename "$b")
		n=$((workers * $(weight "$name") / total))
		[ "$n" -ge 1 ] || n=1
		export "FUZZ_JOBS_$name=$n"
	done
	export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	if [ "${FUZZ_LOADER:-0}" = 1 ]; then
		loader=$(ls "$here"/glibc/ld-linux* | head -1)
		export FUZZ_LAUNCHER="$loader --library-path $here/lib:$here/glibc"
	fi
	echo "run-bundle: $(cat COMMIT 2>/dev/null || echo '?'), ${#bins[@]} targets, $runs" \
		"executions each, $workers workers on $(nproc) cores"
	FUZZ_RUNS=$runs FUZZ_JOBS=1 FUZZ_TARGETS_AT_ONCE=${#bins[@]} FUZZ_CORPUS=$here/corpus \
		FUZZ_OUT=$out "$here/fuzz-runs.sh" "${bins[@]}"
}

case ${1:-} in
pack) shift; pack "$@" ;;
run) shift; run "$@" ;;
*)
	echo "usage: $0 pack [BUILD] | run   (see the top of this file)" >&2
	exit 2
	;;
esac
