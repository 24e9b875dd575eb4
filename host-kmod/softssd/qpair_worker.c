/* softssd's worker loop: its queue-pair set (taken over from the control thread, dying ones let
 * go), its passes over them, and its sleep: spin a while after the last work, publish EventIdx,
 * look once more, then epoll until a doorbell, the ring, the model's next completion or a
 * polled doorbell page's timer wakes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>

#include "softssd/qpair_int.h"

#define SSD_NVME_DRAIN_MS 30000u

/* ---- the worker's queue-pair set ---- */

static void ssd_worker_sync(struct ssd_worker *w)
{
	unsigned i;

	if (!__atomic_load_n(&w->changed, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&w->lock);
	w->changed = 0;
	if (w->mycap < w->nqps) {
		struct ssd_qp **m = realloc(w->mine, w->nqps * sizeof(*m));

		if (!m) { /* keep the old set; try again on the next pass */
			w->changed = 1;
			pthread_mutex_unlock(&w->lock);
			return;
		}
		w->mine = m;
		w->mycap = w->nqps;
	}
	memcpy(w->mine, w->qps, w->nqps * sizeof(*w->mine));
	w->nmine = w->nqps;
	for (i = 0; i < w->nmine; i++) {
		struct ssd_qp *qp = w->mine[i];

		if (qp->state == SSD_QP_NEW) {
			if (qp->db_fd >= 0) {
				struct epoll_event ev = {.events = EPOLLIN, .data.ptr = qp};

				epoll_ctl(w->epfd, EPOLL_CTL_ADD, qp->db_fd, &ev);
			}
			__atomic_store_n(&qp->state,
					 qp->start_quiesced ? SSD_QP_QUIESCED : SSD_QP_ACTIVE,
					 __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&w->lock);
}

/* A dying queue pair leaves once nothing it fetched is outstanding; a quiescing one is then
 * quiesced. */
static void ssd_worker_reap_dying(struct ssd_worker *w)
{
	unsigned i, j;

	for (i = 0; i < w->nmine; i++) {
		struct ssd_qp *qp = w->mine[i];

		int st = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);

		if (st == SSD_QP_QUIESCING && !qp->inflight) {
			/* drained: every CQE posted, its interrupt raised; fetch nothing more */
			ssd_irq_flush(qp);
			pthread_mutex_lock(&w->lock);
			if (qp->state == SSD_QP_QUIESCING)
				__atomic_store_n(&qp->state, SSD_QP_QUIESCED, __ATOMIC_RELEASE);
			pthread_cond_broadcast(&w->cond);
			pthread_mutex_unlock(&w->lock);
			continue;
		}
		if (st != SSD_QP_DYING || qp->inflight)
			continue;
		ssd_irq_flush(qp);
		if (qp->db_fd >= 0)
			epoll_ctl(w->epfd, EPOLL_CTL_DEL, qp->db_fd, NULL);
		/* out of the private set first: once DEAD, the qp may be freed at any moment */
		w->mine[i--] = w->mine[--w->nmine];
		pthread_mutex_lock(&w->lock);
		for (j = 0; j < w->nqps; j++) {
			if (w->qps[j] == qp) {
				w->qps[j] = w->qps[--w->nqps];
				break;
			}
		}
		w->changed = 1;
		__atomic_store_n(&qp->state, SSD_QP_DEAD, __ATOMIC_RELEASE);
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
	}
}

/* Re-reads every doorbell after publishing EventIdx: true when work arrived meanwhile. */
static bool ssd_worker_recheck(struct ssd_worker *w, bool *watch)
{
	unsigned i;

	*watch = false;
	for (i = 0; i < w->nmine; i++) {
		struct ssd_qp *qp = w->mine[i];

		if (qp->state != SSD_QP_ACTIVE)
			continue;
		if (qp->eventidx)
			__atomic_store_n(qp->eventidx, qp->sq_head, __ATOMIC_RELEASE);
		if ((qp->flags & LIO_QP_DB_POLL) || qp->stalled)
			*watch = true;
	}
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (i = 0; i < w->nmine; i++) {
		struct ssd_qp *qp = w->mine[i];
		uint32_t t;

		if (qp->state != SSD_QP_ACTIVE || qp->stalled)
			continue;
		t = ssd_load_db(qp->sq_tail_db);
		if (t < qp->sq_depth && t != qp->sq_head)
			return true;
	}
	return false;
}

static void ssd_worker_sleep(struct ssd_worker *w, uint64_t now)
{
	struct epoll_event ev[32];
	uint64_t timeout_ns = UINT64_MAX;
	struct timespec ts;
	int n, i;
	bool watch;

	if (ssd_worker_recheck(w, &watch))
		return;
	if (watch) {
		/* a doorbell page cannot wake us: sleep short after the last work, longer the
		 * longer nothing comes, so that a queue idle for a moment is seen within
		 * microseconds and an idle one costs a wake-up per SSD_POLL_SLEEP_MS */
		timeout_ns = w->idle_ns;
		w->idle_ns *= 2;
		if (w->idle_ns > SSD_POLL_SLEEP_MS * 1000000ull)
			w->idle_ns = SSD_POLL_SLEEP_MS * 1000000ull;
	}
	/* the model's next completion to the nanosecond (epoll_pwait2): an 80 us device must not
	 * become a 1 ms one because its worker went to sleep */
	if (w->nq && w->ring_inflight) {
		/* a polled controller queue cannot wake us, and an interrupt lost on the way
		 * must not hold its commands for good */
		if (w->idle_ns < timeout_ns)
			timeout_ns = w->idle_ns;
		w->idle_ns *= 2;
		if (w->idle_ns > SSD_POLL_SLEEP_MS * 1000000ull)
			w->idle_ns = SSD_POLL_SLEEP_MS * 1000000ull;
	}
	if (w->due_head) {
		uint64_t rem = w->due_head->due_ns > now ? w->due_head->due_ns - now : 0;

		if (rem < timeout_ns)
			timeout_ns = rem;
	}
	if (w->worked) {
		for (i = 0; i < (int)w->nmine; i++)
			CTR_ADD(w->mine[i], sleeps, 1);
		w->worked = false;
	}
	ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
	ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
	n = epoll_pwait2(w->epfd, ev, 32, timeout_ns == UINT64_MAX ? NULL : &ts, NULL);
	for (i = 0; i < n; i++) {
		eventfd_t v;

		if (ev[i].data.u64 == SSD_EV_WAKE)
			eventfd_read(w->wake_fd, &v);
		else if (ev[i].data.u64 == SSD_EV_RING)
			eventfd_read(w->ring_efd, &v);
		else if (ev[i].data.u64 == SSD_EV_NVME)
			eventfd_read(w->nq->irq_fd, &v);
		else
			eventfd_read(((struct ssd_qp *)ev[i].data.ptr)->db_fd, &v);
	}
}

/* The controller's commands in flight at stop, within SSD_NVME_DRAIN_MS (a controller that
 * stops answering must not hold the daemon's exit forever). */
static void ssd_worker_drain_nvme(struct ssd_worker *w)
{
	uint64_t end = ssd_mono_ns() + SSD_NVME_DRAIN_MS * 1000000ull;
	struct timespec ts = {0, 100000};

	if (!w->nq)
		return;
	nvme_pci_ring(w->nq);
	while (w->ring_inflight && ssd_mono_ns() < end) {
		unsigned work = 0;

		ssd_reap(w, ssd_clock_ns(w), &work);
		if (!work)
			nanosleep(&ts, NULL);
	}
	if (w->ring_inflight)
		fprintf(stderr, "softssd worker %u: nvme %s: %u commands unanswered after %u ms\n",
			w->idx, w->nq->c->name, w->ring_inflight, SSD_NVME_DRAIN_MS);
}

void *ssd_worker_main(void *arg)
{
	struct ssd_worker *w = arg;
	uint64_t idle_since = 0;
	bool dozing = false;

	w->idle_ns = SSD_IDLE_MIN_NS;
	while (!__atomic_load_n(&w->e->stop, __ATOMIC_ACQUIRE)) {
		/* one clock read per pass (two while the model holds completions) */
		uint64_t now = ssd_clock_ns(w);
		unsigned work = 0, i, n;

		ssd_worker_sync(w);
		n = w->nmine;
		for (i = 0; i < n; i++) {
			struct ssd_qp *qp = w->mine[(w->rr + i) % n];

			if (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) == SSD_QP_ACTIVE)
				work += ssd_qp_fetch(w, qp, now);
		}
		if (n)
			w->rr = (w->rr + 1) % n;
		if (w->nq)
			nvme_pci_ring(w->nq);
		else if (w->ring_inflight)
			io_uring_submit(&w->ring);
		ssd_reap(w, now, &work);
		if (w->due_head)
			work += ssd_post_due(w, ssd_clock_ns(w), false);
		for (i = 0; i < n; i++)
			ssd_irq_flush(w->mine[i]);
		ssd_worker_reap_dying(w);
		if (work) {
			idle_since = 0;
			dozing = false;
			w->idle_ns = SSD_IDLE_MIN_NS;
			continue;
		}
		if (!idle_since)
			idle_since = now;
		/* spin a while after the last work; once asleep, a pass that finds nothing
		 * sleeps again at once (the spin would cost SSD_SPIN_NS per sleep when idle) */
		if (!dozing && (now - idle_since < SSD_SPIN_NS ||
				(w->ring_inflight && now - idle_since < 2 * SSD_SPIN_NS)))
			continue;
		ssd_worker_sleep(w, now);
		dozing = true;
	}
	/* stopping: wait out what the kernel (or the controller) still holds, then post
	 * everything */
	ssd_worker_drain_nvme(w);
	while (w->ring_inflight && !w->nq) {
		unsigned work = 0;

		io_uring_submit_and_wait(&w->ring, 1);
		ssd_reap(w, ssd_clock_ns(w), &work);
	}
	ssd_post_due(w, 0, true);
	return NULL;
}
