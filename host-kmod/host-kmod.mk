# host-kmod: lightiov.ko built against the test kernel for its Linux-guest test (tests/linux/
# test_linux_kmod.c), against Debian's linux-headers in test-extra, and checkpatch on its sources.
#
# Linux 6.1's kbuild writes objects next to the sources of an external module, so each build
# runs in a tree of symlinks under $(BUILD)/kmod/ (the sources stay single and clean). The test
# kernel ran `make vmlinux` only: its module linker script is generated here, its exports come
# from vmlinux.symvers.

KMOD_DIR      := $(BUILD)/kmod
KMOD_GUEST    := $(KMOD_DIR)/guest
KMOD_GUEST_KO := $(KMOD_GUEST)/host-kmod/lightiov.ko
KMOD_TESTPROG := $(KMOD_DIR)/lio-kmod-test
KMOD_CPIO     := $(KMOD_DIR)/initramfs.cpio
KMOD_COMMON   := check.c voltable.c abi.c
KMOD_SRCS     := $(wildcard host-kmod/kmod/*.[ch]) $(KMOD_COMMON:%=host-kmod/common/%) \
                 host-kmod/Kbuild host-kmod/Makefile \
                 $(wildcard include/lightiov/*.h)
KMOD_GUEST_KDIR = $(abspath $(GUEST_DIR)/linux)

# $(call kmod_stage,DIR): the symlink tree kbuild builds in (one shell command)
kmod_stage = rm -rf $(1) && mkdir -p $(1)/host-kmod/common $(1)/include && \
	cp -rs $(CURDIR)/host-kmod/kmod $(1)/host-kmod/kmod && \
	ln -s $(KMOD_COMMON:%=$(CURDIR)/host-kmod/common/%) $(1)/host-kmod/common/ && \
	ln -s $(CURDIR)/host-kmod/Kbuild $(CURDIR)/host-kmod/Makefile $(1)/host-kmod/ && \
	cp -rs $(CURDIR)/include/lightiov $(1)/include/lightiov

.PHONY: kmod kmod-host kmod-checkpatch

kmod: $(KMOD_CPIO)

$(KMOD_GUEST_KO): $(KMOD_SRCS) $(wildcard $(GUEST_DIR)/linux/vmlinux.symvers) | $(GUEST_KERNEL)
	@echo "  KMOD    $@ (test kernel)"
	$(Q)$(call kmod_stage,$(KMOD_GUEST))
	$(Q)$(CC) -E -P -x c -D__ASSEMBLY__ -DLINKER_SCRIPT -nostdinc \
		-I$(KMOD_GUEST_KDIR)/arch/x86/include -I$(KMOD_GUEST_KDIR)/arch/x86/include/generated \
		-I$(KMOD_GUEST_KDIR)/include -I$(KMOD_GUEST_KDIR)/include/generated \
		-include $(KMOD_GUEST_KDIR)/include/linux/kconfig.h \
		$(KMOD_GUEST_KDIR)/scripts/module.lds.S -o $(KMOD_GUEST)/module.lds
	$(Q)$(MAKE) --no-print-directory -C $(KMOD_GUEST)/host-kmod KDIR=$(KMOD_GUEST_KDIR) \
		MODULE_LDS=$(abspath $(KMOD_GUEST))/module.lds \
		SYMVERS=$(KMOD_GUEST_KDIR)/vmlinux.symvers modules >$(KMOD_GUEST)/build.log 2>&1 || \
		{ cat $(KMOD_GUEST)/build.log; exit 1; }

# The VM side of the test: static, it runs as the guest's only program besides busybox. It links
# lvmm's own client (lio_client.c) to drive the module through the ioctl transport lvmm uses.
$(KMOD_TESTPROG): tools/guest/kmod/lio-kmod-test.c host-kmod/client/lio_client.c \
		  host-kmod/client/lio_client.h $(wildcard include/lightiov/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) -static -O2 -std=gnu11 $(WARN) -D_GNU_SOURCE -Iinclude -Ihost-kmod -o $@ \
		tools/guest/kmod/lio-kmod-test.c host-kmod/client/lio_client.c

# gen_init_cpio comes with the default initramfs, which stays as it is.
$(KMOD_CPIO): tools/guest/kmod/build-initramfs.sh tools/guest/kmod/init tools/guest/fstab \
	      $(KMOD_GUEST_KO) $(KMOD_TESTPROG) | $(GUEST_INITRAMFS)
	$(Q)tools/guest/kmod/build-initramfs.sh $(GUEST_DIR)/gen_init_cpio $(KMOD_GUEST_KO) \
		$(KMOD_TESTPROG) $@

$(BUILD)/ltests/test_linux_kmod: | $(KMOD_CPIO)

# Debian's headers for the host's kernel flavour (linux-headers-amd64, installed on demand).
kmod-host:
	$(Q)tools/install-deps.sh host-kmod/debian-packages.txt
	$(Q)kdir=$$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n 1); \
	[ -n "$$kdir" ] || { echo "kmod-host: no /usr/src/linux-headers-*-amd64" >&2; exit 1; }; \
	echo "  KMOD    $(KMOD_DIR)/host/host-kmod/lightiov.ko ($$kdir)"; \
	$(call kmod_stage,$(KMOD_DIR)/host); \
	$(MAKE) --no-print-directory -C $(KMOD_DIR)/host/host-kmod KDIR=$$kdir modules \
		>$(KMOD_DIR)/host/build.log 2>&1 || { cat $(KMOD_DIR)/host/build.log; exit 1; }; \
	if grep -E 'warning:|WARNING:' $(KMOD_DIR)/host/build.log; then exit 1; fi

# --strict on the module's own sources; common/ is the project's user-space-style C.
kmod-checkpatch: | $(GUEST_KERNEL)
	$(Q)$(GUEST_DIR)/linux/scripts/checkpatch.pl --strict --no-tree --quiet \
		--file host-kmod/kmod/*.[ch]
	@echo "  CHECK   host-kmod/kmod: checkpatch --strict clean"

test-extra: kmod-host kmod-checkpatch
