# make bench: lvmm's benchmarks (tools/bench/run.sh): vNVMe QD1 against host fio, REST API
# round trips, boot to poweroff, and the storage benchmarks side by side (storage.py: every
# data-path mode, native, QEMU; N VMs on one SSD; boot and footprint against QEMU). Results:
# docs/bench/*.csv, *.png and the tables in docs/benchmarks.md. Knobs: BENCH_TIME (seconds per
# storage run), ROUNDS, FIO_SECS, API_N, BOOT_RUNS, BENCHES (see run.sh and storage.py).
# make test runs bench-smoke: the storage harness end to end in seconds, results in a temp dir.

BENCH_CLIENT := $(BUILD)/softssd-bench-client

.PHONY: bench-lvmm bench-smoke
bench: bench-lvmm

$(BENCH_CLIENT): tools/bench/softssd_bench.c $(BUILD)/liblvmm.a
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/liblvmm.a $(LDLIBS)

bench-lvmm: $(BUILD)/lvmm $(BENCH_GUEST) $(BENCH_CLIENT)
	$(Q)tools/install-deps.sh tools/debian-packages.txt tools/bench/bench-packages.txt
	$(Q)BENCH_TIME=$(BENCH_TIME) tools/bench/run.sh $(BUILD)

bench-smoke: $(BUILD)/lvmm $(BENCH_GUEST) $(BENCH_CLIENT)
	$(Q)tools/bench/smoke.sh $(BUILD)

test-extra: bench-smoke
