/* Tests for tools/guest/extract-vmlinux: synthetic bzImages with lz4/xz/gzip payloads holding a
 * small ELF plus trailing relocation bytes, and broken images that must be refused. */
#include <check.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PM_START       1024 /* setup_sects = 1 */
#define PAYLOAD_OFFSET 0x100

static char tool[4096];
static char dir[] = "/tmp/lvmm-extract-XXXXXX";

static void put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = v >> (8 * i);
}

/* A minimal ELF64: header, one PT_LOAD program header, 64 bytes of "code". */
static size_t make_elf(unsigned char *e)
{
	memset(e, 0, 184);
	memcpy(e, "\177ELF\2\1\1", 7);
	put_le(e + 16, 2, 2);  /* ET_EXEC */
	put_le(e + 18, 62, 2); /* EM_X86_64 */
	put_le(e + 24, 0x1000000, 8);
	put_le(e + 32, 64, 8);	    /* phoff */
	put_le(e + 52, 64, 2);	    /* ehsize */
	put_le(e + 54, 56, 2);	    /* phentsize */
	put_le(e + 56, 1, 2);	    /* phnum */
	put_le(e + 64, 1, 4);	    /* PT_LOAD */
	put_le(e + 64 + 8, 120, 8); /* offset */
	put_le(e + 64 + 32, 64, 8); /* filesz */
	for (int i = 120; i < 184; i++)
		e[i] = i;
	return 184;
}

static void write_file(const char *path, const void *buf, size_t len)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

static unsigned char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	unsigned char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n + 1);
	ck_assert_uint_eq(fread(buf, 1, n, f), (size_t)n);
	fclose(f);
	*len = n;
	return buf;
}

/* Compresses elf + 40 bytes of relocation junk with cmd, wraps it in a setup header. */
static void make_bzimage(const char *cmd, const char *out, uint32_t length_delta)
{
	unsigned char elf[256], *payload, *img;
	char raw[4200], packed[4200], sh[9000];
	size_t elen = make_elf(elf), plen;

	memset(elf + elen, 0xee, 40);
	snprintf(raw, sizeof(raw), "%s/raw", dir);
	snprintf(packed, sizeof(packed), "%s/packed", dir);
	write_file(raw, elf, elen + 40);
	snprintf(sh, sizeof(sh), "%s <%s >%s", cmd, raw, packed);
	ck_assert_int_eq(system(sh), 0);
	payload = read_all(packed, &plen);
	ck_assert_ptr_nonnull(payload);

	img = calloc(1, PM_START + PAYLOAD_OFFSET + plen + 4);
	img[0x1f1] = 1;
	memcpy(img + 0x202, "HdrS", 4);
	put_le(img + 0x206, 0x020f, 2);
	put_le(img + 0x248, PAYLOAD_OFFSET, 4);
	put_le(img + 0x24c, plen + 4 + length_delta, 4);
	memcpy(img + PM_START + PAYLOAD_OFFSET, payload, plen);
	put_le(img + PM_START + PAYLOAD_OFFSET + plen, elen + 40, 4); /* size_append */
	write_file(out, img, PM_START + PAYLOAD_OFFSET + plen + 4);
	free(payload);
	free(img);
}

static int run_tool(const char *in, const char *out)
{
	char sh[16384];
	int st;

	snprintf(sh, sizeof(sh), "%s %s %s >/dev/null 2>&1", tool, in, out);
	st = system(sh);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check_roundtrip(const char *cmd)
{
	char in[4200], out[4200];
	unsigned char elf[256], *got;
	size_t elen = make_elf(elf), glen = 0;

	snprintf(in, sizeof(in), "%s/bz", dir);
	snprintf(out, sizeof(out), "%s/vmlinux", dir);
	unlink(out);
	make_bzimage(cmd, in, 0);
	ck_assert_int_eq(run_tool(in, out), 0);
	got = read_all(out, &glen);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(glen, elen); /* relocation junk trimmed */
	ck_assert_mem_eq(got, elf, elen);
	free(got);
}

START_TEST(test_lz4_legacy)
{
	check_roundtrip("lz4 -l -c -q");
}
END_TEST

START_TEST(test_xz)
{
	check_roundtrip("xz -c --check=crc32");
}
END_TEST

START_TEST(test_gzip)
{
	check_roundtrip("gzip -c -9");
}
END_TEST

static void check_refused(const char *in)
{
	char out[4200];

	snprintf(out, sizeof(out), "%s/vmlinux", dir);
	unlink(out);
	ck_assert_int_eq(run_tool(in, out), 1);
	ck_assert_int_ne(access(out, F_OK), 0); /* nothing half-written left behind */
}

START_TEST(test_payload_past_end)
{
	char in[4200];

	snprintf(in, sizeof(in), "%s/bz", dir);
	make_bzimage("lz4 -l -c -q", in, 4096);
	check_refused(in);
}
END_TEST

START_TEST(test_not_bzimage)
{
	char in[4200];
	unsigned char junk[2048] = {0x7f, 'E', 'L', 'F'};

	snprintf(in, sizeof(in), "%s/junk", dir);
	write_file(in, junk, sizeof(junk));
	check_refused(in);
	write_file(in, junk, 100); /* shorter than a setup header */
	check_refused(in);
}
END_TEST

START_TEST(test_unknown_or_corrupt_payload)
{
	char in[4200];
	size_t len;
	unsigned char *img;

	snprintf(in, sizeof(in), "%s/bz", dir);
	make_bzimage("cat", in, 0); /* a plain ELF: no known compressor magic */
	check_refused(in);

	make_bzimage("lz4 -l -c -q", in, 0);
	img = read_all(in, &len);
	memset(img + PM_START + PAYLOAD_OFFSET + 8, 0xff, 32); /* break the lz4 block */
	write_file(in, img, len);
	free(img);
	check_refused(in);
}
END_TEST

START_TEST(test_missing_input)
{
	char in[4200];

	snprintf(in, sizeof(in), "%s/does-not-exist", dir);
	check_refused(in);
}
END_TEST

int main(int argc, char **argv)
{
	char self[4096];
	Suite *s = suite_create("extract_vmlinux");
	TCase *tc = tcase_create("extract");
	SRunner *sr;
	int failed;

	/* The tool sits next to the test directory: $(BUILD)/tests/NAME ->
	 * $(BUILD)/extract-vmlinux. */
	snprintf(self, sizeof(self), "%s", argv[0]);
	snprintf(tool, sizeof(tool), "%s/../extract-vmlinux", dirname(self));
	if (access(tool, X_OK) || !mkdtemp(dir)) {
		fprintf(stderr, "test_extract_vmlinux: %s missing or no temp dir\n", tool);
		return EXIT_FAILURE;
	}
	tcase_add_test(tc, test_lz4_legacy);
	tcase_add_test(tc, test_xz);
	tcase_add_test(tc, test_gzip);
	tcase_add_test(tc, test_payload_past_end);
	tcase_add_test(tc, test_not_bzimage);
	tcase_add_test(tc, test_unknown_or_corrupt_payload);
	tcase_add_test(tc, test_missing_input);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	snprintf(self, sizeof(self), "rm -rf %s", dir);
	if (system(self) != 0)
		fprintf(stderr, "test_extract_vmlinux: could not remove %s\n", dir);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
