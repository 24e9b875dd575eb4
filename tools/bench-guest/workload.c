/* Bench guest workload engine: keeps qd I/Os in flight on each queue pair of a polled device,
 * times every I/O from the guest's clock into a log-linear histogram and prints IOPS and
 * percentiles as fio would. Parameters (kernel command line, all optional):
 *   bench.rw=randread|randwrite|randrw|read|write|rw  bench.rwmix=READ_PERCENT (mixes, 50)
 *   bench.qd=1..1024 (per queue pair)  bench.qp=1..8  bench.bs=BYTES (4096, a block multiple)
 *   bench.ios=N and/or bench.ms=MS (the first reached ends it; 2000 I/Os when neither)
 *   bench.ramp_ms=MS (untimed warm-up)  bench.span_mb=MB (offsets within it)  bench.seed=N
 *   bench.wait=poll|halt  bench.poll_us=US (halt: how long to poll first, 20) */
#include "workload.h"
#include "bench.h"

/* 32 buckets per power of two: a percentile is read within 1/32 (3%) of its value. */
#define SUB_BITS 5
#define NBUCKETS (64 << SUB_BITS)

static uint8_t buffer[WORK_MAX_BS] __attribute__((aligned(4096)));
static uint64_t hist[NBUCKETS];
static uint64_t t_sub[WORK_MAX_QUEUES][WORK_MAX_DEPTH];
static uint16_t done_slots[WORK_MAX_DEPTH];
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

struct work_state {
	const struct work_dev *dev;
	const struct work_params *p;
	uint64_t rng, next_off, span, submitted, reads, writes;
};

static bool issue(struct work_state *s, unsigned q, unsigned slot, uint64_t now)
{
	const struct work_params *p = s->p;
	uint64_t off, blocks = s->span / p->bs;
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
	return s->dev->submit(q, slot, write, off, p->bs, work_buffer());
}

bool work_run(const struct work_dev *dev, const struct work_params *p)
{
	struct work_state s = {.dev = dev, .p = p, .rng = p->seed * 0x9e3779b97f4a7c15ULL + 1};
	unsigned nq = p->nq < dev->nqueues ? p->nq : dev->nqueues;
	unsigned qd = p->qd < dev->depth ? p->qd : dev->depth, q, i, k;
	uint64_t t0, t_ramp, t_end, now, last, ios = 0, errors = 0, sum = 0, max = 0, inflight = 0;
	bool timing = !p->ramp_ms;

	s.span = p->span && p->span <= dev->capacity ? p->span : dev->capacity;
	if (s.span < p->bs || nq == 0 || p->bs % (1u << dev->blk_shift)) {
		bench_printf("bench: work FAIL span %lu, bs %u, %u queues, block %u\n", s.span,
			     p->bs, nq, 1u << dev->blk_shift);
		return false;
	}
	for (i = 0; i < NBUCKETS; i++)
		hist[i] = 0;
	bench_printf("bench: work start %s rw=%s%s bs=%u qd=%u qp=%u span_mb=%lu\n", dev->name,
		     p->random ? "rand" : "seq",
		     p->read_pct == 100 ? "read"
		     : p->read_pct	? "mix"
					: "write",
		     p->bs, qd, nq, s.span >> 20);
	t0 = bench_ns();
	t_ramp = t0 + p->ramp_ms * 1000000ULL;
	t_end = p->ms ? t_ramp + p->ms * 1000000ULL : ~0ULL;
	for (q = 0; q < nq; q++) {
		for (i = 0; i < qd; i++) {
			if (!issue(&s, q, i, t0)) {
				bench_printf("bench: work FAIL submit queue %u slot %u\n", q, i);
				return false;
			}
			inflight++;
		}
		dev->kick(q);
	}
	last = bench_ns();
	while (inflight) {
		bool idle = true;

		for (q = 0; q < nq; q++) {
			unsigned n, errs = 0;

			n = dev->reap(q, done_slots, qd, &errs);
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
			errors += errs;
			inflight -= n;
			for (k = 0; k < n; k++) {
				unsigned slot = done_slots[k];
				uint64_t lat = now - t_sub[q][slot];

				if (timing && t_sub[q][slot] >= t0) {
					hist[bucket_of(lat)]++;
					sum += lat;
					if (lat > max)
						max = lat;
					ios++;
				}
				if (now >= t_end || (p->ios && ios + inflight >= p->ios) || errors)
					continue;
				if (!issue(&s, q, slot, now)) {
					errors++;
					continue;
				}
				inflight++;
			}
			dev->kick(q);
		}
		/* a completion that lands before the hlt leaves its interrupt pending: no lost wake
		 */
		if (idle && p->halt && bench_ns() - last > p->poll_us * 1000ULL) {
			work_halt();
			last = bench_ns();
		}
	}
	now = bench_ns();
	/* a short line first: the host stops its counters here, before the long result line's
	 * console exits */
	bench_puts("bench: work end\n");
	max_seen = max;
	bench_printf("bench: work result %s ios=%lu ns=%lu iops=%lu mean_ns=%lu p50_ns=%lu "
		     "p90_ns=%lu p99_ns=%lu p999_ns=%lu max_ns=%lu errors=%lu reads=%lu "
		     "writes=%lu halts=%lu irqs=%lu\n",
		     dev->name, ios, now - t0, ios * 1000000000UL / (now - t0 ? now - t0 : 1),
		     ios ? sum / ios : 0, percentile(ios, 5000), percentile(ios, 9000),
		     percentile(ios, 9900), percentile(ios, 9990), max, errors, s.reads, s.writes,
		     bench_halts, work_irqs);
	return !errors;
}
