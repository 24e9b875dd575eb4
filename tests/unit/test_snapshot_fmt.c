/* The snapshot state file (vmm/snapshot_fmt.c): a round trip, and every kind of file that must
 * be refused with a message rather than read: bad magic, other version, truncation, extension,
 * corruption, section lengths past the end, oversize and duplicate sections, vCPU sections
 * beyond the vCPU count, vCPU counts out of range, sections of the wrong size. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_fmt.h"
#include "testutil.h"

struct regs_like {
	uint64_t r[18];
};

/* A two-vCPU file: clock, regs of each vCPU, a device. */
static void build(struct snap_writer *w, uint32_t ncpus)
{
	struct regs_like a = {{0}}, b = {{0}};
	uint64_t clock[6] = {0x1234567890ULL}; /* struct kvm_clock_data's 48 bytes */
	const char dev[] = "device bytes";

	a.r[0] = 1;
	a.r[17] = 0xdead;
	b.r[0] = 2;
	snap_writer_init(w);
	memset(w->id, 0xa5, sizeof(w->id));
	snap_put(w, SNAP_VM_CLOCK, 0, clock, sizeof(clock));
	snap_put(w, SNAP_VCPU_REGS, 0, &a, sizeof(a));
	snap_put(w, SNAP_VCPU_REGS, 1, &b, sizeof(b));
	snap_put_device(w, 0, "rng0", "virtio-rng", 3, dev, sizeof(dev));
	ck_assert_int_eq(snap_finish(w, ncpus, 128ULL << 20, snap_hash("cfg", 3)), 0);
}

/* Recomputes the payload hash after a test changed the payload on purpose, so that the check
 * under test is the one that fires, not the checksum. */
static void rehash(uint8_t *buf, size_t len)
{
	struct snap_header h;

	memcpy(&h, buf, sizeof(h));
	h.payload_hash = snap_hash(buf + sizeof(h), len - sizeof(h));
	memcpy(buf, &h, sizeof(h));
}

static void expect_refused(const void *buf, size_t len, const char *needle)
{
	struct snap_reader r;
	char err[256] = "";

	ck_assert_int_eq(snap_parse(buf, len, &r, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, needle), "error '%s' does not say '%s'", err, needle);
	ck_assert_ptr_null(r.sect);
}

START_TEST(test_round_trip)
{
	struct snap_writer w;
	struct snap_reader r;
	struct regs_like a;
	struct snap_dev_head h;
	const struct snap_ref *d;
	uint64_t clock[6] = {0};
	char err[256];

	build(&w, 2);
	ck_assert_uint_eq(w.len % 8, 0);
	ck_assert_int_eq(snap_parse(w.buf, w.len, &r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r.h.ncpus, 2);
	ck_assert_uint_eq(r.h.memory, 128ULL << 20);
	ck_assert_uint_eq(r.h.config_hash, snap_hash("cfg", 3));
	ck_assert_uint_eq(r.n, 4);
	ck_assert_int_eq(snap_get(&r, SNAP_VM_CLOCK, 0, clock, sizeof(clock), err, sizeof(err)), 0);
	ck_assert_uint_eq(clock[0], 0x1234567890ULL);
	ck_assert_uint_eq(r.h.id[0], 0xa5);
	ck_assert_uint_eq(r.h.id[SNAP_ID_LEN - 1], 0xa5);
	ck_assert_int_eq(snap_get(&r, SNAP_VCPU_REGS, 0, &a, sizeof(a), err, sizeof(err)), 0);
	ck_assert_uint_eq(a.r[0], 1);
	ck_assert_uint_eq(a.r[17], 0xdead);
	ck_assert_int_eq(snap_get(&r, SNAP_VCPU_REGS, 1, &a, sizeof(a), err, sizeof(err)), 0);
	ck_assert_uint_eq(a.r[0], 2);
	d = snap_find(&r, SNAP_DEVICE, 0);
	ck_assert_ptr_nonnull(d);
	ck_assert_uint_eq(d->len, sizeof(h) + sizeof("device bytes"));
	memcpy(&h, d->data, sizeof(h));
	ck_assert_str_eq(h.id, "rng0");
	ck_assert_str_eq(h.model, "virtio-rng");
	ck_assert_uint_eq(h.slot, 3);
	ck_assert_str_eq((const char *)d->data + sizeof(h), "device bytes");
	/* a missing section and one of another size are refused by name */
	ck_assert_int_eq(snap_get(&r, SNAP_VCPU_SREGS, 0, &a, sizeof(a), err, sizeof(err)),
			 -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "sregs"));
	ck_assert_int_eq(snap_get(&r, SNAP_VM_CLOCK, 0, &a, sizeof(a), err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "clock section 0 has 48 bytes, expected 144"));
	snap_reader_free(&r);
	snap_writer_free(&w);
}
END_TEST

