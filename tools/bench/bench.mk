# make bench: lvmm's benchmarks (tools/bench/run.sh): vNVMe QD1 against host fio, REST API
# round trips, boot to poweroff, and the storage benchmarks side by side (storage.py: every
# data-path mode, native, QEMU; N VMs on one SSD; boot and footprint against QEMU; virtio-blk
# against QEMU's on one image), virtio-net against QEMU's and Linux boots with devices
# (netbench.py, on the test guest of make guest), snapshot, restore and live migration
# (snapbench.py). Results:
# docs/bench/*.csv, *.png and the tables in docs/benchmarks.md. Knobs: BENCH_TIME (seconds per
# storage run), ROUNDS, FIO_SECS, API_N, BOOT_RUNS, BENCHES (see run.sh and storage.py).
# make test runs bench-smoke: the storage harness end to end in seconds, results in a temp dir.

BENCH_CLIENT := $(BUILD)/softssd-bench-client

.PHONY: bench-lvmm bench-smoke bench-linux
bench: bench-lvmm

$(BENCH_CLIENT): tools/bench/softssd_bench.c $(BUILD)/liblvmm.a
	@echo "  CC      $@"
	$(Q)$(CC) $(CFLAGS) $(INC_HOSTKMOD) -o $@ $< $(BUILD)/liblvmm.a $(LDLIBS)

bench-lvmm: $(BUILD)/lvmm $(BENCH_GUEST) $(BENCH_CLIENT) $(GUEST_NETBENCH)
	$(Q)tools/install-deps.sh tools/debian-packages.txt tools/bench/bench-packages.txt
	$(Q)BENCH_TIME=$(BENCH_TIME) tools/bench/run.sh $(BUILD)

bench-smoke: $(BUILD)/lvmm $(BENCH_GUEST) $(BENCH_CLIENT) $(GUEST_NETBENCH)
	$(Q)tools/bench/smoke.sh $(BUILD)

test-extra: bench-smoke

# make bench-linux: fio inside the Linux test guest (tools/bench/linux.py), the guest of
# GUEST_BUILD (default this build dir: make guest), its initramfs plus Debian's fio
BENCH_LINUX_GUEST  = $(GUEST_BUILD)/guest
BENCH_LINUX_CPIO   = $(BUILD)/bench-linux.cpio

$(BENCH_LINUX_CPIO): tools/bench/build-bench-initramfs.sh tools/bench/linux-fio.sh \
		     tools/bench/fio-shm.c tools/guest/init tools/guest/fstab
	$(Q)tools/install-deps.sh tools/debian-packages.txt tools/bench/bench-packages.txt
	$(Q)tools/bench/build-bench-initramfs.sh $(BENCH_LINUX_GUEST)/gen_init_cpio $@

bench-linux: $(BUILD)/lvmm $(BENCH_CLIENT) $(BENCH_LINUX_CPIO)
	$(Q)BENCH_TIME=$(BENCH_TIME) GUEST_DIR=$(BENCH_LINUX_GUEST) INITRAMFS=$(BENCH_LINUX_CPIO) \
		/usr/bin/python3 tools/bench/linux.py $(BUILD) docs/bench docs/benchmarks.md
