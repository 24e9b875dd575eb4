// libgemini's controller watchdog (GEMINI_WATCHDOG=S): a diagnostic thread that reports how
// the controller threads, the GPU's queues and the page cache stand when nothing completes.
#include <stdio.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "gemini_ctrl.h"

static const char *const gm_phase_name[] = {"polling the queues", "reading the disk",
					    "waiting for its copies", "writing the disk",
					    "flushing"};

/*
 * GEMINI_WATCHDOG=S (seconds), a diagnostic for hangs, off by default: every S seconds it
 * prints how many commands were served, or, when none were, where every controller thread is,
 * each busy queue as the host sees it (doorbell against served) and as the GPU does (slots
 * reserved, doorbell rung, the next slot's turn), and the page cache (held shard locks, loading
 * and referenced pages, broken hash chains).
 */
static void gm_watch_report(struct gemini_ctx *c, const uint32_t *snap, int have_snap,
			    unsigned secs)
{
	uint32_t depth = c->cfg.qdepth;
	uint64_t now = gm_now_ns();

	fprintf(stderr, "gemini watchdog: no command completed for %u s\n", secs);
	for (int i = 0; i < c->nthreads; i++) {
		struct gm_worker *w = (struct gm_worker *)c->workers[i];

		fprintf(stderr, "  controller %d: %s for %llu ms, %llu commands served\n", i,
			gm_phase_name[w->phase],
			(unsigned long long)((now - w->phase_ns) / 1000000), w->served);
	}
	for (uint32_t qi = 0; qi < c->cfg.nqueues; qi++) {
		const uint32_t *db = gm_qpair_at(c->qmem, depth, qi).db;
		uint32_t tail = __atomic_load_n(db, __ATOMIC_ACQUIRE);
		uint32_t head = __atomic_load_n(&c->qhead[qi], __ATOMIC_ACQUIRE);
		const uint32_t *turn = snap + (size_t)qi * (depth + GM_CTL_WORDS),
			       *ctl = turn + depth;

		if (tail == head && (!have_snap || (ctl[0] == ctl[1] && ctl[1] == tail)))
			continue;
		fprintf(stderr, "  queue %u: doorbell %u, served %u", qi + 1, tail, head);
		if (have_snap) {
			uint32_t nx = ctl[1], slot = nx & (depth - 1);

			fprintf(
			    stderr,
			    "; GPU: %u slots reserved, doorbell rung to %u; slot %u (ticket %u) "
			    "has turn %u, wants %u%s",
			    ctl[0], ctl[1], slot, nx, turn[slot], 2 * (nx / depth),
			    ctl[GM_Q_DEAD] ? "; dead (a GPU wait ran past the bound)" : "");
		}
		fputc('\n', stderr);
	}
}

/* Copies n bytes of device memory on stream s into pinned dst, waiting at most a second. */
static int gm_watch_copy(void *dst, const void *src, size_t n, cudaStream_t s)
{
	if (cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s) != cudaSuccess)
		return -1;
	for (int k = 0; k < 100; k++) {
		cudaError_t e = cudaStreamQuery(s);

		if (e == cudaSuccess)
			return 0;
		if (e != cudaErrorNotReady)
			return -1;
		usleep(10000);
	}
	return -1;
}

/*
 * The page cache as the GPU has it now: held shard locks, loading and referenced pages, and
 * hash chains that loop or share pages (a walk under a shard lock would never end). buf:
 * pinned, large enough for every array copied (gm_watch_bytes).
 */
static size_t gm_watch_bytes(const struct gemini_dev *h)
{
	return (size_t)h->nshards * (sizeof(struct gm_shard) + 4ull * h->nbuckets) +
	       16ull * h->npages + 32 * 4;
}

