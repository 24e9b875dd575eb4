# lvmm: one entry point.  make | make test | make demo | make guest | make bench | make fuzz
#
# Found by the file tree (no list to edit):
#   vmm/*.c vmm/api/*.c devices/{,nvme-lightiov,virtio}/*.c host-kmod/{common,client,softssd}/*.c
#                             -> $(BUILD)/liblvmm.a (+ vmm/main.c -> lvmm)
#   tests/unit/NAME.c         Check programs linked with liblvmm.a (no KVM)
#   tests/integration/NAME.c  Check programs that drive $(BUILD)/lvmm with the test guest (fast)
#   tests/linux/NAME.c        Check programs that boot the Linux guest (minutes each)
#   tests/fuzz/NAME.c         libFuzzer targets (clang), a short bounded run in make test
# Components add the rest through fragments (includes below), appending to:
#   BINS (built by default), TEST_DEPS (built before integration tests), test-extra (a suite).
# BUILD=dir builds out of tree (helpers use their own dir); SAN=1 adds ASan+UBSan.

BUILD   ?= build
SAN     ?=
CC      ?= gcc
V       ?= 0
Q       := $(if $(filter 1,$(V)),,@)

PKGS    := check jansson liburing libseccomp
WARN    := -Wall -Wextra -Werror -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes -Wshadow \
           -Wundef -Wsign-compare -Wno-unused-parameter
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 $(WARN) -D_GNU_SOURCE -MMD -MP -pthread
LDLIBS  += -pthread $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lhttp_parser -lfdt -lm
ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif

