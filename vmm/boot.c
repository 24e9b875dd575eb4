/* x86-64 Linux boot: loads the kernel and initramfs, then writes the zero page (E820, command
 * line, initrd), the identity page tables and the ACPI and MP tables into guest memory. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "acpi.h"
#include "boot.h"
#include "bootparam.h"
#include "fsutil.h"
#include "layout.h"
#include "loader.h"
#include "mptable.h"

#define BOOT_PAGE	4096ULL
#define BOOT_2M		(2ULL << 20)
#define BOOT_PT_PRESENT 0x1ULL
#define BOOT_PT_RW	0x2ULL
#define BOOT_PT_HUGE	0x80ULL
#define BOOT_PT_LOW_GIB 4 /* page directories: one per GiB identity-mapped */
/* Linux's 64-bit head code requires kernel_alignment; vmlinux carries no header to say it. */
#define BOOT_ELF_KERNEL_ALIGN 0x1000000U

static int e820_add(struct e820_entry *tab, unsigned max, unsigned *n, uint64_t addr, uint64_t size,
		    uint32_t type)
{
	if (!size)
		return 0;
	if (*n >= max)
		return -ENOSPC;
	tab[*n].addr = addr;
	tab[*n].size = size;
	tab[*n].type = type;
	(*n)++;
	return 0;
}

/* The map with the ECAM windows of nseg PCI segments reserved. */
static int boot_e820_segments(const struct guest_mem *gm, struct e820_entry *tab, unsigned max,
			      unsigned nseg)
{
	unsigned n = 0;
	int r = 0;

	for (unsigned i = 0; i < gm->nslots && i < GMEM_MAX_SLOTS; i++) {
		uint64_t s = gm->slots[i].gpa, e = s + gm->slots[i].size;

		/* Below 1 MiB only base memory is RAM: the top KiB (MP table) and the BIOS area
		 * with the ACPI tables are reserved below, the VGA hole is not RAM at all. */
		if (s < LAYOUT_MPTABLE)
			r |= e820_add(tab, max, &n, s,
				      (e < LAYOUT_MPTABLE ? e : LAYOUT_MPTABLE) - s, E820_RAM);
		if (e > LAYOUT_HIGH_RAM) {
			uint64_t lo = s > LAYOUT_HIGH_RAM ? s : LAYOUT_HIGH_RAM;

			r |= e820_add(tab, max, &n, lo, e - lo, E820_RAM);
		}
	}
	r |=
	    e820_add(tab, max, &n, LAYOUT_MPTABLE, LAYOUT_EBDA_END - LAYOUT_MPTABLE, E820_RESERVED);
	r |= e820_add(tab, max, &n, LAYOUT_BIOS_START, LAYOUT_HIGH_RAM - LAYOUT_BIOS_START,
		      E820_RESERVED);
	/* Linux uses MMCONFIG only when the ECAM windows are reserved in the firmware map: one
	 * segment's left out and it falls back to type 1 access, which reaches segment 0 only. */
	r |= e820_add(tab, max, &n, LAYOUT_ECAM_START, LAYOUT_ECAM_SIZE * nseg, E820_RESERVED);
	if (r)
		return -ENOSPC;

	/* Sorted by address, as firmware hands it over (insertion sort: a handful of entries). */
	for (unsigned i = 1; i < n; i++) {
		struct e820_entry t = tab[i];
		unsigned j = i;

		for (; j > 0 && tab[j - 1].addr > t.addr; j--)
			tab[j] = tab[j - 1];
		tab[j] = t;
	}
	return (int)n;
}

int boot_build_e820(const struct guest_mem *gm, struct e820_entry *tab, unsigned max)
{
	return boot_e820_segments(gm, tab, max, 1);
}

uint64_t boot_low_ram_end(const struct guest_mem *gm)
{
	for (unsigned i = 0; i < gm->nslots && i < GMEM_MAX_SLOTS; i++) {
		const struct gmem_slot *s = &gm->slots[i];

		if (s->gpa <= LAYOUT_HIGH_RAM && LAYOUT_HIGH_RAM - s->gpa < s->size) {
			uint64_t end = s->gpa + s->size;

			return end < LAYOUT_MMIO32_START ? end : LAYOUT_MMIO32_START;
		}
	}
	return 0;
}

