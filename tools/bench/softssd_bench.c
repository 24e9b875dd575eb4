/* The "native" client of softssd benchmarks: one session, one or more queue pairs (lio_drv),
 * 4 KiB random reads or writes at a fixed queue depth for a fixed time, sleeping on the interrupt
 * eventfd or polling (--poll, as the bench guest does); prints IOPS and latency percentiles.
 * --gap-us N (queue depth 1, one queue pair): each read waits N us after the last completion,
 * sleeping, as sparse I/O does (the bench guest's bench.gap_us). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lightiov/nvme.h"
#include "client/lio_client.h"

#define BS	    4096u
#define MAX_SAMPLES (8u << 20)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static double mean_us(const uint32_t *lat, unsigned n)
{
	double sum = 0;
	unsigned i;

	for (i = 0; i < n; i++)
		sum += lat[i];
	return n ? sum / n / 1e3 : 0;
}

/* One 4 KiB I/O at a random block of the volume on queue q; returns its cid. */
static int submit_one(struct lio_drv *d, unsigned q, uint8_t opc, uint64_t blocks, uint32_t mode,
		      const struct lio_vol_attach *a, unsigned lba_shift, uint64_t *seed,
		      uint64_t gpa)
{
	struct nvme_sqe s = {.opcode = opc, .nsid = 1};
	uint64_t lba = (rnd(seed) % blocks) * (BS >> lba_shift);

	if (mode == LIGHTIOV_MODE_PASSTHROUGH)
		lba += a->lba_start;
	s.cdw10 = (uint32_t)lba;
	s.cdw11 = (uint32_t)(lba >> 32);
	s.cdw12 = (BS >> lba_shift) - 1;
	s.prp1 = gpa;
	return lio_drv_submit(d, q, &s);
}

