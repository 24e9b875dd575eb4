/* Unit tests for softssd's hand-over records (host-kmod/softssd/handover.c): what the new daemon
 * accepts from its predecessor, and every refusal of a hostile stream: short, foreign magic, other
 * version, wrong length, unknown kind, fd counts that do not match the record, fields out of
 * range; and the transport: fds travel, a message too large or with too many fds is refused and
 * its fds closed. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "softssd/handover.h"
#include "softssd/server_int.h"
#include "testutil.h"

static _Alignas(8) uint8_t msg[SSD_HO_MAX_BYTES + 64];
static struct ssd_ho_rec rec;
static char err[256];

/* A message of kind with payload p (len bytes), the header's fields as given. */
static size_t build(uint32_t magic, uint16_t version, uint16_t kind, const void *p, uint32_t len,
		    uint32_t hdr_len, uint32_t nfds)
{
	struct ssd_ho_hdr h = {magic, version, kind, hdr_len, nfds};

	memcpy(msg, &h, sizeof(h));
	memcpy(msg + sizeof(h), p, len);
	return sizeof(h) + len;
}

static int parse_rec(uint16_t kind, const void *p, uint32_t len, unsigned nfds)
{
	size_t n = build(SSD_HO_MAGIC, SSD_HO_VERSION, kind, p, len, len, nfds);

	err[0] = 0;
	return ssd_ho_parse(msg, n, nfds, 0, &rec, err, sizeof(err));
}

static struct ssd_ho_server server_ok(void)
{
	struct ssd_ho_server s = {.lba_shift = 9,
				  .workers = 2,
				  .max_clients = 64,
				  .max_qp_client = 256,
				  .max_qpairs = LIO_MAX_QPAIRS,
				  .flags = SSD_HO_SRV_DIRECT};

	strcpy(s.name, "ssd0");
	strcpy(s.model, "none");
	return s;
}

static struct ssd_ho_session session_ok(void)
{
	struct ssd_ho_session s = {.pid = 10, .uid = 0, .owner = 3, .admin = 1, .nvols = 1};

	strcpy(s.label, "vm1");
	s.win.nr_regions = 2;
	s.qmem_bytes = 1 << 20;
	return s;
}

START_TEST(test_good_records)
{
	struct ssd_ho_server sv = server_ok();
	struct ssd_ho_session ss = session_ok();
	struct ssd_ho_qp qp = {.qp_id = 7, .flags = SSD_HO_QP_SQ_OFF};
	struct ssd_ho_end end = {.nsessions = 1, .nqps = 1};

	/* a server record with an O_DIRECT descriptor: listener, backing, stdout, stderr, direct */
	ck_assert_int_eq(parse_rec(SSD_HO_SERVER, &sv, sizeof(sv), 5), 0);
	ck_assert_uint_eq(rec.kind, SSD_HO_SERVER);
	ck_assert_str_eq(rec.u.srv.name, "ssd0");
	/* a session: its socket, two window memfds, its queue memory */
	ck_assert_int_eq(parse_rec(SSD_HO_SESSION, &ss, sizeof(ss), 4), 0);
	ck_assert_uint_eq(rec.u.sess.owner, 3);
	/* a queue pair with both eventfds */
	qp.rq.qp.flags = LIO_QP_DB_EVENTFD | LIO_QP_IRQ_ENABLED;
	ck_assert_int_eq(parse_rec(SSD_HO_QP, &qp, sizeof(qp), 2), 0);
	ck_assert_uint_eq(rec.u.qp.qp_id, 7);
	ck_assert_int_eq(parse_rec(SSD_HO_END, &end, sizeof(end), 0), 0);
}
END_TEST

