# gpu-fs fragment of the top-level Makefile: builds $(BUILD)/gvdk by default and hooks the
# gpu-fs host-side suite (Check tests + nvcc compile of the CUDA parts) into test-extra.

GPUFS_CFLAGS := -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -Igpu-fs/include -Igpu-fs/gvdk -MMD -MP

BINS += $(BUILD)/gvdk

$(BUILD)/gpu-fs/obj/%.o: gpu-fs/gvdk/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(GPUFS_CFLAGS) -c -o $@ $<

$(BUILD)/gvdk: $(BUILD)/gpu-fs/obj/main.o $(BUILD)/gpu-fs/obj/gvdk.o
	@echo "  LD      $@"
	$(Q)$(CC) $(LDFLAGS) -o $@ $^

.PHONY: test-gpu-fs
test-gpu-fs:
	$(Q)tests/run.sh --cmd gpu-fs $(MAKE) --no-print-directory -C gpu-fs \
		BUILD=$(abspath $(BUILD))/gpu-fs LVMM=$(abspath $(BUILD))/lvmm test

test-extra: test-gpu-fs

-include $(wildcard $(BUILD)/gpu-fs/obj/*.d)