START_TEST(test_bad_magic_and_version)
{
	struct snap_writer w;

	build(&w, 2);
	w.buf[0] ^= 0xff;
	expect_refused(w.buf, w.len, "bad magic");
	w.buf[0] ^= 0xff;
	w.buf[8] = 3; /* version */
	expect_refused(w.buf, w.len, "format version 3, this lvmm reads version 2 only");
	w.buf[8] = 1; /* an older lvmm's, whose header is shorter */
	expect_refused(w.buf, w.len, "format version 1 (an older lvmm's)");
	w.buf[8] = 2;
	w.buf[36] = 1; /* flags */
	expect_refused(w.buf, w.len, "unknown flags");
	snap_writer_free(&w);
}
END_TEST

START_TEST(test_truncated_and_extended)
{
	struct snap_writer w;
	uint8_t *big;

	build(&w, 2);
	expect_refused(w.buf, 10, "shorter than its 72-byte header");
	expect_refused(w.buf, sizeof(struct snap_header), "truncated");
	for (size_t cut = sizeof(struct snap_header) + 1; cut < w.len; cut += 7)
		expect_refused(w.buf, cut, "truncated");
	big = calloc(1, w.len + 8);
	memcpy(big, w.buf, w.len);
	expect_refused(big, w.len + 8, "truncated or extended");
	free(big);
	snap_writer_free(&w);
}
END_TEST

START_TEST(test_corrupt)
{
	struct snap_writer w;

	build(&w, 2);
	w.buf[w.len - 20] ^= 0x40;
	expect_refused(w.buf, w.len, "checksum mismatch");
	snap_writer_free(&w);
}
END_TEST

/* Lengths the checksum cannot catch (the file was made that way): the parser must still refuse. */
START_TEST(test_section_overruns)
{
	struct snap_writer w;
	struct snap_section s;
	size_t first = sizeof(struct snap_header);

	build(&w, 2);
	memcpy(&s, w.buf + first, sizeof(s));
	s.len = ~0ULL;
	memcpy(w.buf + first, &s, sizeof(s));
	rehash(w.buf, w.len);
	expect_refused(w.buf, w.len, "overruns the file");
	s.len = w.len; /* inside SNAP_MAX_SECTION, past the end */
	memcpy(w.buf + first, &s, sizeof(s));
	rehash(w.buf, w.len);
	expect_refused(w.buf, w.len, "overruns the file");
	snap_writer_free(&w);

	/* more sections announced than present */
	build(&w, 2);
	w.buf[32] = 5; /* nsections 4 -> 5 */
	expect_refused(w.buf, w.len, "past the end");
	w.buf[32] = 3; /* fewer: the last one is stray bytes */
	expect_refused(w.buf, w.len, "stray bytes");
	snap_writer_free(&w);
}
END_TEST

START_TEST(test_vcpu_count)
{
	struct snap_writer w;

	/* regs of vCPU 1 in a file that says one vCPU */
	build(&w, 1);
	expect_refused(w.buf, w.len, "regs of vCPU 1, but the snapshot has 1 vCPUs");
	snap_writer_free(&w);
	build(&w, 0);
	expect_refused(w.buf, w.len, "0 vCPUs is outside");
	snap_writer_free(&w);
	build(&w, SNAP_MAX_CPUS + 1);
	expect_refused(w.buf, w.len, "65 vCPUs is outside");
	snap_writer_free(&w);
}
END_TEST

START_TEST(test_duplicate_and_limits)
{
	struct snap_writer w;
	uint64_t x[2] = {7, 0}; /* one MSR entry */
	static uint8_t huge[SNAP_MAX_SECTION + 1];

	snap_writer_init(&w);
	snap_put(&w, SNAP_VCPU_MSRS, 0, &x, sizeof(x));
	snap_put(&w, SNAP_VCPU_MSRS, 0, &x, sizeof(x));
	ck_assert_int_eq(snap_finish(&w, 1, 4096, 0), 0);
	expect_refused(w.buf, w.len, "appears twice");
	snap_writer_free(&w);

	/* the writer refuses a section the parser would refuse */
	snap_writer_init(&w);
	snap_put(&w, SNAP_DEVICE, 0, huge, sizeof(huge));
	ck_assert_int_eq(snap_finish(&w, 1, 4096, 0), -E2BIG);
	snap_writer_free(&w);
}
END_TEST

