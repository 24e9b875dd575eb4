# tools/guest: the Linux test guest (`make guest`), the stock Debian kernel (`make guest-debian`)
# and extract-vmlinux. Included by the top Makefile; everything lands in $(BUILD)/guest/.

GUEST_DIR       := $(BUILD)/guest
GUEST_KERNEL    := $(GUEST_DIR)/vmlinux
GUEST_INITRAMFS := $(GUEST_DIR)/initramfs.cpio
GUEST_ROOTDISK  := $(GUEST_DIR)/rootfs.img
GUEST_SWEEP     := $(GUEST_DIR)/nvme-sweep
GUEST_VSOCK     := $(GUEST_DIR)/vsock-test
GUEST_VFIO      := $(GUEST_DIR)/vfio-test
GUEST_NETBENCH  := $(GUEST_DIR)/net-bench
GUEST_IOCHECK   := $(GUEST_DIR)/io-check
GUEST_SRC       := tools/guest

BINS += $(BUILD)/extract-vmlinux

.PHONY: guest guest-kernel guest-debian

guest: $(GUEST_KERNEL) $(GUEST_INITRAMFS) $(GUEST_ROOTDISK) $(GUEST_SWEEP) $(GUEST_VSOCK) $(GUEST_NETBENCH) \
       $(GUEST_VFIO) $(GUEST_IOCHECK)

# build-kernel.sh keeps its own stamp (fragment, patches, source package version) and returns at
# once when nothing changed, so running it on every `make guest` is cheap and never stale.
guest-kernel:
	$(Q)tools/install-deps.sh
	$(Q)$(GUEST_SRC)/build-kernel.sh $(GUEST_DIR)

$(GUEST_KERNEL): guest-kernel

$(GUEST_INITRAMFS): $(GUEST_SRC)/build-initramfs.sh $(GUEST_SRC)/init $(GUEST_SRC)/fstab \
		    $(wildcard $(GUEST_SRC)/tests/*.sh) | guest-kernel
	$(Q)$(GUEST_SRC)/build-initramfs.sh $(GUEST_DIR)/linux $@

# The same root as a read-only ext4 image for root=/dev/vda (docs/boot.md): no initramfs to copy.
$(GUEST_ROOTDISK): $(GUEST_SRC)/build-initramfs.sh $(GUEST_SRC)/init $(GUEST_SRC)/fstab \
		   $(wildcard $(GUEST_SRC)/tests/*.sh)
	$(Q)$(GUEST_SRC)/build-initramfs.sh $(GUEST_DIR)/linux $@

# Guest user space of ours is static: the test guests carry busybox-static and nothing else.
$(GUEST_SWEEP): $(GUEST_SRC)/nvme-sweep.c include/lightiov/nvme.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) -static -O2 -std=gnu11 $(WARN) -D_GNU_SOURCE -Iinclude -o $@ $<

# file and block-device checks, many in one process (test_linux_vblk)
$(GUEST_IOCHECK): $(GUEST_SRC)/io-check.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) -static -O2 -std=gnu11 $(WARN) -D_GNU_SOURCE -o $@ $<

$(GUEST_VSOCK): $(GUEST_SRC)/vsock-test.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) -static -O2 -std=gnu11 $(WARN) -D_GNU_SOURCE -o $@ $<

# test_linux_vfio's guest side: lvmm's VFIO library and its user-space NVMe driver (nvme_pci.c)
GUEST_VFIO_SRCS := $(GUEST_SRC)/vfio-test.c $(wildcard host-kmod/vfio/*.c)
$(GUEST_VFIO): $(GUEST_VFIO_SRCS) $(wildcard host-kmod/vfio/*.h) \
	       include/lightiov/nvme.h include/lightiov/nvmeq.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) -static -O2 -std=gnu11 $(WARN) -D_GNU_SOURCE -Iinclude -Ihost-kmod -o $@ \
		$(GUEST_VFIO_SRCS)

# make bench's virtio-net client (tools/bench/netbench.py adds it to the initramfs it boots)
$(GUEST_NETBENCH): $(GUEST_SRC)/net-bench.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) -static -O2 -std=gnu11 $(WARN) -D_GNU_SOURCE -o $@ $<

$(BUILD)/extract-vmlinux: $(GUEST_SRC)/extract-vmlinux.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	$(Q)$(CC) -std=gnu11 -O2 $(WARN) -D_GNU_SOURCE -o $@ $<

# Not in CI: the Debian cloud kernel takes far longer than CI allows to boot on kvm_pvm hosts.
guest-debian: $(BUILD)/extract-vmlinux
	$(Q)$(GUEST_SRC)/fetch-debian-kernel.sh $(GUEST_DIR)/debian $(BUILD)/extract-vmlinux

# The unit test runs the tool it tests (order-only: not linked in).
$(BUILD)/tests/test_extract_vmlinux: | $(BUILD)/extract-vmlinux

# softssd for a guest that plays the host (tests/linux/test_linux_ssd_vfio.c: softssd --vfio on
# the guest's vNVMe bound to vfio-pci): lvmm's own code, static.
GUEST_SSD := $(GUEST_DIR)/ssd-guest
$(GUEST_SSD): $(GUEST_SRC)/ssd-guest.c $(BUILD)/liblvmm.a
	@mkdir -p $(dir $@)
	@echo "  CC      $@ (static)"
	$(Q)$(CC) -static -O2 -std=gnu11 $(WARN) -D_GNU_SOURCE $(INC_HOSTKMOD) -o $@ $< \
	    $(BUILD)/liblvmm.a $(LDLIBS)
$(BUILD)/ltests/test_linux_ssd_vfio: | $(GUEST_SSD)
