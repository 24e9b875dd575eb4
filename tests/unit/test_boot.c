/* Unit tests for vmm/boot.c: E820 maps for small and hole-crossing memory, identity page tables,
 * initrd placement, and boot_load_linux end to end with kernel and initramfs files on disk. */
#include <check.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot.h"
#include "bootparam.h"
#include "layout.h"
#include "testutil.h"

#define RAM_SIZE (64ULL << 20)

static uint8_t *ram;
static struct guest_mem gm;
static char err[512];
static char dir[64];
static char kpath[128], ipath[128];

static void setup(void)
{
	ram = calloc(1, RAM_SIZE);
	ck_assert_ptr_nonnull(ram);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	strcpy(dir, "/tmp/lvmm-test-boot-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(kpath, sizeof(kpath), "%s/vmlinux", dir);
	snprintf(ipath, sizeof(ipath), "%s/initrd", dir);
}

static void teardown(void)
{
	unlink(kpath);
	unlink(ipath);
	rmdir(dir);
	free(ram);
}

/* ---- E820 ---- */

static struct guest_mem fake_mem(uint64_t mem)
{
	struct guest_mem g = {.memfd = -1, .size = mem};
	uint64_t low = mem < LAYOUT_MMIO32_START ? mem : LAYOUT_MMIO32_START;

	/* the split the runtime uses: low RAM up to the 32-bit hole, the rest from 4 GiB */
	g.slots[g.nslots++] = (struct gmem_slot){.gpa = 0, .size = low};
	if (mem > low)
		g.slots[g.nslots++] = (struct gmem_slot){.gpa = LAYOUT_RAM_HIGH, .size = mem - low};
	return g;
}

/* RAM entries must be backed by a slot (fake slots have no host memory to ask gmem_ptr). */
static int in_slot(const struct guest_mem *g, uint64_t s, uint64_t len)
{
	for (unsigned i = 0; i < g->nslots; i++)
		if (s >= g->slots[i].gpa && s + len <= g->slots[i].gpa + g->slots[i].size)
			return 1;
	return 0;
}

static uint64_t e820_check(const struct guest_mem *g, struct e820_entry *t, int n)
{
	uint64_t ram_total = 0;

	ck_assert_int_gt(n, 0);
	for (int i = 0; i < n; i++) {
		ck_assert_uint_gt(t[i].size, 0);
		if (i)
			ck_assert_uint_le(t[i - 1].addr + t[i - 1].size, t[i].addr); /* sorted */
		if (t[i].type == E820_RAM) {
			uint64_t s = t[i].addr, e = s + t[i].size;

			ram_total += t[i].size;
			/* RAM never covers the legacy hole, MP/ACPI tables, MMIO or ECAM */
			ck_assert(e <= LAYOUT_MPTABLE || s >= LAYOUT_HIGH_RAM);
			ck_assert(e <= LAYOUT_MMIO32_START || s >= LAYOUT_RAM_HIGH);
			ck_assert(in_slot(g, s, t[i].size));
		} else {
			ck_assert_uint_eq(t[i].type, E820_RESERVED);
		}
	}
	return ram_total;
}

static int e820_find(struct e820_entry *t, int n, uint64_t addr, uint64_t size, uint32_t type)
{
	for (int i = 0; i < n; i++)
		if (t[i].addr == addr && t[i].size == size && t[i].type == type)
			return 1;
	return 0;
}

START_TEST(e820_small)
{
	struct guest_mem g = fake_mem(128ULL << 20);
	struct e820_entry t[E820_MAX_ENTRIES];
	int n = boot_build_e820(&g, t, E820_MAX_ENTRIES);

	ck_assert_int_eq(n, 5);
	ck_assert_uint_eq(e820_check(&g, t, n),
			  (128ULL << 20) - (LAYOUT_HIGH_RAM - LAYOUT_MPTABLE));
	ck_assert(e820_find(t, n, 0, LAYOUT_MPTABLE, E820_RAM));
	ck_assert(e820_find(t, n, LAYOUT_MPTABLE, LAYOUT_EBDA_END - LAYOUT_MPTABLE, E820_RESERVED));
	ck_assert(e820_find(t, n, LAYOUT_BIOS_START, 0x20000, E820_RESERVED));
	ck_assert(e820_find(t, n, LAYOUT_HIGH_RAM, (128ULL << 20) - LAYOUT_HIGH_RAM, E820_RAM));
	ck_assert(e820_find(t, n, LAYOUT_ECAM_START, LAYOUT_ECAM_SIZE, E820_RESERVED));
	ck_assert_uint_eq(boot_low_ram_end(&g), 128ULL << 20);
}
END_TEST

START_TEST(e820_crosses_hole)
{
	uint64_t mem = 8ULL << 30;
	struct guest_mem g = fake_mem(mem);
	struct e820_entry t[E820_MAX_ENTRIES];
	int n = boot_build_e820(&g, t, E820_MAX_ENTRIES);

	ck_assert_int_eq(n, 6);
	ck_assert_uint_eq(e820_check(&g, t, n), mem - (LAYOUT_HIGH_RAM - LAYOUT_MPTABLE));
	ck_assert(
	    e820_find(t, n, LAYOUT_HIGH_RAM, LAYOUT_MMIO32_START - LAYOUT_HIGH_RAM, E820_RAM));
	ck_assert(e820_find(t, n, LAYOUT_RAM_HIGH, mem - LAYOUT_MMIO32_START, E820_RAM));
	ck_assert(e820_find(t, n, LAYOUT_ECAM_START, LAYOUT_ECAM_SIZE, E820_RESERVED));
	ck_assert_uint_eq(t[n - 1].addr, LAYOUT_RAM_HIGH); /* high RAM sorts last */
	ck_assert_uint_eq(boot_low_ram_end(&g), LAYOUT_MMIO32_START);

	/* exactly at the hole: nothing above 4 GiB */
	g = fake_mem(LAYOUT_MMIO32_START);
	n = boot_build_e820(&g, t, E820_MAX_ENTRIES);
	ck_assert_int_eq(n, 5);
	ck_assert_uint_eq(e820_check(&g, t, n),
			  LAYOUT_MMIO32_START - (LAYOUT_HIGH_RAM - LAYOUT_MPTABLE));
}
END_TEST

START_TEST(e820_limits)
{
	struct guest_mem g = fake_mem(8ULL << 30), none = {.memfd = -1};
	struct e820_entry t[4];

	ck_assert_int_eq(boot_build_e820(&g, t, 4), -ENOSPC);
	ck_assert_uint_eq(boot_low_ram_end(&none), 0);
	none.nslots = 1;
	none.slots[0] = (struct gmem_slot){.gpa = LAYOUT_RAM_HIGH, .size = 1 << 20};
	ck_assert_uint_eq(boot_low_ram_end(&none), 0);
}
END_TEST

/* ---- page tables ---- */

static uint64_t walk(uint64_t va)
{
	const uint64_t *pml4 = (const uint64_t *)(ram + LAYOUT_PML4);
	uint64_t e = pml4[(va >> 39) & 511];
	const uint64_t *pdpt, *pd;

	ck_assert_uint_eq(e & 3, 3);
	pdpt = (const uint64_t *)(ram + (e & ~0xfffULL));
	e = pdpt[(va >> 30) & 511];
	ck_assert_uint_eq(e & 3, 3);
	ck_assert_uint_eq(e & 0x80, 0);
	pd = (const uint64_t *)(ram + (e & ~0xfffULL));
	e = pd[(va >> 21) & 511];
	ck_assert_uint_eq(e & 0x83, 0x83);
	return (e & ~0x1fffffULL & 0x000fffffffffffffULL) | (va & 0x1fffff);
}

START_TEST(pagetables_identity)
{
	uint64_t cr3 = 0;
	const uint64_t *pml4 = (const uint64_t *)(ram + LAYOUT_PML4);

	memset(ram + LAYOUT_PML4, 0xee, 6 * 4096); /* stale garbage must be cleared */
	ck_assert_int_eq(boot_setup_pagetables(&gm, &cr3), 0);
	ck_assert_uint_eq(cr3, LAYOUT_PML4);
	for (uint64_t va = 0; va < (4ULL << 30); va += 0x1234567)
		ck_assert_uint_eq(walk(va), va);
	ck_assert_uint_eq(walk(0xfee00000), 0xfee00000);
	ck_assert_uint_eq(walk(0xffffffff), 0xffffffff);
	for (unsigned i = 1; i < 512; i++)
		ck_assert_uint_eq(pml4[i], 0);
	/* the tables end before the command line */
	ck_assert_uint_le(LAYOUT_PML4 + 6 * 4096, LAYOUT_CMDLINE);
}
END_TEST

START_TEST(initrd_placement)
{
	uint64_t s = 0;

	ck_assert_int_eq(boot_place_initrd(0x2000000, 0x4000000, 0x1800, &s), 0);
	ck_assert_uint_eq(s, 0x4000000 - 0x2000);
	ck_assert_int_eq(boot_place_initrd(0x2000001, 0x4000000, 0x2000000 - 0x1000, &s), 0);
	ck_assert_uint_eq(s, 0x2001000);
	ck_assert_int_eq(boot_place_initrd(0x2000001, 0x4000000, 0x2000000, &s), -ENOSPC);
	ck_assert_int_eq(boot_place_initrd(0x4000000, 0x2000000, 1, &s), -ENOSPC);
	ck_assert_int_eq(boot_place_initrd(0, 0x10000000, UINT64_MAX, &s), -ENOSPC);
	/* top not page aligned: rounds down */
	ck_assert_int_eq(boot_place_initrd(0, 0x7fffffff + 1ULL - 0x800, 0x1000, &s), 0);
	ck_assert_uint_eq(s % 4096, 0);
	ck_assert_uint_le(s + 0x1000, 0x7fffffffULL + 1 - 0x800);
}
END_TEST

/* ---- boot_load_linux ---- */

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

#define KERNEL_PADDR 0x1000000ULL
#define KERNEL_LEN   0x3000

/* vmlinux-shaped: virtual link address, physical load address, physical e_entry. */
static void write_elf_kernel(void)
{
	static uint8_t img[0x1000 + KERNEL_LEN];
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Phdr *ph = (Elf64_Phdr *)(img + sizeof(*eh));

	memset(img, 0, sizeof(img));
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_entry = KERNEL_PADDR;
	eh->e_phoff = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 1;
	ph->p_type = PT_LOAD;
	ph->p_offset = 0x1000;
	ph->p_vaddr = 0xffffffff81000000ULL;
	ph->p_paddr = KERNEL_PADDR;
	ph->p_filesz = KERNEL_LEN;
	ph->p_memsz = KERNEL_LEN + 0x1000;
	for (size_t i = 0; i < KERNEL_LEN; i++)
		img[0x1000 + i] = (uint8_t)(i ^ 0x5a);
	write_file(kpath, img, sizeof(img));
}

static void cfg_init(struct vm_config *c, int with_initrd)
{
	config_defaults(c);
	c->cpus = 2;
	c->max_cpus = 2;
	c->memory = RAM_SIZE;
	strcpy(c->kernel, kpath);
	if (with_initrd)
		strcpy(c->initramfs, ipath);
	strcpy(c->cmdline, "from-config");
}

static const struct boot_params *zp(void)
{
	return (const struct boot_params *)(ram + LAYOUT_ZERO_PAGE);
}

/* The zero page's setup_data is one SETUP_RNG_SEED of 32 bytes from the host's RNG, inside the
 * reserved F segment (no e820 split), fresh at every load. */
START_TEST(linux_rng_seed)
{
	struct vm_config c;
	struct boot_info bi;
	const struct setup_data *sd = (const struct setup_data *)(ram + LAYOUT_SETUP_DATA);
	struct e820_entry t[E820_MAX_ENTRIES];
	uint8_t first[BOOT_RNG_SEED_SIZE], zero[BOOT_RNG_SEED_SIZE] = {0};
	int n;

	write_elf_kernel();
	cfg_init(&c, 0);
	ck_assert_msg(boot_load_linux(&gm, &c, "", &bi, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(zp()->hdr.setup_data, LAYOUT_SETUP_DATA);
	ck_assert_uint_eq(sd->next, 0);
	ck_assert_uint_eq(sd->type, SETUP_RNG_SEED);
	ck_assert_uint_eq(sd->len, BOOT_RNG_SEED_SIZE);
	ck_assert_msg(memcmp(sd->data, zero, sizeof(zero)), "seed is all zero");
	memcpy(first, sd->data, sizeof(first));

	/* the guest wipes it once read; a reboot loads a new one */
	memset(ram + LAYOUT_SETUP_DATA, 0, sizeof(*sd) + BOOT_RNG_SEED_SIZE);
	ck_assert_msg(boot_load_linux(&gm, &c, "", &bi, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(sd->len, BOOT_RNG_SEED_SIZE);
	ck_assert_msg(memcmp(sd->data, first, sizeof(first)), "same seed twice");

	/* reserved in the firmware map, so Linux does not carve it out of RAM */
	n = boot_build_e820(&gm, t, E820_MAX_ENTRIES);
	ck_assert_int_gt(n, 0);
	for (int i = 0; i < n; i++)
		if (t[i].addr <= LAYOUT_SETUP_DATA &&
		    LAYOUT_SETUP_DATA + sizeof(*sd) + BOOT_RNG_SEED_SIZE <= t[i].addr + t[i].size)
			ck_assert_uint_eq(t[i].type, E820_RESERVED);
	ck_assert(
	    e820_find(t, n, LAYOUT_BIOS_START, LAYOUT_HIGH_RAM - LAYOUT_BIOS_START, E820_RESERVED));
}
END_TEST

START_TEST(linux_elf_with_initrd)
{
	static uint8_t initrd[100 * 1000 + 3];
	struct vm_config c;
	struct boot_info bi;
	const struct boot_params *bp = zp();

	for (size_t i = 0; i < sizeof(initrd); i++)
		initrd[i] = (uint8_t)(i * 13);
	write_elf_kernel();
	write_file(ipath, initrd, sizeof(initrd));
	cfg_init(&c, 1);
	ck_assert_msg(boot_load_linux(&gm, &c, "console=ttyS0 quiet", &bi, err, sizeof(err)) == 0,
		      "%s", err);

	ck_assert_uint_eq(bi.entry, KERNEL_PADDR);
	ck_assert_uint_eq(bi.zero_page, LAYOUT_ZERO_PAGE);
	ck_assert_uint_eq(bi.cr3, LAYOUT_PML4);
	ck_assert_uint_eq(bi.kernel_start, KERNEL_PADDR);
	ck_assert_uint_eq(bi.kernel_end, KERNEL_PADDR + KERNEL_LEN + 0x1000);
	ck_assert_uint_eq(ram[KERNEL_PADDR + 1], 1 ^ 0x5a);

	/* initramfs: high in low RAM, page aligned, above the kernel, intact */
	ck_assert_uint_eq(bi.initrd_size, sizeof(initrd));
	ck_assert_uint_eq(bi.initrd_start % 4096, 0);
	ck_assert_uint_ge(bi.initrd_start, bi.kernel_end);
	ck_assert_uint_le(bi.initrd_start + bi.initrd_size, RAM_SIZE);
	ck_assert_uint_gt(bi.initrd_start + bi.initrd_size, RAM_SIZE - 4096);
	ck_assert_int_eq(memcmp(ram + bi.initrd_start, initrd, sizeof(initrd)), 0);

	/* zero page */
	ck_assert_uint_eq(bp->hdr.boot_flag, BOOT_FLAG_MAGIC);
	ck_assert_uint_eq(bp->hdr.header, BOOT_HDR_MAGIC);
	ck_assert_uint_ge(bp->hdr.version, BOOT_MIN_PROTOCOL);
	ck_assert_uint_eq(bp->hdr.type_of_loader, 0xff);
	ck_assert_uint_eq(bp->hdr.cmd_line_ptr, LAYOUT_CMDLINE);
	ck_assert_str_eq((const char *)ram + LAYOUT_CMDLINE, "console=ttyS0 quiet");
	ck_assert_uint_ge(bp->hdr.cmdline_size, strlen("console=ttyS0 quiet"));
	ck_assert_uint_eq(bp->hdr.ramdisk_image, bi.initrd_start);
	ck_assert_uint_eq(bp->hdr.ramdisk_size, sizeof(initrd));
	ck_assert_uint_eq(bp->ext_ramdisk_image, 0);
	ck_assert_uint_eq(bp->sentinel, 0);
	ck_assert_uint_eq(bp->e820_entries, 5);
	ck_assert_uint_eq(bp->e820_table[3].addr, LAYOUT_HIGH_RAM);
	ck_assert_uint_eq(bp->e820_table[3].size, RAM_SIZE - LAYOUT_HIGH_RAM);
	ck_assert_uint_eq(bp->e820_table[3].type, E820_RAM);
	ck_assert_int_eq(memcmp(ram + bp->acpi_rsdp_addr, "RSD PTR ", 8), 0);
	ck_assert_int_eq(memcmp(ram + LAYOUT_MPTABLE, "_MP_", 4), 0);
	ck_assert_uint_eq(*(const uint64_t *)(ram + LAYOUT_PML4) & ~0xfffULL, LAYOUT_PML4 + 4096);
}
END_TEST

START_TEST(linux_cmdline_from_config)
{
	struct vm_config c;
	struct boot_info bi;

	write_elf_kernel();
	cfg_init(&c, 0);
	ck_assert_msg(boot_load_linux(&gm, &c, NULL, &bi, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq((const char *)ram + LAYOUT_CMDLINE, "from-config");
	ck_assert_uint_eq(bi.initrd_size, 0);
	ck_assert_uint_eq(zp()->hdr.ramdisk_image, 0);
	ck_assert_uint_eq(zp()->hdr.ramdisk_size, 0);
}
END_TEST

#define BZ_SETUP_LEN (5 * 512)

static void write_bzimage(uint32_t cmdline_size)
{
	static uint8_t img[BZ_SETUP_LEN + 0x2000];
	struct setup_header *h = (struct setup_header *)(img + BOOT_HDR_OFFSET);

	memset(img, 0x90, sizeof(img));
	memset(img + BOOT_HDR_OFFSET, 0, sizeof(*h));
	h->setup_sects = 4;
	h->boot_flag = BOOT_FLAG_MAGIC;
	h->header = BOOT_HDR_MAGIC;
	h->version = 0x020f;
	h->loadflags = BOOT_LOADFLAG_LOADED_HIGH;
	h->initrd_addr_max = 0x2fffffff;
	h->kernel_alignment = 0x200000;
	h->relocatable_kernel = 1;
	h->xloadflags = BOOT_XLF_KERNEL_64;
	h->cmdline_size = cmdline_size;
	h->pref_address = 0x1000000;
	h->init_size = 0x800000;
	write_file(kpath, img, sizeof(img));
}

START_TEST(linux_bzimage)
{
	static uint8_t initrd[5000];
	struct vm_config c;
	struct boot_info bi;
	const struct boot_params *bp = zp();

	write_bzimage(255);
	write_file(ipath, initrd, sizeof(initrd));
	cfg_init(&c, 1);
	ck_assert_msg(boot_load_linux(&gm, &c, "console=ttyS0", &bi, err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_uint_eq(bi.entry, LAYOUT_HIGH_RAM + 0x200);
	ck_assert_uint_eq(bi.kernel_end, 0x1800000); /* pref_address + init_size */
	ck_assert_uint_ge(bi.initrd_start, 0x1800000);
	/* the file's header went into the zero page, with the loader's fields on top */
	ck_assert_uint_eq(bp->hdr.version, 0x020f);
	ck_assert_uint_eq(bp->hdr.kernel_alignment, 0x200000);
	ck_assert_uint_eq(bp->hdr.init_size, 0x800000);
	ck_assert_uint_eq(bp->hdr.setup_sects, 4);
	ck_assert_uint_eq(bp->hdr.type_of_loader, 0xff);
	ck_assert_uint_eq(bp->hdr.code32_start, LAYOUT_HIGH_RAM);
	ck_assert_uint_eq(bp->hdr.cmd_line_ptr, LAYOUT_CMDLINE);
	ck_assert_uint_eq(bp->hdr.cmdline_size, 255);
	ck_assert_uint_eq(bp->hdr.ramdisk_image, bi.initrd_start);
	ck_assert_uint_eq(ram[LAYOUT_HIGH_RAM], 0x90);
}
END_TEST

/* The kernel's initrd_addr_max caps the placement even with RAM above it. */
START_TEST(linux_initrd_addr_max)
{
	static uint8_t initrd[8192];
	struct vm_config c;
	struct boot_info bi;
	uint8_t *img;
	struct setup_header *h;
	FILE *f;

	write_bzimage(2047);
	/* patch initrd_addr_max to 40 MiB - 1 */
	img = calloc(1, BZ_SETUP_LEN + 0x2000);
	f = fopen(kpath, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fread(img, 1, BZ_SETUP_LEN + 0x2000, f), BZ_SETUP_LEN + 0x2000);
	h = (struct setup_header *)(img + BOOT_HDR_OFFSET);
	h->initrd_addr_max = (40u << 20) - 1;
	rewind(f);
	ck_assert_uint_eq(fwrite(img, 1, BZ_SETUP_LEN + 0x2000, f), BZ_SETUP_LEN + 0x2000);
	fclose(f);
	free(img);
	write_file(ipath, initrd, sizeof(initrd));
	cfg_init(&c, 1);
	ck_assert_msg(boot_load_linux(&gm, &c, "", &bi, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(bi.initrd_start, (40u << 20) - sizeof(initrd));
}
END_TEST

static struct boot_info fail_bi;

static void boot_fails(const struct vm_config *c, const char *cmdline, int want_rc,
		       const char *want)
{
	int r;

	err[0] = 0;
	r = boot_load_linux(&gm, c, cmdline, &fail_bi, err, sizeof(err));
	ck_assert_msg(r == want_rc, "rc %d, want %d: %s", r, want_rc, err);
	ck_assert_msg(strstr(err, want), "message '%s' lacks '%s'", err, want);
}

START_TEST(linux_errors)
{
	struct vm_config c;
	char *longcmd;
	char want[256];
	int fd;

	cfg_init(&c, 0);
	strcpy(c.kernel, "/nonexistent/vmlinux");
	boot_fails(&c, "", -ENOENT, "kernel /nonexistent/vmlinux: No such file or directory");

	cfg_init(&c, 0);
	strcpy(c.kernel, dir);
	boot_fails(&c, "", -EINVAL, "not a regular file");

	/* a FIFO must be refused, not block the monitor waiting for a writer */
	ck_assert_int_eq(mkfifo(kpath, 0600), 0);
	cfg_init(&c, 0);
	boot_fails(&c, "", -EINVAL, "not a regular file");
	unlink(kpath);

	write_file(kpath, "MZ garbage, not a kernel at all", 31);
	cfg_init(&c, 0);
	snprintf(want, sizeof(want), "kernel %s: not an ELF64 or bzImage (31 bytes)", kpath);
	boot_fails(&c, "", -ENOEXEC, want);

	/* a sparse file one byte larger than RAM is refused without reading it */
	fd = open(kpath, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)RAM_SIZE + 1), 0);
	close(fd);
	boot_fails(&c, "", -EFBIG, "do not fit in 67108864 bytes of RAM");

	write_elf_kernel();
	cfg_init(&c, 1);
	snprintf(want, sizeof(want), "initramfs %s: No such file", ipath);
	boot_fails(&c, "", -ENOENT, want);

	/* initramfs bigger than the RAM left above the kernel */
	fd = open(ipath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)(RAM_SIZE - KERNEL_PADDR)), 0);
	close(fd);
	boot_fails(&c, "", -EFBIG, "do not fit between the kernel end 0x1004000");

	cfg_init(&c, 0);
	longcmd = malloc(LAYOUT_CMDLINE_MAX + 1);
	memset(longcmd, 'a', LAYOUT_CMDLINE_MAX);
	longcmd[LAYOUT_CMDLINE_MAX] = 0;
	boot_fails(&c, longcmd, -E2BIG,
		   "cmdline: 65536 characters exceed the kernel's limit of 2047");
	longcmd[2048] = 0;
	boot_fails(&c, longcmd, -E2BIG,
		   "cmdline: 2048 characters exceed the kernel's limit of 2047");
	longcmd[2047] = 0;
	ck_assert_int_eq(boot_load_linux(&gm, &c, longcmd, &fail_bi, err, sizeof(err)), 0);
	ck_assert_uint_eq(strlen((const char *)ram + LAYOUT_CMDLINE), 2047);
	free(longcmd);

	write_bzimage(10);
	boot_fails(&c, "console=ttyS0", -E2BIG,
		   "cmdline: 13 characters exceed the kernel's limit of 10");
}
END_TEST

START_TEST(linux_needs_low_ram)
{
	struct guest_mem g = {.memfd = -1, .size = 1 << 20, .nslots = 1};
	struct vm_config c;
	struct boot_info bi;

	g.slots[0] = (struct gmem_slot){.gpa = LAYOUT_RAM_HIGH, .size = 1 << 20, .host = ram};
	write_elf_kernel();
	cfg_init(&c, 0);
	ck_assert_int_eq(boot_load_linux(&g, &c, "", &bi, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "does not cover the first MiB"));
}
END_TEST

/* The real guest kernel and initramfs, when `make guest` has built them. */
START_TEST(linux_real_guest)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	uint64_t size = 256ULL << 20;
	struct vm_config c;
	struct boot_info bi;
	struct guest_mem g;
	uint8_t *big;

	config_defaults(&c);
	snprintf(c.kernel, sizeof(c.kernel), "%s/guest/vmlinux", build);
	snprintf(c.initramfs, sizeof(c.initramfs), "%s/guest/initramfs.cpio", build);
	if (access(c.kernel, R_OK)) {
		testutil_skip("test_boot: linux_real_guest: %s not built (make guest)", c.kernel);
		return;
	}
	if (access(c.initramfs, R_OK))
		c.initramfs[0] = 0;
	big = calloc(1, size);
	ck_assert_ptr_nonnull(big);
	gmem_init_buffer(&g, big, size);
	c.memory = size;
	ck_assert_msg(boot_load_linux(&g, &c, "console=ttyS0", &bi, err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_uint_ge(bi.entry, bi.kernel_start);
	ck_assert_uint_lt(bi.entry, bi.kernel_end);
	if (c.initramfs[0]) {
		ck_assert_uint_ge(bi.initrd_start, bi.kernel_end);
		ck_assert_uint_le(bi.initrd_start + bi.initrd_size, size);
	}
	printf("test_boot: %s: entry 0x%llx kernel 0x%llx-0x%llx initrd %llu bytes at 0x%llx\n",
	       c.kernel, (unsigned long long)bi.entry, (unsigned long long)bi.kernel_start,
	       (unsigned long long)bi.kernel_end, (unsigned long long)bi.initrd_size,
	       (unsigned long long)bi.initrd_start);
	free(big);
}
END_TEST

static Suite *boot_suite(void)
{
	Suite *s = suite_create("boot");
	TCase *tc = tcase_create("tables");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, e820_small);
	tcase_add_test(tc, e820_crosses_hole);
	tcase_add_test(tc, e820_limits);
	tcase_add_test(tc, pagetables_identity);
	tcase_add_test(tc, initrd_placement);
	suite_add_tcase(s, tc);
	tc = tcase_create("load");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, linux_elf_with_initrd);
	tcase_add_test(tc, linux_rng_seed);
	tcase_add_test(tc, linux_cmdline_from_config);
	tcase_add_test(tc, linux_bzimage);
	tcase_add_test(tc, linux_initrd_addr_max);
	tcase_add_test(tc, linux_errors);
	tcase_add_test(tc, linux_needs_low_ram);
	tcase_add_test(tc, linux_real_guest);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(boot_suite());
}
