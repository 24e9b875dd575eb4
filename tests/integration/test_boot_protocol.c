/* The x86 boot protocol end to end through the lvmm binary ($LVMM, default build/lvmm): a tiny
 * payload (boot_payload.S) wrapped as a vmlinux-style ELF and as a bzImage checks from inside the
 * guest what boot_load_linux promised (zero page, loader id, E820, RSDP, initrd, command line). */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootparam.h"
#include "testutil.h"

/* A safety net against a hung VM, not an assertion on speed. */
#define RUN_LIMIT_S    60
#define BZ_SETUP_SECTS 4
#define BZ_SETUP_LEN   ((BZ_SETUP_SECTS + 1) * 512)
#define CMDLINE	       "hello-protocol root=none"

static char dir[64];
static char elf[128], bz[128], raw[128], initrd[128], serial[128], errlog[128];

/* The protected-mode part: hlt at the 32-bit entry, the payload at the 64-bit entry (+0x200). */
static void make_bzimage(void)
{
	static uint8_t img[BZ_SETUP_LEN + 0x200 + 4096];
	struct setup_header *h = (struct setup_header *)(img + BOOT_HDR_OFFSET);
	char code[4096];
	size_t n;

	n = testutil_read_file(raw, code, sizeof(code));
	ck_assert_uint_gt(n, 16);
	memset(img, 0xf4, sizeof(img));
	memset(img, 0, BZ_SETUP_LEN);
	h->setup_sects = BZ_SETUP_SECTS;
	h->boot_flag = BOOT_FLAG_MAGIC;
	h->jump = 0x66eb;
	h->header = BOOT_HDR_MAGIC;
	h->version = 0x020f;
	h->loadflags = BOOT_LOADFLAG_LOADED_HIGH;
	h->initrd_addr_max = 0x7fffffff;
	h->kernel_alignment = 0x200000;
	h->relocatable_kernel = 1;
	h->xloadflags = BOOT_XLF_KERNEL_64;
	h->cmdline_size = 2047;
	h->pref_address = 0x1000000;
	h->init_size = 0x100000;
	memcpy(img + BZ_SETUP_LEN + 0x200, code, n);
	testutil_write_file(bz, img, BZ_SETUP_LEN + 0x200 + n, 0644);
}

static void setup(void)
{
	static const char cpio[] = "070701 a fake cpio: the payload checks its first bytes";
	static const char lds[] = "ENTRY(phys_start)\n"
				  "SECTIONS {\n"
				  "  . = 0xffffffff81000000;\n"
				  "  .text : AT(0x1000000) { *(.text) }\n"
				  "  /DISCARD/ : { *(.note*) *(.comment) *(.eh_frame) }\n"
				  "}\n"
				  "phys_start = _start - 0xffffffff80000000;\n";
	char lds_path[128];

	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-bootproto-");
	snprintf(elf, sizeof(elf), "%s/payload.elf", dir);
	snprintf(bz, sizeof(bz), "%s/payload.bzImage", dir);
	snprintf(raw, sizeof(raw), "%s/payload.bin", dir);
	snprintf(initrd, sizeof(initrd), "%s/initrd.cpio", dir);
	snprintf(serial, sizeof(serial), "%s/serial.log", dir);
	snprintf(errlog, sizeof(errlog), "%s/stderr.log", dir);
	snprintf(lds_path, sizeof(lds_path), "%s/vmlinux.lds", dir);
	testutil_write_file(lds_path, lds, strlen(lds), 0644);
	testutil_write_file(initrd, cpio, sizeof(cpio), 0644);
	/* vmlinux's shape: linked high, loaded at 16 MiB, e_entry the physical entry */
	ck_assert_int_eq(
	    testutil_system("gcc -c -o %s/payload.o tests/integration/boot_payload.S && "
			    "ld -z noexecstack -T %s -o %s %s/payload.o && "
			    "objcopy -O binary -j .text %s/payload.o %s",
			    dir, lds_path, elf, dir, dir, raw),
	    0);
	make_bzimage();
}

