/* Bench guest workload engine: keeps qd I/Os in flight on each queue pair of a polled device,
 * times every I/O from the guest's clock into a log-linear histogram and prints IOPS and
 * percentiles as fio would. Parameters (kernel command line, all optional):
 *   bench.rw=randread|randwrite|randrw|read|write|rw  bench.rwmix=READ_PERCENT (mixes, 50)
 *   bench.qd=1..1024 (per queue pair)  bench.qp=1..8  bench.bs=BYTES (4096, a block multiple)
 *   bench.ios=N and/or bench.ms=MS (the first reached ends it; 2000 I/Os when neither)
 *   bench.ramp_ms=MS (untimed warm-up)  bench.span_mb=MB (offsets within it)  bench.seed=N
 *   bench.wait=poll|halt  bench.poll_us=US (halt: how long to poll first, 20)
 *   bench.verify=on (writes carry a pattern, reads are checked: bs 4096, qd 32 at most)
 *   bench.gap_us=US (a slot's next I/O waits this long after its completion, the vCPU polling
 *   meanwhile: sparse I/O, e.g. qd 1 and 5000 for one I/O every 5 ms)
 *   bench.cpus=N (bench.c): queue pair i runs on vCPU i % N, bench.ios is split among them */
#include "workload.h"
#include "bench.h"

/* 32 buckets per power of two: a percentile is read within 1/32 (3%) of its value. */
#define SUB_BITS 5
#define NBUCKETS (64 << SUB_BITS)

static uint8_t buffer[WORK_MAX_BS] __attribute__((aligned(4096)));
static uint64_t hist[NBUCKETS];
static uint64_t t_sub[WORK_MAX_QUEUES][WORK_MAX_DEPTH];
static uint64_t t_due[WORK_MAX_QUEUES][WORK_MAX_DEPTH]; /* bench.gap_us: next issue; 0: none */
static uint64_t max_seen; /* percentiles never exceed the largest sample */

uint64_t work_param_u64(const char *name, uint64_t def)
{
	char buf[32];
	uint64_t v = 0;
	unsigned i;

	if (!bench_param(name, buf, sizeof(buf)) || buf[0] < '0' || buf[0] > '9')
		return def;
	for (i = 0; buf[i] >= '0' && buf[i] <= '9'; i++)
		v = v * 10 + (uint64_t)(buf[i] - '0');
	return v;
}

bool work_param_is(const char *name, const char *want)
{
	char buf[32];

	return bench_param(name, buf, sizeof(buf)) && !bench_strcmp(buf, want);
}

uint64_t work_buffer(void)
{
	return (uint64_t)buffer;
}