static void usage(void)
{
	fprintf(stderr, "usage: softssd-bench-client SSD VOLUME SIZE [--qd N] [--secs S]\n"
			"       [--mode isolated|passthrough] [--db poll|eventfd] [--fill]\n"
			"       [--rw randread|randwrite] [--qp N] [--poll] [--ms MS]\n"
			"       [--gap-us N (with --qd 1 --qp 1)] [--go FILE]\n"
			"  --go FILE: once connected and set up, wait until FILE exists (clients\n"
			"  started one by one then measure the same window)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"qd", required_argument, 0, 'q'},	 {"secs", required_argument, 0, 's'},
	    {"mode", required_argument, 0, 'm'}, {"db", required_argument, 0, 'd'},
	    {"fill", no_argument, 0, 'f'},	 {"rw", required_argument, 0, 'r'},
	    {"qp", required_argument, 0, 'p'},	 {"poll", no_argument, 0, 'P'},
	    {"ms", required_argument, 0, 'M'},	 {"gap-us", required_argument, 0, 'g'},
	    {"go", required_argument, 0, 'G'},	 {0, 0, 0, 0},
	};
	unsigned qd = 1, fillv = 0, nsamp = 0, i, nqp = 1, q, poll = 0;
	uint64_t ms = 5000, writes = 0, gap_us = 0;
	uint8_t opc = NVME_CMD_READ;
	uint32_t mode = LIGHTIOV_MODE_ISOLATED, db = LIO_QP_DB_POLL;
	struct lio_vol_attach a = {.flags = LIO_ATTACH_CREATE};
	struct lio_identify id;
	struct lio_drv_opts o = {0};
	struct lio_client *c;
	struct lio_drv *d;
	uint64_t *t_sub, seed = 0x9e3779b97f4a7c15ull, buf, blocks, done = 0, t0, t1, end, stall;
	uint32_t *lat;
	const char *go = NULL;
	char err[256];
	int ch, r;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'q':
			qd = (unsigned)atoi(optarg);
			break;
		case 's':
			ms = strtoull(optarg, NULL, 0) * 1000;
			break;
		case 'M':
			ms = strtoull(optarg, NULL, 0);
			break;
		case 'r':
			opc = !strcmp(optarg, "randwrite") ? NVME_CMD_WRITE : NVME_CMD_READ;
			break;
		case 'p':
			nqp = (unsigned)atoi(optarg);
			break;
		case 'P':
			poll = 1;
			break;
		case 'g':
			gap_us = strtoull(optarg, NULL, 0);
			break;
		case 'G':
			go = optarg;
			break;
		case 'm':
			mode = !strcmp(optarg, "passthrough") ? LIGHTIOV_MODE_PASSTHROUGH
							      : LIGHTIOV_MODE_ISOLATED;
			break;
		case 'd':
			db = !strcmp(optarg, "eventfd") ? LIO_QP_DB_EVENTFD : LIO_QP_DB_POLL;
			break;
		case 'f':
			fillv = 1;
			break;
		default:
			usage();
		}
	}
	if (optind + 3 != argc || qd < 1 || qd > 1023 || nqp < 1 || nqp > LIO_DRV_MAX_QP ||
	    (gap_us && (qd != 1 || nqp != 1)))
		usage();
	snprintf(a.name, sizeof(a.name), "%s", argv[optind + 1]);
	a.size_bytes = strtoull(argv[optind + 2], NULL, 0) << 20; /* MiB */
	r = lio_client_connect(&c, argv[optind], "bench", &id, err, sizeof(err));
	if (r || lio_client_vol_attach(c, &a)) {
		fprintf(stderr, "softssd-bench-client: %s\n", r ? err : lio_client_error(c));
		return 1;
	}
	o = (struct lio_drv_opts){.vol_id = a.vol_id,
				  .lba_start = a.lba_start,
				  .lba_count = a.lba_count,
				  .lba_shift = id.lba_shift,
				  .mode = mode,
				  /* the client sleeps on its interrupt eventfd, as a guest would:
				   * on a busy host a spinning client steals the daemon's CPU */
				  .qp_flags =
				      db | LIO_QP_SQ_QMEM | LIO_QP_CQ_QMEM | LIO_QP_IRQ_ENABLED,
				  .nr_qp = nqp,
				  .depth = qd + 1 > 256 ? qd + 1 : 256,
				  .mem_bytes = 32ull << 20};
	if (db == LIO_QP_DB_EVENTFD) /* rings in guest memory, as the stock driver's */
		o.qp_flags = db | LIO_QP_IRQ_ENABLED;
	if (poll) /* spins on the CQ as the bench guest's polled driver does */
		o.qp_flags &= ~(uint32_t)LIO_QP_IRQ_ENABLED;
	r = lio_drv_open(&d, c, &o, err, sizeof(err));
	if (r) {
		fprintf(stderr, "softssd-bench-client: %s\n", err);
		return 1;
	}
	buf = lio_drv_alloc(d, (uint64_t)256 * BS);
	blocks = a.size_bytes / BS;
	if (fillv) { /* random bytes everywhere, so that no read finds a hole */
		uint64_t *p = lio_drv_ptr(d, buf), off;

		for (off = 0; off < a.size_bytes; off += 32 * BS) {
			for (i = 0; i < 32 * BS / 8; i++)
				p[i] = rnd(&seed);
			if (lio_drv_io(d, 0, NVME_CMD_WRITE, off >> id.lba_shift,
				       (32 * BS) >> id.lba_shift, buf)) {
				fprintf(stderr, "softssd-bench-client: fill write failed\n");
				return 1;
			}
		}
		lio_drv_io(d, 0, NVME_CMD_FLUSH, 0, 0, 0);
		printf("filled %" PRIu64 " MiB at lba %" PRIu64 "\n", a.size_bytes >> 20,
		       a.lba_start);
		lio_drv_close(d);
		lio_client_close(c);
		return 0;
	}
	lat = malloc(MAX_SAMPLES * sizeof(*lat));
	t_sub = calloc((size_t)nqp << 16, sizeof(*t_sub));
	if (!lat || !t_sub)
		return 1;
	while (go && access(go, F_OK)) {
		struct timespec ts = {0, 1000000};

		nanosleep(&ts, NULL);
	}
	t0 = stall = now_ns();
	end = t0 + ms * 1000000ull;
	for (q = 0; q < nqp; q++)
		for (i = 0; i < qd; i++)
			t_sub[q << 16 | submit_one(d, q, opc, blocks, mode, &a, id.lba_shift, &seed,
						   buf + (uint64_t)(i % 256) * BS)] = now_ns();
	for (q = 0;; q = (q + 1) % nqp) {
		struct nvme_cqe cqe[64];
		/* one queue: wait on it; several: look at each in turn */
		int n = lio_drv_reap(d, q, cqe, 64, nqp == 1 ? 30000 : 0), k;
		uint64_t t = now_ns();
		unsigned left = 0;

		if (n < 0 || (n == 0 && t > stall + 30000000000ull)) {
			fprintf(stderr, "softssd-bench-client: no completion in 30 s\n");
			return 1;
		}
		if (n)
			stall = t;
		for (k = 0; k < n; k++) {
			if (cqe[k].status >> 1) {
				fprintf(stderr, "softssd-bench-client: status 0x%x\n",
					cqe[k].status >> 1);
				return 1;
			}
			if (nsamp < MAX_SAMPLES)
				lat[nsamp++] = (uint32_t)(t - t_sub[q << 16 | cqe[k].cid]);
			done++;
			writes += opc == NVME_CMD_WRITE;
			if (t >= end)
				continue;
			if (gap_us) { /* the think time, asleep */
				struct timespec ts = {.tv_sec = (time_t)(gap_us / 1000000),
						      .tv_nsec = (long)(gap_us % 1000000) * 1000};

				nanosleep(&ts, NULL);
				t = now_ns();
			}
			t_sub[q << 16 | submit_one(d, q, opc, blocks, mode, &a, id.lba_shift, &seed,
						   buf + (uint64_t)(cqe[k].cid % 256) * BS)] = t;
		}
		for (i = 0; i < nqp; i++)
			left += d->qp[i].outstanding;
		if (t >= end && !left)
			break;
	}
	t1 = now_ns();
	qsort(lat, nsamp, sizeof(*lat), cmp_u32);
	printf(
	    "iops=%.0f mean_us=%.1f p50_us=%.1f p90_us=%.1f p99_us=%.1f p999_us=%.1f ios=%" PRIu64
	    " writes=%" PRIu64 " secs=%.2f\n",
	    (double)done * 1e9 / (double)(t1 - t0), mean_us(lat, nsamp), lat[nsamp / 2] / 1e3,
	    lat[(uint64_t)nsamp * 90 / 100] / 1e3, lat[(uint64_t)nsamp * 99 / 100] / 1e3,
	    lat[(uint64_t)nsamp * 999 / 1000] / 1e3, done, writes, (double)(t1 - t0) / 1e9);
	lio_drv_close(d);
	lio_client_close(c);
	return 0;
}
