/* Unit tests for vmm/loader.c: synthetic ELF64 and bzImage images built in memory (valid, and
 * each malformed variant), plus the real guest vmlinux when `make guest` has produced it. */
#include <check.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout.h"
#include "loader.h"
#include "testutil.h"

#define RAM_SIZE     (32ULL << 20)
#define ELF_DATA_OFF 0x1000

static uint8_t *ram;
static struct guest_mem gm;
static char err[512];
static uint8_t img[1 << 20];

static void setup(void)
{
	ram = malloc(RAM_SIZE);
	ck_assert_ptr_nonnull(ram);
	memset(ram, 0xff, RAM_SIZE); /* so that zero-filled BSS is visible */
	gmem_init_buffer(&gm, ram, RAM_SIZE);
}

static void teardown(void)
{
	free(ram);
}

struct seg {
	uint32_t type;
	uint64_t paddr, vaddr, filesz, memsz;
	uint8_t fill;
};

/* An ELF64 x86-64 executable: headers at 0, segment data from ELF_DATA_OFF on. */
static size_t make_elf(uint64_t entry, const struct seg *s, unsigned n)
{
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Phdr *ph = (Elf64_Phdr *)(img + sizeof(*eh));
	uint64_t off = ELF_DATA_OFF;

	memset(img, 0, sizeof(img));
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_entry = entry;
	eh->e_phoff = sizeof(*eh);
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(Elf64_Phdr);
	eh->e_phnum = (uint16_t)n;
	for (unsigned i = 0; i < n; i++) {
		ph[i].p_type = s[i].type ? s[i].type : PT_LOAD;
		ph[i].p_offset = off;
		ph[i].p_paddr = s[i].paddr;
		ph[i].p_vaddr = s[i].vaddr ? s[i].vaddr : s[i].paddr;
		ph[i].p_filesz = s[i].filesz;
		ph[i].p_memsz = s[i].memsz;
		ph[i].p_flags = PF_R | PF_X;
		ph[i].p_align = 0x1000;
		ck_assert_uint_le(off + s[i].filesz, sizeof(img));
		memset(img + off, s[i].fill, s[i].filesz);
		off += s[i].filesz;
	}
	return off;
}

static int load(size_t len, struct loader_result *res)
{
	struct loader_src src;
	struct loader_buf b;

	loader_src_buffer(&src, &b, img, len);
	err[0] = 0;
	return loader_load(&gm, &src, res, err, sizeof(err));
}

static void load_fails(size_t len, int want_rc, const char *want_msg)
{
	struct loader_result res;
	int r = load(len, &res);

	ck_assert_msg(r == want_rc, "rc %d, want %d (%s)", r, want_rc, err);
	ck_assert_msg(strstr(err, want_msg), "message '%s' lacks '%s'", err, want_msg);
}

static Elf64_Ehdr *ehdr(void)
{
	return (Elf64_Ehdr *)img;
}

static Elf64_Phdr *phdr(unsigned i)
{
	return (Elf64_Phdr *)(img + sizeof(Elf64_Ehdr)) + i;
}

static const struct seg two_segs[] = {
    {.paddr = 0x100000, .filesz = 0x100, .memsz = 0x2000, .fill = 0xab},
    {.paddr = 0x200000,
     .vaddr = 0xffffffff81200000ULL,
     .filesz = 0x300,
     .memsz = 0x300,
     .fill = 0xcd},
};

