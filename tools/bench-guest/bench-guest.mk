# Bench/test guest: a freestanding 64-bit ELF lvmm boots in well under a second.
# Every tools/bench-guest/*.c and *.S is part of it (modes register themselves).

BENCH_GUEST     := $(BUILD)/bench-guest/bench-guest.elf
BENCH_SRCS      := $(wildcard tools/bench-guest/*.c) $(wildcard tools/bench-guest/*.S)
BENCH_OBJS      := $(patsubst tools/bench-guest/%,$(BUILD)/bench-guest/%.o,$(BENCH_SRCS))
BENCH_CFLAGS    := -std=gnu11 -O2 -g -Wall -Wextra -Werror -ffreestanding -fno-pic -fno-pie \
                   -fno-stack-protector -fno-asynchronous-unwind-tables -mno-red-zone \
                   -mgeneral-regs-only -mcmodel=small -fcf-protection=none -MMD -MP \
                   -Itools/bench-guest -Iinclude
BINS            += $(BENCH_GUEST)
TEST_DEPS       += $(BENCH_GUEST)

$(BUILD)/bench-guest/%.o: tools/bench-guest/%
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)gcc $(BENCH_CFLAGS) -c -o $@ $<

$(BENCH_GUEST): $(BENCH_OBJS) tools/bench-guest/bench.lds
	@echo "  LD      $@"
	$(Q)gcc -nostdlib -static -no-pie -Wl,--build-id=none -Wl,--no-warn-rwx-segments -Wl,-z,noexecstack -Wl,-z,max-page-size=4096 \
		-T tools/bench-guest/bench.lds -o $@ $(BENCH_OBJS)

-include $(wildcard $(BUILD)/bench-guest/*.d)
