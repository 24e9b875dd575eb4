# guest-driver: the LightIOV frontend. The 6.1 series is applied by tools/guest/build-kernel.sh
# (the test kernel carries it); here lightiov_nvme.ko is built against the test kernel for
# tests/linux/test_linux_frontend.c with its static guest program, and test-extra checks the
# series (applies to pristine 6.1 files, checkpatch --strict) and the module against Debian's
# linux-headers (guest-driver/check.sh).
#
# Linux 6.1's kbuild writes objects next to an external module's sources, so the module builds in
# a tree of symlinks under $(BUILD)/guest-driver/ (as host-kmod.mk does): the sources stay clean.

GDRV_DIR      := $(BUILD)/guest-driver
GDRV_GUEST    := $(GDRV_DIR)/guest
GDRV_KO       := $(GDRV_GUEST)/lightiov_nvme.ko
GDRV_PROBE    := $(GDRV_DIR)/lio-frontend-probe
GDRV_SRCS     := guest-driver/module/lightiov_nvme.c guest-driver/module/Kbuild \
                 guest-driver/module/Makefile
GDRV_KDIR      = $(abspath $(GUEST_DIR)/linux)

.PHONY: guest-driver guest-driver-check

guest-driver: $(GDRV_KO) $(GDRV_PROBE)

$(GDRV_KO): $(GDRV_SRCS) $(wildcard $(GUEST_DIR)/linux/vmlinux.symvers) | $(GUEST_KERNEL)
	@echo "  KMOD    $@ (test kernel)"
	$(Q)rm -rf $(GDRV_GUEST) && mkdir -p $(GDRV_GUEST) && \
		ln -s $(addprefix $(CURDIR)/,$(GDRV_SRCS)) $(GDRV_GUEST)/
	$(Q)$(CC) -E -P -x c -D__ASSEMBLY__ -DLINKER_SCRIPT -nostdinc \
		-I$(GDRV_KDIR)/arch/x86/include -I$(GDRV_KDIR)/arch/x86/include/generated \
		-I$(GDRV_KDIR)/include -I$(GDRV_KDIR)/include/generated \
		-include $(GDRV_KDIR)/include/linux/kconfig.h \
		$(GDRV_KDIR)/scripts/module.lds.S -o $(GDRV_DIR)/module.lds
	$(Q)$(MAKE) --no-print-directory -C $(GDRV_GUEST) KDIR=$(GDRV_KDIR) \
		MODULE_LDS=$(abspath $(GDRV_DIR))/module.lds \
		SYMVERS=$(GDRV_KDIR)/vmlinux.symvers >$(GDRV_DIR)/build.log 2>&1 || \
		{ cat $(GDRV_DIR)/build.log; exit 1; }

# The VM side of the test: static, the only program the guest runs besides busybox.
$(GDRV_PROBE): guest-driver/tests/lio-frontend-probe.c guest-driver/tests/lio-frontend-pattern.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) -static -O2 -std=gnu11 $(WARN) -Iguest-driver/tests -o $@ $<

$(BUILD)/ltests/test_linux_frontend: | $(GDRV_KO) $(GDRV_PROBE)

guest-driver-check: | $(GUEST_KERNEL)
	$(Q)guest-driver/check.sh $(GDRV_DIR)/check $(GUEST_DIR)/linux/scripts/checkpatch.pl

test-extra: guest-driver-check