START_TEST(elf_valid)
{
	struct loader_result res;
	size_t len = make_elf(0x100010, two_segs, 2);

	ck_assert_msg(load(len, &res) == 0, "%s", err);
	ck_assert_int_eq(res.kind, LOADER_ELF);
	ck_assert_uint_eq(res.entry, 0x100010);
	ck_assert_uint_eq(res.start, 0x100000);
	ck_assert_uint_eq(res.end, 0x200300);
	ck_assert_uint_eq(ram[0x100000], 0xab);
	ck_assert_uint_eq(ram[0x1000ff], 0xab);
	ck_assert_uint_eq(ram[0x100100], 0); /* BSS zeroed */
	ck_assert_uint_eq(ram[0x101fff], 0);
	ck_assert_uint_eq(ram[0x102000], 0xff); /* nothing past memsz */
	ck_assert_uint_eq(ram[0x200000], 0xcd);
	ck_assert_uint_eq(ram[0x2002ff], 0xcd);
	ck_assert_uint_eq(ram[0x200300], 0xff);
	ck_assert_uint_eq(ram[0x0fffff], 0xff); /* below the kernel untouched */
}
END_TEST

/* vmlinux style: a virtual entry maps through its segment's physical address. */
START_TEST(elf_virtual_entry)
{
	struct loader_result res;
	size_t len = make_elf(0xffffffff81200040ULL, two_segs, 2);

	ck_assert_msg(load(len, &res) == 0, "%s", err);
	ck_assert_uint_eq(res.entry, 0x200040);
}
END_TEST

/* Non-loadable headers and empty segments are ignored. */
START_TEST(elf_skips_other_segments)
{
	struct seg s[] = {
	    {.type = PT_NOTE, .paddr = 0x10, .filesz = 0x10, .memsz = 0x10},
	    {.paddr = 0x300000, .filesz = 0x10, .memsz = 0x10, .fill = 1},
	    {.paddr = 0x7000, .filesz = 0, .memsz = 0},
	};
	struct loader_result res;
	size_t len = make_elf(0x300000, s, 3);

	ck_assert_msg(load(len, &res) == 0, "%s", err);
	ck_assert_uint_eq(res.start, 0x300000);
	ck_assert_uint_eq(res.end, 0x300010);
	ck_assert_uint_eq(ram[0x10], 0xff);
}
END_TEST

/* Writes one note (namesz bytes of name, descsz zero bytes) at off; returns the next offset. */
static size_t put_note(size_t off, const char *name, uint32_t namesz, uint32_t descsz,
		       uint32_t type)
{
	Elf64_Nhdr nh = {.n_namesz = namesz, .n_descsz = descsz, .n_type = type};

	memcpy(img + off, &nh, sizeof(nh));
	off += sizeof(nh);
	memset(img + off, 0, (namesz + 3) & ~3u);
	memcpy(img + off, name, strlen(name) < namesz ? strlen(name) : namesz);
	off += (namesz + 3) & ~3u;
	memset(img + off, 0, (descsz + 3) & ~3u);
	return off + ((descsz + 3) & ~3u);
}

/* An image with a PT_NOTE segment of len bytes at ELF_DATA_OFF (written by the caller) and one
 * loadable segment; the AP-entry result of loading it. */
static bool ap_entry_of(size_t note_len)
{
	struct seg s[] = {
	    {.type = PT_NOTE, .paddr = 0x10, .filesz = note_len, .memsz = note_len},
	    {.paddr = 0x300000, .filesz = 0x10, .memsz = 0x10, .fill = 1},
	};
	static uint8_t notes[256];
	struct loader_result res;
	size_t len;

	memcpy(notes, img + ELF_DATA_OFF, sizeof(notes));
	len = make_elf(0x300000, s, 2);
	memcpy(img + ELF_DATA_OFF, notes, note_len < sizeof(notes) ? note_len : sizeof(notes));
	ck_assert_msg(load(len, &res) == 0, "%s", err); /* a bad note never fails the load */
	return res.ap_entry;
}

/* lvmm's AP-entry note is found after other notes; a wrong type, a name without its NUL or a
 * note running past its segment is not it. */
