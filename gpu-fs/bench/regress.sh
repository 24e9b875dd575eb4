#!/usr/bin/env bash
# Evidence that the GPU tests of issue 16 catch what they were written for: rebuilds test_gpu with
# one fix taken back at a time and runs the case that covers it; each must fail (or hang until
# its time limit) without its fix. GPU machine only. Usage: bench/regress.sh OUTDIR WORKDIR
# (.carry/check and .carry/uring, when present, stand in for missing Check/liburing packages)
out=$1 W=$2
cd "$(dirname "$0")/.."
mk() { # name, python edit of (the page cache's device header, test source)
	local d=/tmp/regress-$1
	rm -rf $d && mkdir -p $d && cp -r include lib tests gvdk Makefile $d/
	python3 - "$d" "$2" <<'PY'
import sys
d, what = sys.argv[1], sys.argv[2]
h = open(d + '/include/device/gm_cache.cuh').read()
t = open(d + '/tests/test_gpu.cu').read()
def rep(s, a, b):
    assert a in s, a
    return s.replace(a, b)
if what == 'publish':
    h = rep(h, '\tif (full) {\n\t\t*unpublished = true;\n\t\treturn slot;', '\tif (full) {\n\t\tgm_publish(d, slot, true);\n\t\treturn slot;')
elif what == 'wbdrop':
    h = rep(h, '\t\t\tif (rc)\n\t\t\t\treturn prefetching ? -16 : rc;', '\t\t\tif (rc)\n\t\t\t\tatomicExch(&d->dirty[i], 0u);')
elif what == 'unbounded':
    t = rep(t, 't.timeout_ms = 1000;', 't.timeout_ms = 3600000;')
open(d + '/include/device/gm_cache.cuh', 'w').write(h)
open(d + '/tests/test_gpu.cu', 'w').write(t)
PY
	mkdir -p /tmp/include && cp -r ../include/lightiov /tmp/include/ # the copy's ../include
	make -C $d -j6 BUILD=build $([ -d .carry/check ] && echo CHECK_DIR=$PWD/.carry/check) \
		$([ -d .carry/uring ] && echo URING_DIR=$PWD/.carry/uring) build/test_gpu \
		>$out/regress-$1-build.log 2>&1
}
mk publish publish & mk wbdrop wbdrop & mk unbounded unbounded & wait
run() {
	CK_RUN_CASE=$2 GPUFS_TEST_DIR=$W timeout $3 /tmp/regress-$1/build/test_gpu >$out/regress-$1.log 2>&1
	echo "without the $1 fix: $2 rc=$? ($(grep -E '%: Checks' $out/regress-$1.log | tail -1))"
	grep -E ':[EF]:' $out/regress-$1.log | head -3 | cut -c1-300
}
run publish full_page_writes_race_readers 120
run wbdrop writeback_failure_keeps_data 60
run unbounded controller_stopped_mid_run 30