START_TEST(test_header_refusals)
{
	struct ssd_ho_end end = {0};
	size_t n;

	/* shorter than a header */
	ck_assert_int_eq(ssd_ho_parse(msg, 7, 0, 0, &rec, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "message of 7 bytes"));
	/* a client's request, not a hand-over */
	n = build(LIO_MAGIC, SSD_HO_VERSION, SSD_HO_END, &end, sizeof(end), sizeof(end), 0);
	ck_assert_int_eq(ssd_ho_parse(msg, n, 0, 0, &rec, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "magic 0x4c494f31"));
	/* another version of the daemon */
	n = build(SSD_HO_MAGIC, SSD_HO_VERSION + 1, SSD_HO_END, &end, sizeof(end), sizeof(end), 0);
	ck_assert_int_eq(ssd_ho_parse(msg, n, 0, 0, &rec, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "version 3, this daemon speaks 2"));
	/* truncated by the transport */
	n = build(SSD_HO_MAGIC, SSD_HO_VERSION, SSD_HO_END, &end, sizeof(end), sizeof(end), 0);
	ck_assert_int_eq(ssd_ho_parse(msg, n, 0, 1, &rec, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "larger than"));
	/* unknown kinds */
	n = build(SSD_HO_MAGIC, SSD_HO_VERSION, 0, &end, sizeof(end), sizeof(end), 0);
	ck_assert_int_eq(ssd_ho_parse(msg, n, 0, 0, &rec, err, sizeof(err)), -EPROTO);
	n = build(SSD_HO_MAGIC, SSD_HO_VERSION, SSD_HO_KIND_MAX, &end, sizeof(end), sizeof(end), 0);
	ck_assert_int_eq(ssd_ho_parse(msg, n, 0, 0, &rec, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "kind 8 unknown"));
	/* the header's length is not what came, or not the kind's size */
	n = build(SSD_HO_MAGIC, SSD_HO_VERSION, SSD_HO_END, &end, sizeof(end), sizeof(end) + 4, 0);
	ck_assert_int_eq(ssd_ho_parse(msg, n, 0, 0, &rec, err, sizeof(err)), -EPROTO);
	n = build(SSD_HO_MAGIC, SSD_HO_VERSION, SSD_HO_END, &end, sizeof(end) - 4, sizeof(end) - 4,
		  0);
	ck_assert_int_eq(ssd_ho_parse(msg, n, 0, 0, &rec, err, sizeof(err)), -EPROTO);
	{
		char want[64];

		snprintf(want, sizeof(want), "end record: %zu payload bytes", sizeof(end) - 4);
		ck_assert_ptr_nonnull(strstr(err, want));
	}
	/* fds the header does not count */
	n = build(SSD_HO_MAGIC, SSD_HO_VERSION, SSD_HO_END, &end, sizeof(end), sizeof(end), 0);
	ck_assert_int_eq(ssd_ho_parse(msg, n, 2, 0, &rec, err, sizeof(err)), -EPROTO);
}
END_TEST

START_TEST(test_fd_counts)
{
	struct ssd_ho_server sv = server_ok();
	struct ssd_ho_session ss = session_ok();
	struct ssd_ho_qp qp = {.qp_id = 1};

	/* the direct flag asks for a fifth descriptor */
	ck_assert_int_eq(parse_rec(SSD_HO_SERVER, &sv, sizeof(sv), 4), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "server record: 4 fds, its fields ask for 5"));
	sv.flags = 0;
	ck_assert_int_eq(parse_rec(SSD_HO_SERVER, &sv, sizeof(sv), 4), 0);
	/* two regions and queue memory: four; without the queue memory three */
	ck_assert_int_eq(parse_rec(SSD_HO_SESSION, &ss, sizeof(ss), 3), -EPROTO);
	ss.qmem_bytes = 0;
	ck_assert_int_eq(parse_rec(SSD_HO_SESSION, &ss, sizeof(ss), 3), 0);
	/* a queue pair's eventfds follow its flags */
	qp.rq.qp.flags = LIO_QP_IRQ_ENABLED;
	ck_assert_int_eq(parse_rec(SSD_HO_QP, &qp, sizeof(qp), 0), -EPROTO);
	ck_assert_int_eq(parse_rec(SSD_HO_QP, &qp, sizeof(qp), 1), 0);
	ck_assert_int_eq(parse_rec(SSD_HO_QP, &qp, sizeof(qp), 2), -EPROTO);
}
END_TEST

START_TEST(test_field_refusals)
{
	struct ssd_ho_server sv = server_ok();
	struct ssd_ho_session ss = session_ok();
	struct ssd_ho_qp qp = {.qp_id = 1};
	struct ssd_ho_ack ack = {0};

	sv.lba_shift = 10;
	ck_assert_int_eq(parse_rec(SSD_HO_SERVER, &sv, sizeof(sv), 5), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "lba_shift 10"));
	sv = server_ok();
	sv.flags |= 1u << 7;
	ck_assert_int_eq(parse_rec(SSD_HO_SERVER, &sv, sizeof(sv), 5), -EINVAL);
	sv = server_ok();
	memset(sv.name, 'a', sizeof(sv.name));
	ck_assert_int_eq(parse_rec(SSD_HO_SERVER, &sv, sizeof(sv), 5), -EINVAL);
	sv = server_ok();
	sv.max_qpairs = LIO_MAX_QPAIRS + 1;
	ck_assert_int_eq(parse_rec(SSD_HO_SERVER, &sv, sizeof(sv), 5), -EINVAL);
	sv = server_ok();
	sv.workers = 0;
	ck_assert_int_eq(parse_rec(SSD_HO_SERVER, &sv, sizeof(sv), 5), -EINVAL);
	/* a session: regions past the limit (the fd count would follow them), no owner, a label
	 * without its end */
	ss.win.nr_regions = LIO_MAX_REGIONS + 1;
	ck_assert_int_eq(parse_rec(SSD_HO_SESSION, &ss, sizeof(ss), 11), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "9 regions"));
	ss = session_ok();
	ss.nvols = LIO_MAX_ATTACHED + 1;
	ck_assert_int_eq(parse_rec(SSD_HO_SESSION, &ss, sizeof(ss), 4), -EINVAL);
	ss = session_ok();
	ss.owner = 0;
	ck_assert_int_eq(parse_rec(SSD_HO_SESSION, &ss, sizeof(ss), 4), -EINVAL);
	ss = session_ok();
	memset(ss.label, 'x', sizeof(ss.label));
	ck_assert_int_eq(parse_rec(SSD_HO_SESSION, &ss, sizeof(ss), 4), -EINVAL);
	/* a queue pair: id 0, an id past the table, unknown flags */
	qp.qp_id = 0;
	ck_assert_int_eq(parse_rec(SSD_HO_QP, &qp, sizeof(qp), 0), -EINVAL);
	qp.qp_id = LIO_MAX_QPAIRS + 1;
	ck_assert_int_eq(parse_rec(SSD_HO_QP, &qp, sizeof(qp), 0), -EINVAL);
	qp.qp_id = 1;
	qp.flags = 1u << 9;
	ck_assert_int_eq(parse_rec(SSD_HO_QP, &qp, sizeof(qp), 0), -EINVAL);
	/* an acknowledgement: a positive status, a message without its end */
	ack.status = 1;
	ck_assert_int_eq(parse_rec(SSD_HO_ACK, &ack, sizeof(ack), 0), -EINVAL);
	ack.status = -EPERM;
	memset(ack.err, 'e', sizeof(ack.err));
	ck_assert_int_eq(parse_rec(SSD_HO_ABORT, &ack, sizeof(ack), 0), -EINVAL);
}
END_TEST

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