int boot_setup_pagetables(struct guest_mem *gm, uint64_t *cr3)
{
	const uint64_t pdpt = LAYOUT_PML4 + BOOT_PAGE, pd = pdpt + BOOT_PAGE;
	uint64_t *t = gmem_ptr(gm, LAYOUT_PML4, (2 + BOOT_PT_LOW_GIB) * BOOT_PAGE);

	if (!t)
		return -EFAULT;
	memset(t, 0, (2 + BOOT_PT_LOW_GIB) * BOOT_PAGE);
	t[0] = pdpt | BOOT_PT_PRESENT | BOOT_PT_RW;
	for (uint64_t g = 0; g < BOOT_PT_LOW_GIB; g++) {
		uint64_t *pdpte = &t[512 + g];
		uint64_t *pde = &t[1024 + g * 512];

		*pdpte = (pd + g * BOOT_PAGE) | BOOT_PT_PRESENT | BOOT_PT_RW;
		for (uint64_t i = 0; i < 512; i++)
			pde[i] =
			    ((g << 30) + i * BOOT_2M) | BOOT_PT_PRESENT | BOOT_PT_RW | BOOT_PT_HUGE;
	}
	*cr3 = LAYOUT_PML4;
	return 0;
}

int boot_place_initrd(uint64_t lo, uint64_t hi, uint64_t size, uint64_t *start)
{
	uint64_t s;

	lo = (lo + BOOT_PAGE - 1) & ~(BOOT_PAGE - 1);
	if (hi < lo || size > hi - lo)
		return -ENOSPC;
	s = (hi - size) & ~(BOOT_PAGE - 1);
	if (s < lo)
		return -ENOSPC;
	*start = s;
	return 0;
}

static int boot_read_fd(int fd, uint8_t *dst, uint64_t len)
{
	struct loader_src src;
	struct loader_fd f;
	int r = loader_src_fd(&src, &f, fd);

	if (r)
		return r;
	if (len > src.size)
		return -EIO;
	return src.read(src.opaque, 0, dst, len);
}

/* A client's file under --allowed-dir is opened by a walk beneath it (symlinks, "..", FIFOs
 * refused as the walk goes, so a path swapped after the API's check cannot escape). */
static int boot_open(const char *root, const char *what, const char *path, char *err,
		     unsigned errlen)
{
	int fd;

	if (root && root[0])
		return fsutil_open(root, what, path, O_RDONLY, 0, FSUTIL_REGULAR, err, errlen);
	/* O_NONBLOCK: a FIFO given as a file must not hang us (it is refused by the caller). */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		fd = -errno;
		snprintf(err, errlen, "%s %s: %s", what, path, strerror(-fd));
	}
	return fd;
}

static int boot_load_initrd(struct guest_mem *gm, const char *root, const char *path,
			    uint64_t kernel_end, uint64_t initrd_max, struct boot_params *bp,
			    struct boot_info *bi, char *err, unsigned errlen)
{
	uint64_t hi = boot_low_ram_end(gm), start, size;
	struct loader_src src;
	struct loader_fd f;
	uint8_t *dst;
	int fd, r;

	fd = boot_open(root, "initramfs", path, err, errlen);
	if (fd < 0)
		return fd;
	r = loader_src_fd(&src, &f, fd);
	if (r) {
		snprintf(err, errlen, "initramfs %s: not a regular file (%s)", path, strerror(-r));
		goto out;
	}
	size = src.size;
	if (size == 0)
		goto out;
	if (hi > initrd_max + 1)
		hi = initrd_max + 1;
	r = boot_place_initrd(kernel_end, hi, size, &start);
	if (r) {
		snprintf(err, errlen,
			 "initramfs %s: %" PRIu64
			 " bytes do not fit between the kernel end 0x%" PRIx64 " and 0x%" PRIx64
			 " (more memory needed)",
			 path, size, kernel_end, hi);
		r = -EFBIG;
		goto out;
	}
	dst = gmem_ptr(gm, start, size);
	if (!dst) {
		snprintf(err, errlen, "initramfs %s: 0x%" PRIx64 "+%" PRIu64 " is not guest RAM",
			 path, start, size);
		r = -EFAULT;
		goto out;
	}
	r = boot_read_fd(fd, dst, size);
	if (r) {
		snprintf(err, errlen, "initramfs %s: read failed: %s", path, strerror(-r));
		goto out;
	}
	bp->hdr.ramdisk_image = (uint32_t)start;
	bp->hdr.ramdisk_size = (uint32_t)size;
	bp->ext_ramdisk_image = (uint32_t)(start >> 32);
	bp->ext_ramdisk_size = (uint32_t)(size >> 32);
	bi->initrd_start = start;
	bi->initrd_size = size;
out:
	close(fd);
	return r;
}