/* Each section of a fixed size must have it exactly, MSRs whole entries, a device its head. */
START_TEST(test_section_lengths)
{
	static const struct {
		uint32_t type;
		size_t len;
		const char *needle;
	} bad[] = {
	    {SNAP_VCPU_REGS, 143, "(regs 0): 143 bytes, the format's are 144"},
	    {SNAP_VCPU_XSAVE, 4104, "(xsave 0): 4104 bytes, the format's are 4096"},
	    {SNAP_VM_CLOCK, 8, "(clock 0): 8 bytes, the format's are 48"},
	    {SNAP_VM_TSC, 4, "(tsc 0): 4 bytes, the format's are 8"},
	    {SNAP_VM_IOAPIC_KVM, 0, "(ioapic 0): 0 bytes, the format's are 520"},
	    {SNAP_VCPU_MSRS, 24, "not a list of at most 1024 MSRs"},
	    {SNAP_VCPU_MSRS, 16 * 1025, "not a list of at most 1024 MSRs"},
	    {SNAP_DEVICE, 50, "shorter than its head"},
	};
	static uint8_t zero[16 * 1025];
	struct snap_writer w;
	struct snap_reader r;
	char err[256];

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snap_writer_init(&w);
		snap_put(&w, bad[i].type, 0, zero, bad[i].len);
		ck_assert_int_eq(snap_finish(&w, 1, 4096, 0), 0);
		expect_refused(w.buf, w.len, bad[i].needle);
		snap_writer_free(&w);
	}
	/* the right sizes pass */
	snap_writer_init(&w);
	snap_put(&w, SNAP_VCPU_REGS, 0, zero, SNAP_LEN_REGS);
	snap_put(&w, SNAP_VCPU_MSRS, 0, zero, 16 * 1024);
	snap_put(&w, SNAP_VM_TSC, 0, zero, SNAP_LEN_TSC);
	ck_assert_int_eq(snap_finish(&w, 1, 4096, 0), 0);
	ck_assert_int_eq(snap_parse(w.buf, w.len, &r, err, sizeof(err)), 0);
	snap_reader_free(&r);
	snap_writer_free(&w);
}
END_TEST

/* memory.bin's trailer: the state file's id and RAM size, or refused by what differs. */
START_TEST(test_memory_trailer)
{
	struct snap_mem_trailer t;
	struct snap_writer w;
	struct snap_reader r;
	char err[256];

	build(&w, 2);
	ck_assert_int_eq(snap_parse(w.buf, w.len, &r, err, sizeof(err)), 0);
	snap_mem_trailer_make(&t, 128ULL << 20, w.id);
	ck_assert_int_eq(snap_mem_trailer_check(&t, &r.h, err, sizeof(err)), 0);
	t.id[3] ^= 1; /* another snapshot's */
	ck_assert_int_eq(snap_mem_trailer_check(&t, &r.h, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "memory.bin belongs to another snapshot"));
	t.id[3] ^= 1;
	t.memory = 64ULL << 20;
	ck_assert_int_eq(snap_mem_trailer_check(&t, &r.h, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "67108864 bytes of RAM, the state file 134217728"));
	t.memory = 128ULL << 20;
	t.reserved[2] = 1;
	ck_assert_int_eq(snap_mem_trailer_check(&t, &r.h, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no snapshot trailer"));
	memset(&t, 0, sizeof(t)); /* a version 1 memory.bin's last bytes: RAM */
	ck_assert_int_eq(snap_mem_trailer_check(&t, &r.h, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no snapshot trailer"));
	snap_reader_free(&r);
	snap_writer_free(&w);
}
END_TEST

START_TEST(test_empty_ok)
{
	struct snap_writer w;
	struct snap_reader r;
	char err[128];

	snap_writer_init(&w);
	ck_assert_int_eq(snap_finish(&w, 1, 4096, 0), 0);
	ck_assert_uint_eq(w.len, sizeof(struct snap_header));
	ck_assert_int_eq(snap_parse(w.buf, w.len, &r, err, sizeof(err)), 0);
	ck_assert_ptr_null(snap_find(&r, SNAP_VCPU_REGS, 0));
	snap_reader_free(&r);
	snap_writer_free(&w);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("snapshot_fmt");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_bad_magic_and_version);
	tcase_add_test(tc, test_truncated_and_extended);
	tcase_add_test(tc, test_corrupt);
	tcase_add_test(tc, test_section_overruns);
	tcase_add_test(tc, test_vcpu_count);
	tcase_add_test(tc, test_duplicate_and_limits);
	tcase_add_test(tc, test_section_lengths);
	tcase_add_test(tc, test_memory_trailer);
	tcase_add_test(tc, test_empty_ok);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