START_TEST(elf_ap_entry_note)
{
	size_t n;

	n = put_note(ELF_DATA_OFF, "GNU", 4, 8, 3);
	n = put_note(n, "LVMM", 5, 0, LVMM_ELFNOTE_AP_ENTRY);
	ck_assert(ap_entry_of(n - ELF_DATA_OFF));
	n = put_note(ELF_DATA_OFF, "LVMM", 5, 0, 2);
	ck_assert(!ap_entry_of(n - ELF_DATA_OFF));
	n = put_note(ELF_DATA_OFF, "LVMM", 4, 0, LVMM_ELFNOTE_AP_ENTRY);
	ck_assert(!ap_entry_of(n - ELF_DATA_OFF));
	/* a descriptor size that wraps: the note after it is never reached */
	n = put_note(ELF_DATA_OFF, "Xen", 4, 0, 18);
	put_note(n, "LVMM", 5, 0, LVMM_ELFNOTE_AP_ENTRY);
	((Elf64_Nhdr *)(img + ELF_DATA_OFF))->n_descsz = 0xfffffffcu;
	ck_assert(!ap_entry_of(n - ELF_DATA_OFF + 20));
	n = put_note(ELF_DATA_OFF, "LVMM", 5, 0, LVMM_ELFNOTE_AP_ENTRY);
	ck_assert(!ap_entry_of(n - ELF_DATA_OFF - 1)); /* cut short */
	ck_assert(!ap_entry_of(0));
}
END_TEST

/* The bench guest asks for it (tools/bench-guest/entry.S). */
START_TEST(bench_guest_ap_entry)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char path[512];
	struct loader_result res;
	struct loader_src src;
	struct loader_fd f;
	int fd;

	snprintf(path, sizeof(path), "%s/bench-guest/bench-guest.elf", build);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		testutil_skip("test_loader: bench_guest_ap_entry: %s not built", path);
		return;
	}
	ck_assert_int_eq(loader_src_fd(&src, &f, fd), 0);
	ck_assert_msg(loader_load(&gm, &src, &res, err, sizeof(err)) == 0, "%s: %s", path, err);
	ck_assert(res.ap_entry);
	close(fd);
}
END_TEST

START_TEST(elf_truncated)
{
	size_t len = make_elf(0x100010, two_segs, 2);

	load_fails(len - 1, -ENOEXEC, "ELF segment 1: file range at offset");
	load_fails(sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr), -ENOEXEC, "program headers");
	load_fails(sizeof(Elf64_Ehdr) - 1, -ENOEXEC, "not an ELF64 or bzImage");
	/* nothing was written: validation happens before any copy */
	ck_assert_uint_eq(ram[0x100000], 0xff);
}
END_TEST

START_TEST(elf_bad_headers)
{
	size_t len = make_elf(0x100010, two_segs, 2);

	img[0] = 0x7e;
	load_fails(len, -ENOEXEC, "not an ELF64 or bzImage");
	len = make_elf(0x100010, two_segs, 2);
	ehdr()->e_ident[EI_CLASS] = ELFCLASS32;
	load_fails(len, -ENOEXEC, "ELF class 1 is not ELF64");
	len = make_elf(0x100010, two_segs, 2);
	ehdr()->e_ident[EI_DATA] = ELFDATA2MSB;
	load_fails(len, -ENOEXEC, "not little-endian");
	len = make_elf(0x100010, two_segs, 2);
	ehdr()->e_machine = EM_386;
	load_fails(len, -ENOEXEC, "ELF machine 3 is not x86-64");
	len = make_elf(0x100010, two_segs, 2);
	ehdr()->e_type = ET_DYN;
	load_fails(len, -ENOEXEC, "ELF type 3 is not an executable");
	len = make_elf(0x100010, two_segs, 2);
	ehdr()->e_phentsize = 32;
	load_fails(len, -ENOEXEC, "program headers of 32 bytes");
	len = make_elf(0x100010, two_segs, 2);
	ehdr()->e_phnum = 0;
	load_fails(len, -ENOEXEC, "has 0 program headers");
	len = make_elf(0x100010, two_segs, 2);
	ehdr()->e_phoff = UINT64_MAX - 8;
	load_fails(len, -ENOEXEC, "program headers");
	len = make_elf(0x100010, two_segs, 2);
	ehdr()->e_entry = 0x500000;
	load_fails(len, -ENOEXEC, "entry 0x500000 is outside every loaded segment");
	len = make_elf(0x100010, two_segs, 2);
	phdr(0)->p_type = PT_NOTE;
	phdr(1)->p_type = PT_NOTE;
	load_fails(len, -ENOEXEC, "no loadable segment");
}
END_TEST