static int boot_load_kernel(struct guest_mem *gm, const char *root, const char *path,
			    struct loader_result *res, char *err, unsigned errlen)
{
	char sub[256];
	struct loader_src src;
	struct loader_fd f;
	int fd, r;

	memset(res, 0, sizeof(*res));
	fd = boot_open(root, "kernel", path, err, errlen);
	if (fd < 0)
		return fd;
	r = loader_src_fd(&src, &f, fd);
	if (r) {
		snprintf(err, errlen, "kernel %s: not a regular file (%s)", path, strerror(-r));
		goto out;
	}
	r = loader_load(gm, &src, res, sub, sizeof(sub));
	if (r)
		snprintf(err, errlen, "kernel %s: %s", path, sub);
out:
	close(fd);
	return r;
}

/* 32 bytes from the host's getrandom() as a SETUP_RNG_SEED entry, what QEMU gives too: the guest's
 * RNG is seeded before its first use instead of hashing its whole input pool at every request
 * until enough interrupts were counted, which on an emulating host costs a visible part of a boot.
 * A fresh seed at every boot and reboot; the kernel wipes it once read. */
static int boot_rng_seed(struct guest_mem *gm, struct boot_params *bp, char *err, unsigned errlen)
{
	uint8_t buf[sizeof(struct setup_data) + BOOT_RNG_SEED_SIZE];
	struct setup_data *sd = (struct setup_data *)buf;
	ssize_t n;

	memset(buf, 0, sizeof(buf));
	sd->type = SETUP_RNG_SEED;
	sd->len = BOOT_RNG_SEED_SIZE;
	do
		n = getrandom(sd->data, BOOT_RNG_SEED_SIZE, 0);
	while (n < 0 && errno == EINTR);
	if (n != BOOT_RNG_SEED_SIZE) {
		snprintf(err, errlen, "boot: getrandom for the guest's RNG seed: %s",
			 n < 0 ? strerror(errno) : "short read");
		return n < 0 ? -errno : -EIO;
	}
	if (gmem_write(gm, LAYOUT_SETUP_DATA, buf, sizeof(buf))) {
		snprintf(err, errlen, "setup_data: cannot write at 0x%llx", LAYOUT_SETUP_DATA);
		explicit_bzero(buf, sizeof(buf));
		return -EFAULT;
	}
	explicit_bzero(buf, sizeof(buf));
	bp->hdr.setup_data = LAYOUT_SETUP_DATA;
	return 0;
}

int boot_load_linux(struct guest_mem *gm, const struct vm_config *cfg, const char *cmdline,
		    struct boot_info *bi, char *err, unsigned errlen)
{
	struct boot_params *bp;
	struct loader_result res;
	uint64_t kernel_end, initrd_max, cmdmax, rsdp = 0;
	size_t cmdlen;
	unsigned nseg;
	int n, r;

	memset(bi, 0, sizeof(*bi));
	if (!cmdline)
		cmdline = cfg->cmdline;
	if (!boot_low_ram_end(gm) || !gmem_ptr(gm, 0, LAYOUT_HIGH_RAM)) {
		snprintf(err, errlen, "memory: guest RAM does not cover the first MiB");
		return -EINVAL;
	}
	bp = calloc(1, sizeof(*bp));
	if (!bp) {
		snprintf(err, errlen, "boot: out of memory for the zero page");
		return -ENOMEM;
	}

