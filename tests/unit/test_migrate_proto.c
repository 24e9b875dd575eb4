/* Live migration's frames (vmm/migrate_proto.c): headers refused for magic, version, type,
 * reserved fields and lengths outside each type's limits; the receiver's order (HELLO, CONFIG,
 * MEMORY or one MEMFD, STATE, COMMIT); HELLO, MEMORY and MEMFD payloads checked against the
 * announced RAM, offsets that would wrap included. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "migrate_proto.h"
#include "testutil.h"

static char err[256];

static int hdr(uint32_t type, uint64_t len)
{
	struct mig_hdr h;

	mig_make_hdr(&h, type, len);
	return mig_check_hdr(&h, err, sizeof(err));
}

START_TEST(test_headers)
{
	struct mig_hdr h;

	ck_assert_int_eq(hdr(MIG_HELLO, sizeof(struct mig_hello)), 0);
	ck_assert_int_eq(hdr(MIG_HELLO, sizeof(struct mig_hello) + 1), -EPROTO);
	ck_assert_int_eq(hdr(MIG_CONFIG, MIG_MAX_CONFIG), 0);
	ck_assert_int_eq(hdr(MIG_CONFIG, MIG_MAX_CONFIG + 1), -EPROTO);
	ck_assert_int_eq(hdr(MIG_MEMORY, 8 + MIG_MAX_PAGES), 0);
	ck_assert_int_eq(hdr(MIG_MEMORY, 8 + MIG_MAX_PAGES + 1), -EPROTO);
	ck_assert_int_eq(hdr(MIG_MEMORY, 8), -EPROTO);
	ck_assert_int_eq(hdr(MIG_STATE, UINT64_MAX), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "STATE"));
	ck_assert_int_eq(hdr(MIG_READY, 1), -EPROTO);
	ck_assert_int_eq(hdr(MIG_ERROR, MIG_MAX_ERROR + 1), -EPROTO);
	ck_assert_int_eq(hdr(0, 0), -EPROTO);
	ck_assert_int_eq(hdr(MIG_NTYPES, 0), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "unknown frame type"));
	mig_make_hdr(&h, MIG_DONE, 0);
	h.magic ^= 1;
	ck_assert_int_eq(mig_check_hdr(&h, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "magic"));
	mig_make_hdr(&h, MIG_DONE, 0);
	h.version = 2;
	ck_assert_int_eq(mig_check_hdr(&h, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "version 2"));
	mig_make_hdr(&h, MIG_DONE, 0);
	h.pad = 1;
	ck_assert_int_eq(mig_check_hdr(&h, err, sizeof(err)), -EPROTO);
}
END_TEST

static int frame(struct mig_rx *rx, uint32_t type, const void *p, uint64_t len, uint64_t *off,
		 uint64_t *n)
{
	const uint8_t *pages;

	return mig_rx_frame(rx, type, p, len, off, &pages, n, err, sizeof(err));
}

START_TEST(test_order_and_pages)
{
	struct mig_hello hello = {.memory = 1 << 20, .ncpus = 2, .running = 1};
	uint8_t mem[8 + 2 * MIG_PAGE] = {0};
	struct mig_rx rx;
	uint64_t off, n, o;

	mig_rx_init(&rx);
	ck_assert_int_eq(frame(&rx, MIG_CONFIG, "{}", 2, &off, &n), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "out of order"));
	hello.ncpus = 0;
	ck_assert_int_eq(frame(&rx, MIG_HELLO, &hello, sizeof(hello), &off, &n), -EPROTO);
	hello.ncpus = 2;
	hello.memory = 4095;
	ck_assert_int_eq(frame(&rx, MIG_HELLO, &hello, sizeof(hello), &off, &n), -EPROTO);
	hello.memory = 1 << 20;
	ck_assert_int_eq(frame(&rx, MIG_HELLO, &hello, sizeof(hello), &off, &n), 0);
	ck_assert_int_eq(frame(&rx, MIG_MEMORY, mem, sizeof(mem), &off, &n), -EPROTO);
	ck_assert_int_eq(frame(&rx, MIG_CONFIG, "{\0}", 3, &off, &n), -EPROTO);
	ck_assert_int_eq(frame(&rx, MIG_CONFIG, "{}", 2, &off, &n), 0);
	/* pages: whole, inside the RAM, no wrap */
	o = (1 << 20) - 2 * MIG_PAGE;
	memcpy(mem, &o, 8);
	ck_assert_int_eq(frame(&rx, MIG_MEMORY, mem, sizeof(mem), &off, &n), 0);
	ck_assert_uint_eq(off, o);
	ck_assert_uint_eq(n, 2 * MIG_PAGE);
	o += MIG_PAGE;
	memcpy(mem, &o, 8);
	ck_assert_int_eq(frame(&rx, MIG_MEMORY, mem, sizeof(mem), &off, &n), -EPROTO);
	o = UINT64_MAX - MIG_PAGE + 1;
	memcpy(mem, &o, 8);
	ck_assert_int_eq(frame(&rx, MIG_MEMORY, mem, sizeof(mem), &off, &n), -EPROTO);
	o = 1;
	memcpy(mem, &o, 8);
	ck_assert_int_eq(frame(&rx, MIG_MEMORY, mem, sizeof(mem), &off, &n), -EPROTO);
	o = 0;
	memcpy(mem, &o, 8);
	ck_assert_int_eq(frame(&rx, MIG_MEMORY, mem, sizeof(mem) - 1, &off, &n), -EPROTO);
	/* a copy migration takes no memfd */
	ck_assert_int_eq(frame(&rx, MIG_MEMFD, &hello.memory, 8, &off, &n), -EPROTO);
	ck_assert_int_eq(frame(&rx, MIG_STATE, "s", 1, &off, &n), 0);
	ck_assert_int_eq(frame(&rx, MIG_STATE, "s", 1, &off, &n), -EPROTO);
	ck_assert_int_eq(frame(&rx, MIG_COMMIT, NULL, 0, &off, &n), 0);
	ck_assert_int_eq(rx.phase, MIG_RX_END);
	ck_assert_int_eq(mig_rx_expect(&rx, MIG_ERROR, err, sizeof(err)), -EPROTO);
}
END_TEST