START_TEST(elf_bad_segments)
{
	size_t len = make_elf(0x100010, two_segs, 2);

	phdr(1)->p_paddr = RAM_SIZE - 0x100; /* runs past the end of RAM */
	load_fails(len, -ENOEXEC, "ELF segment 1: 0x1ffff00+0x300 is outside guest RAM");
	len = make_elf(0x100010, two_segs, 2);
	phdr(1)->p_paddr = 64ULL << 20;
	load_fails(len, -ENOEXEC, "outside guest RAM");
	len = make_elf(0x100010, two_segs, 2);
	phdr(1)->p_paddr = LAYOUT_ZERO_PAGE; /* would overwrite the zero page */
	load_fails(len, -ENOEXEC, "ELF segment 1: 0x7000+0x300 is outside guest RAM above 1 MiB");
	len = make_elf(0x100010, two_segs, 2);
	phdr(1)->p_paddr = LAYOUT_HIGH_RAM - 0x100; /* straddles 1 MiB from below */
	load_fails(len, -ENOEXEC, "outside guest RAM");
	len = make_elf(0x100010, two_segs, 2);
	phdr(1)->p_paddr = UINT64_MAX - 0x10; /* wraps */
	load_fails(len, -ENOEXEC, "outside guest RAM");
	len = make_elf(0x100010, two_segs, 2);
	phdr(1)->p_memsz = 0x100; /* smaller than filesz */
	load_fails(len, -ENOEXEC, "file size 768 exceeds memory size 256");
	len = make_elf(0x100010, two_segs, 2);
	phdr(0)->p_offset = UINT64_MAX - 0x10;
	load_fails(len, -ENOEXEC, "ELF segment 0: file range");
	ck_assert_uint_eq(ram[0x200000], 0xff);
}
END_TEST

START_TEST(image_larger_than_ram)
{
	struct loader_result res;
	struct loader_src src;
	struct loader_buf b;

	make_elf(0x100010, two_segs, 2);
	loader_src_buffer(&src, &b, img, sizeof(img));
	src.size = RAM_SIZE + 1; /* refused before anything is read */
	ck_assert_int_eq(loader_load(&gm, &src, &res, err, sizeof(err)), -EFBIG);
	ck_assert_ptr_nonnull(strstr(err, "33554433 bytes do not fit in 33554432 bytes of RAM"));
}
END_TEST

/* ---- bzImage ---- */

#define BZ_SETUP_SECTS 4
#define BZ_SETUP_LEN   ((BZ_SETUP_SECTS + 1) * 512)

static struct setup_header *bzhdr(void)
{
	return (struct setup_header *)(img + BOOT_HDR_OFFSET);
}

static size_t make_bzimage(size_t payload)
{
	struct setup_header *h = bzhdr();

	memset(img, 0, sizeof(img));
	h->setup_sects = BZ_SETUP_SECTS;
	h->boot_flag = BOOT_FLAG_MAGIC;
	h->jump = 0x66eb; /* jmp +0x66: header ends at 0x202 + 0x66 = 0x268 */
	h->header = BOOT_HDR_MAGIC;
	h->version = 0x020f;
	h->loadflags = BOOT_LOADFLAG_LOADED_HIGH;
	h->code32_start = 0x100000;
	h->initrd_addr_max = 0x7fffffff;
	h->kernel_alignment = 0x200000;
	h->relocatable_kernel = 1;
	h->xloadflags = BOOT_XLF_KERNEL_64;
	h->cmdline_size = 2047;
	h->pref_address = 0x1000000;
	h->init_size = 0x100000;
	for (size_t i = 0; i < payload; i++)
		img[BZ_SETUP_LEN + i] = (uint8_t)(i * 7 + 1);
	return BZ_SETUP_LEN + payload;
}