	r = boot_load_kernel(gm, cfg->allowed_dir, cfg->kernel, &res, err, errlen);
	if (r)
		goto out;

	if (res.kind == LOADER_BZIMAGE) {
		/* The file's header is the start of the zero page; the loader fields follow. */
		bp->hdr = res.hdr;
		initrd_max = res.hdr.initrd_addr_max;
		cmdmax = res.hdr.cmdline_size;
		bp->hdr.code32_start = (uint32_t)res.start;
	} else {
		bp->hdr.boot_flag = BOOT_FLAG_MAGIC;
		bp->hdr.header = BOOT_HDR_MAGIC;
		bp->hdr.version = BOOT_ELF_PROTOCOL;
		bp->hdr.kernel_alignment = BOOT_ELF_KERNEL_ALIGN;
		bp->hdr.cmdline_size = BOOT_ELF_CMDLINE_MAX;
		initrd_max = BOOT_DEFAULT_INITRD_MAX;
		cmdmax = BOOT_ELF_CMDLINE_MAX;
	}
	/* Linux truncates a longer line silently, dropping the host-compat parameters at its end:
	 * refuse it instead. */
	cmdlen = strlen(cmdline);
	if (cmdmax > LAYOUT_CMDLINE_MAX - 1)
		cmdmax = LAYOUT_CMDLINE_MAX - 1;
	if (cmdlen > cmdmax) {
		snprintf(err, errlen, "cmdline: %zu characters exceed the kernel's limit of %llu",
			 cmdlen, (unsigned long long)cmdmax);
		r = -E2BIG;
		goto out;
	}
	r = gmem_write(gm, LAYOUT_CMDLINE, cmdline, cmdlen + 1);
	if (r) {
		snprintf(err, errlen, "cmdline: cannot write at 0x%llx", LAYOUT_CMDLINE);
		goto out;
	}
	bp->hdr.type_of_loader = BOOT_LOADER_UNDEFINED;
	bp->hdr.loadflags |= BOOT_LOADFLAG_LOADED_HIGH;
	bp->hdr.cmd_line_ptr = (uint32_t)LAYOUT_CMDLINE;

	kernel_end = res.end;
	bi->entry = res.entry;
	bi->ap_entry = res.kind == LOADER_ELF && res.ap_entry;
	bi->kernel_start = res.start;
	bi->kernel_end = res.end;
	if (cfg->initramfs[0]) {
		r = boot_load_initrd(gm, cfg->allowed_dir, cfg->initramfs, kernel_end,
				     initrd_max ? initrd_max : BOOT_DEFAULT_INITRD_MAX, bp, bi, err,
				     errlen);
		if (r)
			goto out;
	}

	nseg = cfg->num_pci_segments ? cfg->num_pci_segments : 1;
	n = boot_e820_segments(gm, bp->e820_table, E820_MAX_ENTRIES, nseg);
	if (n < 0) {
		snprintf(err, errlen, "e820: more than %d entries", E820_MAX_ENTRIES);
		r = n;
		goto out;
	}
	bp->e820_entries = (uint8_t)n;

	r = boot_setup_pagetables(gm, &bi->cr3);
	if (r) {
		snprintf(err, errlen, "page tables: 0x%llx is not guest RAM", LAYOUT_PML4);
		goto out;
	}
	/* platform.num_pci_segments: a host bridge and an MCFG entry per segment */
	r = acpi_build_segments(gm, cfg->cpus, cfg->max_cpus, nseg, cfg->mmio64_size, &rsdp, err,
				errlen);
	if (r)
		goto out;
	bp->acpi_rsdp_addr = rsdp;
	r = mptable_build(gm, cfg->cpus, err, errlen);
	if (r)
		goto out;

	r = boot_rng_seed(gm, bp, err, errlen);
	if (r)
		goto out;

	r = gmem_write(gm, LAYOUT_ZERO_PAGE, bp, sizeof(*bp));
	if (r) {
		snprintf(err, errlen, "zero page: cannot write at 0x%llx", LAYOUT_ZERO_PAGE);
		goto out;
	}
	bi->zero_page = LAYOUT_ZERO_PAGE;
out:
	free(bp);
	return r;
}