/* FDS: between CONFIG and STATE (copy or local), a record that names a device and a place in
 * its count, at most MIG_MAX_FDS of them; anything else refused. */
START_TEST(test_fds)
{
	struct mig_hello hello = {.memory = 1 << 20, .ncpus = 1, .local = 1};
	struct mig_memfd m = {.size = 1 << 20};
	struct mig_fd f = {.id = "net0", .index = 0, .count = 1};
	struct mig_hdr h;
	struct mig_rx rx;
	uint64_t off, n;

	mig_make_hdr(&h, MIG_FDS, sizeof(f));
	ck_assert_int_eq(mig_check_hdr(&h, err, sizeof(err)), 0);
	mig_make_hdr(&h, MIG_FDS, sizeof(f) + 1);
	ck_assert_int_eq(mig_check_hdr(&h, err, sizeof(err)), -EPROTO);
	ck_assert_str_eq(mig_type_name(MIG_FDS), "FDS");
	mig_rx_init(&rx);
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "out of order"));
	ck_assert_int_eq(frame(&rx, MIG_HELLO, &hello, sizeof(hello), &off, &n), 0);
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), -EPROTO);
	ck_assert_int_eq(frame(&rx, MIG_CONFIG, "{}", 2, &off, &n), 0);
	/* before and after the memfd */
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), 0);
	ck_assert_int_eq(frame(&rx, MIG_MEMFD, &m, sizeof(m), &off, &n), 0);
	f.index = 1;
	f.count = 2;
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), 0);
	ck_assert_uint_eq(rx.fds, 2);
	/* no id, an id without its NUL, an index past the count, no count, too many */
	f.id[0] = 0;
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), -EPROTO);
	memset(f.id, 'a', sizeof(f.id));
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), -EPROTO);
	snprintf(f.id, sizeof(f.id), "vsock0");
	f.index = 2;
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), -EPROTO);
	f.index = f.count = 0;
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), -EPROTO);
	f.count = MIG_MAX_DEV_FDS + 1;
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), -EPROTO);
	f.count = 1;
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, 10, &off, &n), -EPROTO);
	while (rx.fds < MIG_MAX_FDS)
		ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), 0);
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "in all"));
	/* none after STATE */
	ck_assert_int_eq(frame(&rx, MIG_STATE, "s", 1, &off, &n), 0);
	ck_assert_int_eq(frame(&rx, MIG_FDS, &f, sizeof(f), &off, &n), -EPROTO);
}
END_TEST

START_TEST(test_local_and_error)
{
	struct mig_hello hello = {.memory = 1 << 20, .ncpus = 1, .local = 1};
	struct mig_memfd m = {.size = 1 << 21};
	struct mig_rx rx;
	uint8_t mem[8 + MIG_PAGE] = {0};
	uint64_t off, n;

	mig_rx_init(&rx);
	ck_assert_int_eq(frame(&rx, MIG_HELLO, &hello, sizeof(hello), &off, &n), 0);
	ck_assert_int_eq(frame(&rx, MIG_CONFIG, "{}", 2, &off, &n), 0);
	ck_assert_int_eq(frame(&rx, MIG_MEMORY, mem, sizeof(mem), &off, &n), -EPROTO);
	ck_assert_int_eq(frame(&rx, MIG_STATE, "s", 1, &off, &n), -EPROTO);
	ck_assert_int_eq(frame(&rx, MIG_MEMFD, &m, sizeof(m), &off, &n), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "MEMFD"));
	m.size = 1 << 20;
	ck_assert_int_eq(frame(&rx, MIG_MEMFD, &m, sizeof(m), &off, &n), 0);
	ck_assert_int_eq(frame(&rx, MIG_MEMFD, &m, sizeof(m), &off, &n), -EPROTO);
	ck_assert_int_eq(frame(&rx, MIG_ERROR, "disk full", 9, &off, &n), -ECANCELED);
	ck_assert_ptr_nonnull(strstr(err, "disk full"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("migrate_proto");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_headers);
	tcase_add_test(tc, test_order_and_pages);
	tcase_add_test(tc, test_local_and_error);
	tcase_add_test(tc, test_fds);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