START_TEST(bz_valid)
{
	struct loader_result res;
	size_t len = make_bzimage(0x1000);

	ck_assert_msg(load(len, &res) == 0, "%s", err);
	ck_assert_int_eq(res.kind, LOADER_BZIMAGE);
	ck_assert_uint_eq(res.start, 0x100000);
	ck_assert_uint_eq(res.entry, 0x100200);
	/* the decompressor's run area is accounted for: initrd must go above it */
	ck_assert_uint_eq(res.end, 0x1000000 + 0x100000);
	ck_assert_int_eq(memcmp(ram + 0x100000, img + BZ_SETUP_LEN, 0x1000), 0);
	ck_assert_uint_eq(ram[0x101000], 0xff);
	ck_assert_uint_eq(res.hdr.version, 0x020f);
	ck_assert_uint_eq(res.hdr.cmdline_size, 2047);
	ck_assert_uint_eq(res.hdr.kernel_alignment, 0x200000);

	/* setup_sects 0 means 4 */
	len = make_bzimage(0x1000);
	bzhdr()->setup_sects = 0;
	ck_assert_msg(load(len, &res) == 0, "%s", err);
	ck_assert_uint_eq(ram[0x100000], img[BZ_SETUP_LEN]);
}
END_TEST

START_TEST(bz_fixed_address)
{
	struct loader_result res;
	size_t len = make_bzimage(0x800);

	bzhdr()->relocatable_kernel = 0;
	bzhdr()->pref_address = 0x400000;
	bzhdr()->init_size = 0x400; /* smaller than the image: end is the image end */
	ck_assert_msg(load(len, &res) == 0, "%s", err);
	ck_assert_uint_eq(res.start, 0x400000);
	ck_assert_uint_eq(res.entry, 0x400200);
	ck_assert_uint_eq(res.end, 0x400800);
	ck_assert_int_eq(memcmp(ram + 0x400000, img + BZ_SETUP_LEN, 0x800), 0);

	len = make_bzimage(0x800);
	bzhdr()->relocatable_kernel = 0;
	bzhdr()->pref_address = 0x8000; /* into the zero page area */
	load_fails(len, -EFBIG, "at 0x8000 does not fit in guest RAM");
}
END_TEST

START_TEST(bz_rejects)
{
	size_t len = make_bzimage(0x1000);

	bzhdr()->version = 0x0208;
	load_fails(len, -ENOEXEC, "boot protocol 2.08 is older than 2.12");
	len = make_bzimage(0x1000);
	bzhdr()->header = 0x53726449;
	load_fails(len, -ENOEXEC, "not an ELF64 or bzImage");
	len = make_bzimage(0x1000);
	bzhdr()->boot_flag = 0;
	load_fails(len, -ENOEXEC, "not an ELF64 or bzImage");
	len = make_bzimage(0x1000);
	bzhdr()->xloadflags = 0;
	load_fails(len, -ENOEXEC, "no 64-bit entry");
	len = make_bzimage(0x1000);
	bzhdr()->loadflags = 0;
	load_fails(len, -ENOEXEC, "zImage");
	len = make_bzimage(0x1000);
	bzhdr()->kernel_alignment = 0x300000;
	load_fails(len, -ENOEXEC, "kernel_alignment 0x300000 is not a power of two");
	len = make_bzimage(0x1000);
	bzhdr()->init_size = 0x20000000;
	load_fails(len, -EFBIG, "needs 536870912 bytes of RAM at 0x1000000 to decompress");
	ck_assert_uint_eq(ram[0x100000], 0xff);
}
END_TEST

