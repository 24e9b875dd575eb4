# make bench: lvmm's benchmarks (tools/bench/run.sh): vNVMe QD1 against host fio, REST API
# round trips, boot to poweroff. Results: docs/bench/*.csv, *.png and the tables in
# docs/benchmarks.md. Knobs: ROUNDS, FIO_SECS, API_N, BOOT_RUNS (see run.sh).

.PHONY: bench-lvmm
bench: bench-lvmm

bench-lvmm: $(BUILD)/lvmm $(BENCH_GUEST)
	$(Q)tools/install-deps.sh
	$(Q)tools/bench/run.sh $(BUILD)