static void teardown(void)
{
	testutil_rmtree(dir);
}

/* Runs lvmm with the serial console in a file; returns its exit status (-1 on a signal). */
static int run(const char *kernel, const char *initramfs)
{
	const char *lvmm = testutil_lvmm();
	int st;
	pid_t pid;

	unlink(serial);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char ser[160];
		int fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		snprintf(ser, sizeof(ser), "file=%s", serial);
		dup2(fd, 2);
		dup2(fd, 1);
		if (initramfs)
			execl(lvmm, lvmm, "run", "--kernel", kernel, "--initramfs", initramfs,
			      "--memory", "64M", "--cmdline", CMDLINE, "--serial", ser,
			      (char *)NULL);
		else
			execl(lvmm, lvmm, "run", "--kernel", kernel, "--memory", "64M", "--cmdline",
			      CMDLINE, "--serial", ser, (char *)NULL);
		_exit(127);
	}
	st = testutil_wait_limit(pid, "lvmm", RUN_LIMIT_S);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void boots_and_checks(const char *kernel)
{
	char out[8192], err[8192];
	int rc = run(kernel, initrd);

	testutil_read_file(serial, out, sizeof(out));
	testutil_read_file(errlog, err, sizeof(err));
	ck_assert_msg(rc == 0, "lvmm exit %d\nstderr: %s\nconsole: %s", rc, err, out);
	ck_assert_msg(!strstr(out, "boot-protocol-FAIL"), "guest check failed: %s", out);
	ck_assert_msg(strstr(out, "boot-protocol-ok cmdline=" CMDLINE), "console: '%s'", out);
	ck_assert_msg(strstr(err, "ACPI S5") || strstr(err, "power"), "stderr: %s", err);
}

START_TEST(vmlinux_elf)
{
	boots_and_checks(elf);
}
END_TEST

START_TEST(bzimage)
{
	boots_and_checks(bz);
}
END_TEST

/* Without an initramfs the payload's initrd check must fail: the check itself can fail. */
START_TEST(payload_detects_missing_initrd)
{
	char out[8192];

	ck_assert_int_eq(run(elf, NULL), 0);
	testutil_read_file(serial, out, sizeof(out));
	ck_assert_msg(strstr(out, "boot-protocol-FAIL r"), "console: '%s'", out);
}
END_TEST

START_TEST(bad_kernels)
{
	char err[8192];
	char junk[128];

	snprintf(junk, sizeof(junk), "%s/junk", dir);
	testutil_write_file(junk, "not a kernel", 12, 0644);
	ck_assert_int_ne(run(junk, NULL), 0);
	testutil_read_file(errlog, err, sizeof(err));
	ck_assert_msg(strstr(err, "not an ELF64 or bzImage"), "stderr: %s", err);

	/* 64 MiB of RAM cannot hold an initramfs of 80 MiB */
	ck_assert_int_eq(testutil_system("truncate -s 80M %s/big.cpio", dir), 0);
	snprintf(junk, sizeof(junk), "%s/big.cpio", dir);
	ck_assert_int_ne(run(elf, junk), 0);
	testutil_read_file(errlog, err, sizeof(err));
	ck_assert_msg(strstr(err, "do not fit"), "stderr: %s", err);
}
END_TEST

static Suite *boot_protocol_suite(void)
{
	Suite *s = suite_create("boot_protocol");
	TCase *tc = tcase_create("lvmm");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, RUN_LIMIT_S * 3);
	tcase_add_test(tc, vmlinux_elf);
	tcase_add_test(tc, bzimage);
	tcase_add_test(tc, payload_detects_missing_initrd);
	tcase_add_test(tc, bad_kernels);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (!testutil_kvm_usable()) {
		testutil_skip("boot_protocol: /dev/kvm not usable here");
		return 0;
	}
	return testutil_run_suite(boot_protocol_suite());
}