static void gm_watch_cache(struct gemini_ctx *c, cudaStream_t s, uint8_t *buf)
{
	const struct gemini_dev *h = &c->hdev;
	uint32_t np = h->npages, ns = h->nshards, nb = h->nbuckets * h->nshards;
	uint32_t shown = 0, loading = 0, held = 0, err = 0, bad = 0;
	struct gm_shard *sh = (struct gm_shard *)buf;
	uint32_t *st = (uint32_t *)(sh + ns);
	int *ref = (int *)(st + np), *hn = ref + np, *bk = hn + np;
	uint32_t *seen = (uint32_t *)(bk + nb), *wbe = seen + np;

	if (gm_watch_copy(sh, h->shards, ns * sizeof(*sh), s) ||
	    gm_watch_copy(st, h->state, np * 4ull, s) || gm_watch_copy(ref, h->ref, np * 4ull, s) ||
	    gm_watch_copy(hn, h->hnext, np * 4ull, s) ||
	    gm_watch_copy(bk, h->bucket, nb * 4ull, s) ||
	    gm_watch_copy(wbe, h->wb_err, 32 * 4, s)) {
		fprintf(stderr, "  cache: the snapshot did not complete within a second\n");
		return;
	}
	fprintf(stderr, "  cache: %u pages in %u shards; locked shards:", np, ns);
	for (uint32_t k = 0; k < ns; k++)
		if (sh[k].lock && shown++ < 16)
			fprintf(stderr, " %u", k);
	fprintf(stderr, " (%u)\n", shown);
	for (int f = 0; f < GEMINI_MAX_FILES; f++)
		if (wbe[f] != wbe[16 + f])
			fprintf(stderr,
				"  file %d: %u failed write-backs, gemini_dev_sync covered %u\n", f,
				wbe[f], wbe[16 + f]);
	for (uint32_t i = 0; i < np; i++) {
		loading += st[i] == GM_PAGE_LOADING;
		err += st[i] == GM_PAGE_ERROR;
		held += ref[i] != 0;
		seen[i] = 0;
	}
	fprintf(stderr, "  pages: %u loading, %u failed, %u referenced\n", loading, err, held);
	for (uint32_t k = 0; k < nb; k++) {
		uint32_t steps = 0;

		for (int i = bk[k]; i >= 0 && (uint32_t)i < np && steps <= np; i = hn[i], steps++)
			if (seen[i]++ && bad++ < 8)
				fprintf(stderr, "    bucket %u (shard %u): page %d met twice\n", k,
					k / h->nbuckets, i);
	}
	if (bad)
		fprintf(stderr, "    %u hash-chain anomalies\n", bad);
	shown = 0;
	for (uint32_t i = 0; i < np && shown < 8; i++)
		if (ref[i] || st[i] == GM_PAGE_LOADING) {
			shown++;
			fprintf(stderr, "    page %u (shard %u): state %u, %d references\n", i,
				i / h->per_shard, st[i], ref[i]);
		}
	for (uint32_t k = 0, full; k < ns; k++) {
		full = 0;
		for (uint32_t i = k * h->per_shard; i < (k + 1) * h->per_shard; i++)
			full += ref[i] != 0;
		if (full == h->per_shard && shown++ < 16)
			fprintf(stderr, "    shard %u: every page referenced\n", k);
	}
}

void *gm_watchdog(void *arg)
{
	struct gemini_ctx *c = (struct gemini_ctx *)arg;
	size_t bytes = (size_t)c->cfg.nqueues * (c->cfg.qdepth + GM_CTL_WORDS) * 4;
	size_t cbytes = gm_watch_bytes(&c->hdev);
	unsigned long long last = 0;
	cudaStream_t s = NULL;
	uint32_t *snap = NULL;
	uint8_t *cbuf = NULL;
	uint64_t since = gm_now_ns();

	cudaSetDevice(c->cfg.device);
	if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
	    cudaHostAlloc((void **)&snap, bytes, cudaHostAllocDefault) != cudaSuccess ||
	    (cbytes < (1ull << 30) &&
	     cudaHostAlloc((void **)&cbuf, cbytes, cudaHostAllocDefault) != cudaSuccess)) {
		fprintf(stderr, "gemini watchdog: no stream or snapshot buffer, not started\n");
		return NULL;
	}
	while (!c->stop) {
		unsigned long long total = 0;
		int have;

		usleep(100000);
		if (gm_now_ns() - since < c->watchdog_s * 1000000000ull)
			continue;
		since = gm_now_ns();
		for (int i = 0; i < c->nthreads; i++)
			total += ((struct gm_worker *)c->workers[i])->served;
		if (total != last) {
			/* a heartbeat: slow progress and a hang look alike from outside */
			fprintf(stderr, "gemini watchdog: %llu commands served in the last %u s\n",
				total - last, c->watchdog_s);
			last = total;
			continue;
		}
		/* the GPU's ticket counters, copied on a stream of our own */
		have = gm_watch_copy(snap, c->turn_dev, bytes, s) == 0;
		if (!have)
			fprintf(stderr, "gemini watchdog: the GPU ticket snapshot did not complete "
					"within 1 s\n");
		gm_watch_report(c, snap, have, c->watchdog_s);
		if (cbuf)
			gm_watch_cache(c, s, cbuf);
	}
	cudaStreamSynchronize(s);
	cudaStreamDestroy(s);
	cudaFreeHost(snap);
	cudaFreeHost(cbuf);
	return NULL;
}