static uint64_t clamp(uint64_t v, uint64_t lo, uint64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void work_params_get(struct work_params *p)
{
	char rw[16] = "randread";

	bench_param("bench.rw", rw, sizeof(rw));
	p->random = rw[0] == 'r' && rw[1] == 'a';
	if (!bench_strcmp(rw, "randread") || !bench_strcmp(rw, "read"))
		p->read_pct = 100;
	else if (!bench_strcmp(rw, "randwrite") || !bench_strcmp(rw, "write"))
		p->read_pct = 0;
	else
		p->read_pct = (unsigned)clamp(work_param_u64("bench.rwmix", 50), 0, 100);
	p->qd = (unsigned)clamp(work_param_u64("bench.qd", 1), 1, WORK_MAX_DEPTH);
	p->nq = (unsigned)clamp(work_param_u64("bench.qp", 1), 1, WORK_MAX_QUEUES);
	p->bs = (unsigned)clamp(work_param_u64("bench.bs", 4096), 512, WORK_MAX_BS) & ~511u;
	p->ios = work_param_u64("bench.ios", 0);
	p->ms = work_param_u64("bench.ms", 0);
	if (!p->ios && !p->ms)
		p->ios = 2000;
	p->ramp_ms = work_param_u64("bench.ramp_ms", 0);
	p->span = work_param_u64("bench.span_mb", 0) << 20;
	p->seed = work_param_u64("bench.seed", 1);
	p->halt = work_param_is("bench.wait", "halt");
	p->poll_us = (unsigned)clamp(work_param_u64("bench.poll_us", 20), 0, 1000000);
	p->verify = work_param_is("bench.verify", "on");
	p->gap_us = (unsigned)clamp(work_param_u64("bench.gap_us", 0), 0, 10000000);
}

static unsigned bucket_of(uint64_t ns)
{
	unsigned msb;

	if (ns < (1u << SUB_BITS))
		return (unsigned)ns;
	msb = 63 - (unsigned)__builtin_clzll(ns);
	return ((msb - SUB_BITS + 1) << SUB_BITS) |
	       (unsigned)((ns >> (msb - SUB_BITS)) & ((1u << SUB_BITS) - 1));
}

/* The middle of a bucket's range. */
static uint64_t bucket_value(unsigned b)
{
	unsigned e = b >> SUB_BITS, m = b & ((1u << SUB_BITS) - 1);
	uint64_t lo, width;

	if (!e)
		return m;
	lo = (uint64_t)((1u << SUB_BITS) | m) << (e - 1);
	width = 1ULL << (e - 1);
	return lo + width / 2;
}

static uint64_t percentile(uint64_t total, unsigned permille_x10)
{
	uint64_t want = (total * permille_x10 + 9999) / 10000, seen = 0;
	unsigned b;

	for (b = 0; b < NBUCKETS; b++) {
		seen += hist[b];
		if (seen >= want && hist[b])
			return bucket_value(b) < max_seen ? bucket_value(b) : max_seen;
	}
	return 0;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* bench.verify=on: each I/O moves its own buffer; a write carries a pattern of (seed, offset),
 * a read is compared with it. Every vCPU writes the same bytes at an offset, so overlapping
 * writes from several queue pairs cannot make a later read differ. */
#define VERIFY_DEPTH 32
#define VERIFY_BS    4096

static uint8_t vbuf[WORK_MAX_QUEUES][VERIFY_DEPTH][VERIFY_BS] __attribute__((aligned(4096)));
static uint64_t v_off[WORK_MAX_QUEUES][VERIFY_DEPTH];
static bool v_write[WORK_MAX_QUEUES][VERIFY_DEPTH];

static uint64_t pattern(uint64_t seed, uint64_t off)
{
	uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ off;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

/* One vCPU's share: queue pairs cpu, cpu + ncpu, ... and its counters; cpu 0's is today's
 * whole run when there is one vCPU. */
struct work_state {
	const struct work_dev *dev;
	const struct work_params *p;
	unsigned cpu, ncpu, nq, qd;
	uint64_t rng, next_off, span, submitted, reads, writes, ios_max;
	uint64_t t0, t_end_run, ios, errors, sum, max, verified, bad;
	bool setup_failed;
	uint64_t hist[NBUCKETS];
	uint16_t done_slots[WORK_MAX_DEPTH];
};

static struct work_state states[BENCH_MAX_CPUS];

static bool issue(struct work_state *s, unsigned q, unsigned slot, uint64_t now)
{
	const struct work_params *p = s->p;
	uint64_t off, blocks = s->span / p->bs, buf = work_buffer();
	bool write;

	if (p->random) {
		off = (rnd(&s->rng) % blocks) * p->bs;
	} else {
		off = s->next_off;
		s->next_off = (s->next_off + p->bs) % (blocks * p->bs);
	}
	write = p->read_pct < 100 && (p->read_pct == 0 || rnd(&s->rng) % 100 >= p->read_pct);
	t_sub[q][slot] = now;
	s->submitted++;
	if (write)
		s->writes++;
	else
		s->reads++;
	if (p->verify) {
		uint64_t *w = (uint64_t *)vbuf[q][slot];
		unsigned i;

		buf = (uint64_t)w;
		v_off[q][slot] = off;
		v_write[q][slot] = write;
		for (i = 0; i < p->bs / 8; i++)
			w[i] = write ? pattern(p->seed, off + i * 8) : 0;
	}
	return s->dev->submit(q, slot, write, off, p->bs, buf);
}

/* A completed read of a verifying run: true when the data is the pattern. */
static bool verify_read(struct work_state *s, unsigned q, unsigned slot)
{
	const uint64_t *w = (const uint64_t *)vbuf[q][slot];
	unsigned i;

	s->verified++;
	for (i = 0; i < s->p->bs / 8; i++) {
		if (w[i] != pattern(s->p->seed, v_off[q][slot] + i * 8)) {
			if (!s->bad++)
				bench_printf("bench: work verify FAIL vcpu %u queue %u offset %lu "
					     "word %u: %lx\n",
					     s->cpu, q, v_off[q][slot], i, w[i]);
			return false;
		}
	}
	return true;
}

static void work_cpu(unsigned cpu, void *arg)
{
	struct work_state *s = &states[cpu];
	const struct work_dev *dev = s->dev;
	const struct work_params *p = s->p;
	unsigned nq = s->nq, qd = s->qd, q, i, k;
	uint64_t t0, t_ramp, t_end, now, last, inflight = 0, waiting = 0;
	bool timing = !p->ramp_ms, halt = p->halt && cpu == 0; /* MSI-X reaches vCPU 0 only */

	(void)arg;
	t0 = bench_ns();
	t_ramp = t0 + p->ramp_ms * 1000000ULL;
	t_end = p->ms ? t_ramp + p->ms * 1000000ULL : ~0ULL;
	for (q = cpu; q < nq; q += s->ncpu) {
		for (i = 0; i < qd; i++) {
			if (!issue(s, q, i, t0)) {
				bench_printf("bench: work FAIL submit queue %u slot %u\n", q, i);
				s->setup_failed = true;
				s->t0 = t0;
				s->t_end_run = bench_ns();
				return;
			}
			inflight++;
		}
		dev->kick(q);
	}
	last = bench_ns();
	while (inflight || waiting) {
		bool idle = true;

		/* bench.gap_us: slots whose wait is over go out again */
		for (q = cpu; waiting && q < nq; q += s->ncpu) {
			bool kick = false;

			now = bench_ns();
			for (i = 0; i < qd; i++) {
				if (!t_due[q][i] || t_due[q][i] > now)
					continue;
				t_due[q][i] = 0;
				waiting--;
				if (now >= t_end || s->errors)
					continue;
				if (!issue(s, q, i, now)) {
					s->errors++;
					continue;
				}
				inflight++;
				kick = true;
			}
			if (kick)
				dev->kick(q);
		}
		for (q = cpu; q < nq; q += s->ncpu) {
			unsigned n, errs = 0;

			n = dev->reap(q, s->done_slots, qd, &errs);
			if (!n)
				continue;
			idle = false;
			now = last = bench_ns();
			if (!timing && now >= t_ramp) {
				timing = true;
				t0 = now;
				if (p->ms)
					t_end = now + p->ms * 1000000ULL;
			}
			s->errors += errs;
			inflight -= n;
			for (k = 0; k < n; k++) {
				unsigned slot = s->done_slots[k];
				uint64_t lat;

				if (slot >= qd) { /* a tag the engine never gave out */
					s->errors++;
					continue;
				}
				lat = now - t_sub[q][slot];
				if (p->verify && !errs && !v_write[q][slot] &&
				    !verify_read(s, q, slot))
					s->errors++;
				if (timing && t_sub[q][slot] >= t0) {
					s->hist[bucket_of(lat)]++;
					s->sum += lat;
					if (lat > s->max)
						s->max = lat;
					s->ios++;
				}
				if (now >= t_end ||
				    (s->ios_max && s->ios + inflight + waiting >= s->ios_max) ||
				    s->errors)
					continue;
				if (p->gap_us) {
					t_due[q][slot] = now + p->gap_us * 1000ULL;
					waiting++;
					continue;
				}
				if (!issue(s, q, slot, now)) {
					s->errors++;
					continue;
				}
				inflight++;
			}
			dev->kick(q);
		}
		/* a completion that lands before the hlt leaves its interrupt pending: no lost wake
		 */
		if (idle && halt && !waiting && bench_ns() - last > p->poll_us * 1000ULL) {
			work_halt();
			last = bench_ns();
		}
	}
	s->t0 = t0;
	s->t_end_run = bench_ns();
}

bool work_run(const struct work_dev *dev, const struct work_params *p)
{
	unsigned nq = p->nq < dev->nqueues ? p->nq : dev->nqueues;
	unsigned qd = p->qd < dev->depth ? p->qd : dev->depth, ncpu = bench_ncpus(), c, i;
	uint64_t span, t0 = ~0ULL, now = 0, ios = 0, errors = 0, sum = 0, max = 0, reads = 0,
		       writes = 0, verified = 0;

	span = p->span && p->span <= dev->capacity ? p->span : dev->capacity;
	if (span < p->bs || nq == 0 || p->bs % (1u << dev->blk_shift) ||
	    (p->verify && (p->bs > VERIFY_BS || qd > VERIFY_DEPTH))) {
		bench_printf("bench: work FAIL span %lu, bs %u, %u queues, block %u%s\n", span,
			     p->bs, nq, 1u << dev->blk_shift,
			     p->verify ? " (verify: bs 4096 and qd 32 at most)" : "");
		return false;
	}
	if (ncpu > nq)
		ncpu = nq;
	for (i = 0; i < NBUCKETS; i++)
		hist[i] = 0;
	bench_printf("bench: work start %s rw=%s%s bs=%u qd=%u qp=%u span_mb=%lu\n", dev->name,
		     p->random ? "rand" : "seq",
		     p->read_pct == 100 ? "read"
		     : p->read_pct	? "mix"
					: "write",
		     p->bs, qd, nq, span >> 20);
	for (c = 0; c < ncpu; c++) {
		struct work_state *s = &states[c];
		uint64_t blocks = span / p->bs;
		volatile uint64_t *z = (volatile uint64_t *)s; /* no memset here */

		for (i = 0; i < sizeof(*s) / 8; i++)
			z[i] = 0;
		s->dev = dev;
		s->p = p;
		s->cpu = c;
		s->ncpu = ncpu;
		s->nq = nq;
		s->qd = qd;
		s->span = span;
		s->rng = (p->seed + c) * 0x9e3779b97f4a7c15ULL + 1;
		/* sequential runs: each vCPU starts at its own part of the span */
		s->next_off = blocks * c / ncpu * p->bs;
		s->ios_max = (p->ios + ncpu - 1) / ncpu;
	}
	if (ncpu > 1)
		bench_smp_run(work_cpu, NULL, ncpu);
	work_cpu(0, NULL);
	if (ncpu > 1)
		bench_smp_wait();
	/* a short line first: the host stops its counters here, before the long result line's
	 * console exits */
	bench_puts("bench: work end\n");
	for (c = 0; c < ncpu; c++) {
		const struct work_state *s = &states[c];

		if (s->setup_failed)
			return false;
		for (i = 0; i < NBUCKETS; i++)
			hist[i] += s->hist[i];
		ios += s->ios;
		errors += s->errors;
		sum += s->sum;
		reads += s->reads;
		writes += s->writes;
		verified += s->verified;
		if (s->max > max)
			max = s->max;
		if (s->t0 < t0)
			t0 = s->t0;
		if (s->t_end_run > now)
			now = s->t_end_run;
	}
	max_seen = max;
	bench_printf("bench: work result %s ios=%lu ns=%lu iops=%lu mean_ns=%lu p50_ns=%lu "
		     "p90_ns=%lu p99_ns=%lu p999_ns=%lu max_ns=%lu errors=%lu reads=%lu "
		     "writes=%lu halts=%lu irqs=%lu",
		     dev->name, ios, now - t0, ios * 1000000000UL / (now - t0 ? now - t0 : 1),
		     ios ? sum / ios : 0, percentile(ios, 5000), percentile(ios, 9000),
		     percentile(ios, 9900), percentile(ios, 9990), max, errors, reads, writes,
		     bench_halts, work_irqs);
	if (p->verify)
		bench_printf(" verified=%lu", verified);
	if (ncpu > 1) {
		bench_printf(" vcpus=%u vcpu_ios=", ncpu);
		for (c = 0; c < ncpu; c++)
			bench_printf(c ? ",%lu" : "%lu", states[c].ios);
	}
	bench_puts("\n");
	return !errors;
}