START_TEST(test_transport)
{
	struct ssd_ho_qp qp = {.qp_id = 4};
	int sp[2], fds[SSD_HO_MAX_FDS + 1], pre, i;
	uint64_t dl = ssd_now_ns() + 2000000000ull;
	char big[SSD_HO_MAX_BYTES + 16] = {0};
	struct ssd_ho_hdr h = {SSD_HO_MAGIC, SSD_HO_VERSION, SSD_HO_END, 8, 0};

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
	/* two eventfd stand-ins arrive as new descriptors of the same files */
	ck_assert_int_eq(pipe(fds), 0);
	qp.rq.qp.flags = LIO_QP_DB_EVENTFD | LIO_QP_IRQ_ENABLED;
	ck_assert_int_eq(ssd_ho_send(sp[0], SSD_HO_QP, &qp, sizeof(qp), fds, 2, dl), 0);
	ck_assert_int_eq(ssd_ho_recv(sp[1], &rec, dl, err, sizeof(err)), 0);
	ck_assert_uint_eq(rec.kind, SSD_HO_QP);
	ck_assert_uint_eq(rec.nfds, 2);
	ck_assert_int_eq(write(rec.fds[1], "x", 1), 1);
	ck_assert_int_eq(read(fds[0], big, 1), 1);
	ssd_ho_close_fds(&rec);
	close(fds[0]);
	close(fds[1]);
	/* a record whose fds do not match its flags: refused, the fds closed */
	ck_assert_int_eq(pipe(fds), 0);
	pre = dup(fds[0]);
	close(pre); /* the lowest free descriptor: where the first received one lands */
	qp.rq.qp.flags = 0;
	ck_assert_int_eq(ssd_ho_send(sp[0], SSD_HO_QP, &qp, sizeof(qp), fds, 2, dl), 0);
	ck_assert_int_eq(ssd_ho_recv(sp[1], &rec, dl, err, sizeof(err)), -EPROTO);
	ck_assert_uint_eq(rec.nfds, 0);
	ck_assert(!fd_open(pre));
	close(fds[0]);
	close(fds[1]);
	/* a message larger than a record may be */
	memcpy(big, &h, sizeof(h));
	ck_assert_int_eq(send(sp[0], big, sizeof(big), 0), (ssize_t)sizeof(big));
	ck_assert_int_eq(ssd_ho_recv(sp[1], &rec, dl, err, sizeof(err)), -EPROTO);
	ck_assert_ptr_nonnull(strstr(err, "larger than"));
	/* more fds than a record carries */
	for (i = 0; i <= SSD_HO_MAX_FDS; i++)
		fds[i] = 0;
	ck_assert_int_eq(
	    ssd_ho_send(sp[0], SSD_HO_QP, &qp, sizeof(qp), fds, SSD_HO_MAX_FDS + 1, dl), -EINVAL);
	/* nothing comes: the deadline; the peer goes: said so */
	ck_assert_int_eq(ssd_ho_recv(sp[1], &rec, ssd_now_ns() + 20000000ull, err, sizeof(err)),
			 -ETIMEDOUT);
	close(sp[0]);
	ck_assert_int_eq(ssd_ho_recv(sp[1], &rec, dl, err, sizeof(err)), -ECONNRESET);
	ck_assert_ptr_nonnull(strstr(err, "went"));
	close(sp[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ssd_handover");
	TCase *tc = tcase_create("records");

	tcase_add_test(tc, test_good_records);
	tcase_add_test(tc, test_header_refusals);
	tcase_add_test(tc, test_fd_counts);
	tcase_add_test(tc, test_field_refusals);
	tcase_add_test(tc, test_transport);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