START_TEST(bz_truncated)
{
	size_t len = make_bzimage(0x1000);

	load_fails(BZ_SETUP_LEN + 0x100, -ENOEXEC, "truncated after 2560 bytes of setup code");
	load_fails(BZ_SETUP_LEN, -ENOEXEC, "truncated");
	load_fails(0x260, -ENOEXEC, "not an ELF64 or bzImage"); /* header cut short */
	load_fails(0, -ENOEXEC, "not an ELF64 or bzImage (0 bytes)");
	bzhdr()->setup_sects = 0xff; /* setup claims more than the file */
	load_fails(len, -ENOEXEC, "truncated");
}
END_TEST

/* The real guest kernel, when it has been built (make guest). */
START_TEST(real_vmlinux)
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	char path[512];
	struct loader_result res;
	struct loader_src src;
	struct loader_fd f;
	Elf64_Ehdr eh;
	uint64_t size = 512ULL << 20;
	uint8_t *big;
	struct guest_mem g;
	int fd;

	snprintf(path, sizeof(path), "%s/guest/vmlinux", build);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		testutil_skip("test_loader: real_vmlinux: %s not built (make guest)", path);
		return;
	}
	ck_assert_int_eq(pread(fd, &eh, sizeof(eh), 0), sizeof(eh));
	big = calloc(1, size);
	ck_assert_ptr_nonnull(big);
	gmem_init_buffer(&g, big, size);
	ck_assert_int_eq(loader_src_fd(&src, &f, fd), 0);
	ck_assert_msg(loader_load(&g, &src, &res, err, sizeof(err)) == 0, "%s: %s", path, err);
	ck_assert_int_eq(res.kind, LOADER_ELF);
	/* Linux links e_entry at the physical startup_64, inside the loaded image */
	ck_assert_uint_eq(res.entry, eh.e_entry);
	ck_assert_uint_ge(res.start, LAYOUT_HIGH_RAM);
	ck_assert_uint_gt(res.end, res.entry);
	ck_assert(!res.ap_entry); /* Linux's APs never start at its entry */
	/* the first text bytes in RAM are the file's: find them through the program headers */
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		uint8_t want[64];

		ck_assert_int_eq(pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))),
				 sizeof(ph));
		if (ph.p_type != PT_LOAD || ph.p_filesz < sizeof(want))
			continue;
		ck_assert_int_eq(pread(fd, want, sizeof(want), (off_t)ph.p_offset), sizeof(want));
		ck_assert_int_eq(memcmp(big + ph.p_paddr, want, sizeof(want)), 0);
	}
	printf("test_loader: %s: entry 0x%llx, image 0x%llx-0x%llx\n", path,
	       (unsigned long long)res.entry, (unsigned long long)res.start,
	       (unsigned long long)res.end);
	free(big);
	close(fd);
}
END_TEST

static Suite *loader_suite(void)
{
	Suite *s = suite_create("loader");
	TCase *tc = tcase_create("elf");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, elf_valid);
	tcase_add_test(tc, elf_virtual_entry);
	tcase_add_test(tc, elf_skips_other_segments);
	tcase_add_test(tc, elf_truncated);
	tcase_add_test(tc, elf_bad_headers);
	tcase_add_test(tc, elf_bad_segments);
	tcase_add_test(tc, image_larger_than_ram);
	tcase_add_test(tc, elf_ap_entry_note);
	tcase_add_test(tc, bench_guest_ap_entry);
	suite_add_tcase(s, tc);
	tc = tcase_create("bzimage");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, bz_valid);
	tcase_add_test(tc, bz_fixed_address);
	tcase_add_test(tc, bz_rejects);
	tcase_add_test(tc, bz_truncated);
	suite_add_tcase(s, tc);
	tc = tcase_create("real");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, real_vmlinux);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(loader_suite());
}