names = $(patsubst $(1)/%.c,%,$(wildcard $(1)/*.c))

# Include paths by folder: a folder sees only what it may use (docs/architecture.md, "Who may
# include what"; make include-check checks the whole graph, tools/include-graph.sh).
INC_HOSTKMOD := -Iinclude -Ihost-kmod
INC_DEVICES  := $(INC_HOSTKMOD) -Ivmm/platform -Idevices
INC_VMM      := $(INC_DEVICES) -Ivmm
INC_TESTS    := $(INC_VMM) -Itests/lib
inc_for = $(if $(filter host-kmod/%,$(1)),$(INC_HOSTKMOD),$(if $(filter devices/%,$(1)),$(INC_DEVICES),$(if \
          $(filter vmm/%,$(1)),$(INC_VMM),$(INC_TESTS))))
LIB_SRCS     := $(filter-out vmm/main.c,$(wildcard vmm/*.c)) $(wildcard vmm/api/*.c) \
                $(wildcard devices/*.c devices/nvme-lightiov/*.c devices/virtio/*.c devices/vfio/*.c) \
                $(wildcard host-kmod/common/*.c) $(wildcard host-kmod/client/*.c) \
                $(wildcard host-kmod/vfio/*.c) \
                $(wildcard host-kmod/softssd/*.c)
BINS         :=
UNIT_TESTS   := $(call names,tests/unit)
# The integration suite runs INTEG_JOBS programs at a time, the longest first: most of their time
# is spent waiting on VMs, daemons and sockets (on 2 cores: 297 s one at a time, 139 s two, 111 s
# four; at four, with a guest and a kernel build beside them, the time limits of five cases ran
# out). Unit programs run TEST_JOBS at a time.
INTEG_LONG   := test_migration test_vnvme_modes test_ssd_upgrade test_snapshot test_api test_softssd \
                test_faults
INTEG_TESTS  := $(foreach t,$(INTEG_LONG),$(filter $(t),$(call names,tests/integration))) \
                $(filter-out $(INTEG_LONG),$(call names,tests/integration))
# The Linux suites run TEST_JOBS at a time, the longest first (one host core per 1-vCPU guest,
# whose kernel is emulated on kvm_pvm hosts), in the order of their times in the last CI run on
# this host; the rest follow in name order.
LINUX_LONG   := test_linux_nvme_user test_linux_boot test_linux_vblk test_linux_snapshot \
                test_linux_vnvme test_linux_frontend test_linux_fs test_linux_net \
                test_linux_ssd_vfio test_linux_nvme test_linux_kmod test_linux_vsock
LINUX_TESTS  := $(foreach t,$(LINUX_LONG),$(filter $(t),$(call names,tests/linux))) \
                $(filter-out $(LINUX_LONG),$(call names,tests/linux))
TEST_JOBS    ?= $(shell nproc 2>/dev/null || echo 1)
INTEG_JOBS   ?= $(TEST_JOBS)
FUZZ_TARGETS := $(call names,tests/fuzz)
TEST_DEPS    :=

all: deps-check $(BUILD)/lvmm

-include tools/guest/guest.mk
-include tools/bench-guest/bench-guest.mk
-include tools/bench/bench.mk
-include gpu-fs/gpu-fs.mk
-include host-kmod/host-kmod.mk
-include guest-driver/guest-driver.mk

all: $(BINS)

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CFLAGS) $(call inc_for,$<) -c -o $@ $<

$(BUILD)/liblvmm.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/lvmm: $(BUILD)/obj/vmm/main.o $(BUILD)/liblvmm.a
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Helpers shared by the test programs (process spawning, temp dirs, Linux guest boots).
TESTLIB_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/lib/*.c))
$(BUILD)/libtest.a: $(TESTLIB_OBJS)
	@mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(BUILD)/libtest.a $(BUILD)/liblvmm.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/itests/%: $(BUILD)/obj/tests/integration/%.o $(BUILD)/libtest.a $(BUILD)/liblvmm.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/ltests/%: $(BUILD)/obj/tests/linux/%.o $(BUILD)/libtest.a $(BUILD)/liblvmm.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# libFuzzer targets: clang, ASan+UBSan, own object tree.
FUZZ_CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE -pthread \
               -MMD -MP -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
# libatomic: clang calls it for atomics on packed (unaligned) fields, e.g. lio_client's CQE status
FUZZ_LDLIBS := -latomic
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/fuzz/obj/%.o)
$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CLANG   $<"
	$(Q)clang $(FUZZ_CFLAGS:-fsanitize=fuzzer,%=-fsanitize=fuzzer-no-link,%) $(call inc_for,$<) -c \
	    -o $@ $<
$(BUILD)/fuzz/libfuzz.a: $(FUZZ_LIB_OBJS)
	$(Q)rm -f $@ && ar rcs $@ $^
$(BUILD)/fuzz/%: tests/fuzz/%.c $(BUILD)/fuzz/libfuzz.a
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	$(Q)clang $(FUZZ_CFLAGS) $(INC_TESTS) -o $@ $< $(BUILD)/fuzz/libfuzz.a $(LDLIBS) $(FUZZ_LDLIBS)

UNIT_BINS  = $(UNIT_TESTS:%=$(BUILD)/tests/%)
INTEG_BINS = $(INTEG_TESTS:%=$(BUILD)/itests/%)
LINUX_BINS = $(LINUX_TESTS:%=$(BUILD)/ltests/%)
FUZZ_BINS  = $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)

.PHONY: all deps deps-check include-check test test-bins unit-bins test-unit test-asan test-integ \
        test-linux fuzz fuzz-short \
        demo bench clean format format-check install

# Installs missing Debian packages (apt-get); a no-op when everything is present.
deps:
	$(Q)tools/install-deps.sh
deps-check:
	$(Q)pkg-config --exists $(PKGS) || tools/install-deps.sh

# Every suite ends with "N passed, N failed, N skipped" (test cases; a case that cannot run here
# prints "SKIP: reason", see testutil_skip). GUEST_BUILD: where the Linux test guest is looked
# for (the ASan build reuses the main one's).
GUEST_BUILD ?= $(BUILD)

test-unit: $(UNIT_BINS)
	$(Q)LVMM_TEST_JOBS=$(TEST_JOBS) BUILD=$(GUEST_BUILD) tests/run.sh "unit" $(UNIT_BINS)

test-asan:
	$(Q)$(MAKE) --no-print-directory BUILD=$(BUILD)/asan GUEST_BUILD=$(GUEST_BUILD) SAN=1 test-unit

test-integ: $(BUILD)/lvmm $(INTEG_BINS) $(TEST_DEPS)
	$(Q)LVMM_TEST_JOBS=$(INTEG_JOBS) LVMM=$(BUILD)/lvmm BUILD=$(BUILD) tests/run.sh "integration" \
	    $(INTEG_BINS)

test-linux: $(BUILD)/lvmm $(LINUX_BINS) $(TEST_DEPS) guest
	$(Q)LVMM_TEST_NEEDS_KVM=1 LVMM_TEST_JOBS=$(TEST_JOBS) LVMM=$(BUILD)/lvmm BUILD=$(BUILD) \
	    tests/run.sh "linux" $(LINUX_BINS)

# make fuzz builds the targets; with FUZZ_TIME=SECONDS it also runs each that long; with
# FUZZ_RUNS=N it runs each to N executions (FUZZ_JOBS=J workers per target, executions summed;
# FUZZ_TARGETS_AT_ONCE=T targets side by side), printing executions and findings per target.
FUZZ_JOBS ?= 1
FUZZ_TARGETS_AT_ONCE ?= 1
fuzz: $(FUZZ_BINS)
	$(Q)$(if $(FUZZ_RUNS),FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_JOBS=$(FUZZ_JOBS) \
	    FUZZ_TARGETS_AT_ONCE=$(FUZZ_TARGETS_AT_ONCE) FUZZ_OUT=$(BUILD)/fuzz/runs \
	    tools/fuzz/fuzz-runs.sh $(FUZZ_BINS),$(if $(FUZZ_TIME),FUZZ_SECONDS=$(FUZZ_TIME) \
	    tests/fuzz-short.sh $(FUZZ_BINS),true))
fuzz-short: $(FUZZ_BINS)
	$(Q)FUZZ_AT_ONCE=$(TEST_JOBS) tests/fuzz-short.sh $(FUZZ_BINS)

# Every program the suites run is built first, TEST_JOBS compilers at once (the ASan unit tests
# in their own tree), so no suite compiles on one core; the guest kernel's build runs its own jobs.
# A program that fails to build there is left to its suite, which counts it as a failed case.
# The guest is built before the suites, so that no unit case that needs it is skipped; every suite
# runs even after one failed, and the last line sums them all (tests/run-suites.sh).
TEST_SUITES := format-check include-check test-unit test-asan test-integ fuzz-short test-linux test-extra
test: deps
	-$(Q)$(MAKE) --no-print-directory -k -j$(TEST_JOBS) all test-bins
	-$(Q)$(MAKE) --no-print-directory -k -j$(TEST_JOBS) BUILD=$(BUILD)/asan GUEST_BUILD=$(BUILD) \
	    SAN=1 unit-bins
	$(Q)$(MAKE) --no-print-directory all guest
	$(Q)tests/run-suites.sh $(BUILD)/test-totals "$(MAKE)" $(TEST_SUITES)

unit-bins: $(UNIT_BINS)
test-bins: $(UNIT_BINS) $(INTEG_BINS) $(LINUX_BINS) $(FUZZ_BINS) $(TEST_DEPS)

# Components hook further suites (gpu-fs host side, kmod build) into test-extra, and their
# benchmarks into bench (results and plots under docs/).
test-extra:
bench: all

demo: deps
	$(Q)tools/kvm-usable.sh || { echo "make demo: /dev/kvm is not usable: lvmm boots VMs with KVM (load" \
	    "kvm_intel or kvm_amd, or use a host or VM with virtualization enabled); 'make all guest'" \
	    "builds everything without booting" >&2; exit 1; }
	$(Q)$(MAKE) --no-print-directory all guest
	$(Q)tools/demo.sh $(BUILD)

# make install: lvmm and the default guest it boots without --kernel (share/lvmm/, where lvmm
# looks after the guest/ directory next to its binary). DESTDIR for staging.
PREFIX ?= /usr/local
install: all guest
	install -D -m 755 $(BUILD)/lvmm $(DESTDIR)$(PREFIX)/bin/lvmm
	install -D -m 644 $(GUEST_KERNEL) $(DESTDIR)$(PREFIX)/share/lvmm/vmlinux
	install -D -m 644 $(GUEST_INITRAMFS) $(DESTDIR)$(PREFIX)/share/lvmm/initramfs.cpio
	install -D -m 644 $(BENCH_GUEST) $(DESTDIR)$(PREFIX)/share/lvmm/bench-guest.elf

format:
	$(Q)git ls-files '*.c' '*.h' '*.cu' '*.cuh' | xargs clang-format -i
format-check:
	$(Q)tests/run.sh --cmd "format" tools/format-check.sh
include-check:
	$(Q)tests/run.sh --cmd "include-graph" tools/include-graph.sh --self-test

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
# the fuzz objects too: a changed header (a struct's size) must rebuild every object using it
-include $(shell find $(BUILD)/fuzz -name '*.d' 2>/dev/null)

# Keep test objects between runs (they are intermediates of the pattern rules).
.SECONDARY:
