/* softssd's data-path lifecycle: the engine (its workers, each with an io_uring on the backing
 * and an epoll set, started and stopped), a queue pair handed to the least loaded worker and
 * taken back, its counters and its view of the session's DMA window. The workers' code is in
 * qpair_clock.c, qpair_fetch.c, qpair_exec.c and qpair_worker.c. */
#include "softssd/qpair.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "softssd/qpair_int.h"

static pthread_once_t ssd_clk_once = PTHREAD_ONCE_INIT;

void ssd_counters_read(struct ssd_counters *lio_to, const struct ssd_counters *lio_from)
{
	LIO_COUNTERS_KEPT(LIO_COUNTER_COPY_ONCE)
}

void ssd_counters_add(struct ssd_counters *lio_to, const struct ssd_counters *lio_from)
{
	LIO_COUNTERS_KEPT(LIO_COUNTER_ADD_ONCE)
}

void *ssd_window_ptr(const struct ssd_window *w, uint64_t gpa, uint64_t len)
{
	unsigned i;

	if (!len || gpa + len < gpa)
		return NULL;
	for (i = 0; i < w->n; i++) {
		const struct lio_check_region *r = &w->cr[i];

		if (gpa >= r->gpa && gpa - r->gpa <= r->size && len <= r->size - (gpa - r->gpa))
			return w->host[i] + (gpa - r->gpa);
	}
	return NULL;
}

/* ---- engine ---- */

static int ssd_worker_ring(struct ssd_worker *w, char *err, unsigned errlen)
{
	struct io_uring_restriction res[] = {
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_READV},
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_WRITEV},
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_FSYNC},
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_FALLOCATE},
	    {.opcode = IORING_RESTRICTION_SQE_OP, .sqe_op = IORING_OP_NOP},
	};
	struct epoll_event ev = {.events = EPOLLIN};
	int r;

	r = io_uring_queue_init(SSD_RING_ENTRIES, &w->ring, IORING_SETUP_R_DISABLED);
	if (r == -ENOSYS || r == -EPERM || r == -EINVAL) {
		/* a sandbox without io_uring (gVisor's default): slower, but serving */
		fprintf(stderr,
			"softssd worker %u: io_uring set-up: %s: commands run synchronously\n",
			w->idx, strerror(-r));
		w->sync_io = true;
	} else if (r) {
		snprintf(err, errlen, "softssd worker %u: io_uring set-up: %s", w->idx,
			 strerror(-r));
		return r;
	}
	w->ring_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->ring_efd < 0 || w->wake_fd < 0 || w->epfd < 0) {
		snprintf(err, errlen, "softssd worker %u: eventfd/epoll: %s", w->idx,
			 strerror(errno));
		return -errno;
	}
	ev.data.u64 = SSD_EV_WAKE;
	epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &ev);
	if (w->nq && w->nq->irq_fd >= 0) {
		ev.data.u64 = SSD_EV_NVME;
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->nq->irq_fd, &ev);
	}
	if (w->sync_io)
		return 0;
	r = io_uring_register_eventfd(&w->ring, w->ring_efd);
	/* only the operations above, for the life of the ring: no registration after this */
	/* the raw register calls: Debian's liburing 2.3 does not export the two wrappers */
	if (!r)
		r = io_uring_register((unsigned)w->ring.ring_fd, IORING_REGISTER_RESTRICTIONS, res,
				      sizeof(res) / sizeof(res[0]));
	if (!r)
		r = io_uring_register((unsigned)w->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL,
				      0);
	if (r) {
		snprintf(err, errlen, "softssd worker %u: io_uring restrictions: %s", w->idx,
			 strerror(-r));
		return r;
	}
	ev.data.u64 = SSD_EV_RING;
	epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->ring_efd, &ev);
	return 0;
}

int ssd_engine_start(struct ssd_engine **out, int backing_fd, int direct_fd, struct nvme_pci *nvme,
		     uint32_t lba_shift, unsigned nr, struct ssd_model *model, char *err,
		     unsigned errlen)
{
	struct ssd_engine *e;
	unsigned i;
	int r, slack;

	if (nvme && nvme->nioq <= nr) {
		snprintf(err, errlen, "nvme %s: %u I/O queues for %u workers", nvme->name,
			 nvme->nioq - 1, nr);
		return -EINVAL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->nvme = nvme;
	e->fd = backing_fd;
	e->dfd = direct_fd;
	e->lba_shift = lba_shift;
	e->model = model;
	e->w = calloc(nr, sizeof(*e->w));
	if (!e->w) {
		free(e);
		return -ENOMEM;
	}
	pthread_once(&ssd_clk_once, ssd_clk_calibrate);
	/* threads inherit their creator's timer slack: the workers' short idle sleeps need a small
	 * one, set here because a worker may not call prctl once the daemon's filter is in place */
	slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	if (slack > 0)
		prctl(PR_SET_TIMERSLACK, SSD_TIMER_SLACK_NS, 0, 0, 0);
	for (i = 0; i < nr; i++) {
		struct ssd_worker *w = &e->w[i];

		w->e = e;
		w->idx = i;
		w->ring_efd = w->wake_fd = w->epfd = -1;
		w->nq = nvme ? &nvme->ioq[i + 1] : NULL;
		pthread_mutex_init(&w->lock, NULL);
		pthread_cond_init(&w->cond, NULL);
		r = ssd_worker_ring(w, err, errlen);
		if (!r) {
			r = -pthread_create(&w->thr, NULL, ssd_worker_main, w);
			if (r)
				snprintf(err, errlen, "softssd worker %u: thread: %s", i,
					 strerror(-r));
		}
		if (r) {
			if (slack > 0)
				prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
			e->nr = i;
			ssd_engine_stop(e);
			return r;
		}
	}
	if (slack > 0)
		prctl(PR_SET_TIMERSLACK, (unsigned long)slack, 0, 0, 0);
	e->nr = nr;
	*out = e;
	return 0;
}

static void ssd_worker_wake(struct ssd_worker *w)
{
	eventfd_write(w->wake_fd, 1);
}

void ssd_engine_stop(struct ssd_engine *e)
{
	unsigned i;

	if (!e)
		return;
	__atomic_store_n(&e->stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < e->nr; i++) {
		ssd_worker_wake(&e->w[i]);
		pthread_join(e->w[i].thr, NULL);
	}
	for (i = 0; i < e->nr; i++) {
		struct ssd_worker *w = &e->w[i];

		if (!w->sync_io)
			io_uring_queue_exit(&w->ring);
		close(w->ring_efd);
		close(w->wake_fd);
		close(w->epfd);
		free(w->qps);
		free(w->mine);
	}
	free(e->w);
	free(e);
}

unsigned ssd_engine_workers(const struct ssd_engine *e)
{
	return e->nr;
}

int ssd_qp_start(struct ssd_engine *e, struct ssd_qp *qp)
{
	struct ssd_worker *w = &e->w[0];
	unsigned i,
	    n = qp->cq_depth - 1 < SSD_QP_MAX_INFLIGHT ? qp->cq_depth - 1 : SSD_QP_MAX_INFLIGHT;

	for (i = 1; i < e->nr; i++)
		if (e->w[i].nqps < w->nqps)
			w = &e->w[i];
	qp->reqs = calloc(n, sizeof(*qp->reqs));
	if (!qp->reqs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		qp->reqs[i].qp = qp;
		qp->reqs[i].next = i + 1 < n ? &qp->reqs[i + 1] : NULL;
	}
	qp->free_reqs = &qp->reqs[0];
	if (!qp->restored)
		qp->phase = 1;
	qp->start_quiesced = qp->restored;
	qp->chk.read_prp = ssd_read_prp;
	qp->chk.opaque = (void *)qp->win;
	qp->w = w;
	qp->state = SSD_QP_NEW;
	pthread_mutex_lock(&w->lock);
	if (w->nqps == w->cap) {
		unsigned cap = w->cap ? w->cap * 2 : 16;
		struct ssd_qp **q = realloc(w->qps, cap * sizeof(*q));

		if (!q) {
			pthread_mutex_unlock(&w->lock);
			free(qp->reqs);
			qp->reqs = NULL;
			return -ENOMEM;
		}
		w->qps = q;
		w->cap = cap;
	}
	w->qps[w->nqps++] = qp;
	__atomic_store_n(&w->changed, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->lock);
	ssd_worker_wake(w);
	return 0;
}

void ssd_qp_stop(struct ssd_qp *qp)
{
	struct ssd_worker *w = qp->w;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	if (qp->state == SSD_QP_NEW) { /* never seen by the worker: just take it out */
		unsigned j;

		for (j = 0; j < w->nqps; j++) {
			if (w->qps[j] == qp) {
				w->qps[j] = w->qps[--w->nqps];
				break;
			}
		}
		w->changed = 1;
		qp->state = SSD_QP_DEAD;
	}
	if (qp->state != SSD_QP_DEAD)
		__atomic_store_n(&qp->state, SSD_QP_DYING, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->lock);
	ssd_worker_wake(w);
	pthread_mutex_lock(&w->lock);
	while (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) != SSD_QP_DEAD)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	qp->w = NULL;
}

void ssd_qp_free(struct ssd_qp *qp)
{
	if (!qp)
		return;
	free(qp->reqs);
	if (qp->db_fd >= 0)
		close(qp->db_fd);
	if (qp->irq_fd >= 0)
		close(qp->irq_fd);
	free(qp);
}

/* ---- quiesce and resume (a snapshot of the VM, a hand-over) ---- */

static void ssd_qp_report(struct ssd_qp *qp, struct lio_qp_state *st)
{
	st->sq_head = qp->sq_head;
	st->cq_tail = qp->cq_tail;
	st->cq_head = qp->cq_head;
	st->phase = qp->phase;
	st->sq_tail_db = ssd_load_db(qp->sq_tail_db);
	st->cq_head_db = ssd_load_db(qp->cq_head_db);
	st->sq_depth = qp->sq_depth;
	st->cq_depth = qp->cq_depth;
	st->flags = qp->bad_db ? LIO_QPS_BAD_DB : 0;
	st->rsvd = 0;
}

int ssd_qp_quiesce(struct ssd_qp *qp, uint32_t timeout_ms, struct lio_qp_state *st,
		   uint32_t *inflight)
{
	struct ssd_worker *w = qp->w;
	struct timespec dl;
	int r = 0, s;

	*inflight = 0;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += timeout_ms / 1000;
	dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->lock);
	s = qp->state;
	if (s == SSD_QP_NEW) {
		/* never served: nothing fetched, nothing to wait for */
		qp->start_quiesced = true;
		goto report;
	}
	if (s == SSD_QP_ACTIVE)
		__atomic_store_n(&qp->state, SSD_QP_QUIESCING, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->lock);
	ssd_worker_wake(w);
	pthread_mutex_lock(&w->lock);
	while (r != ETIMEDOUT && __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) == SSD_QP_QUIESCING)
		r = pthread_cond_timedwait(&w->cond, &w->lock, &dl);
	if (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) != SSD_QP_QUIESCED) {
		/* in flight past the deadline: serve on as before, the client decides */
		*inflight = __atomic_load_n(&qp->inflight, __ATOMIC_RELAXED);
		__atomic_store_n(&qp->state, SSD_QP_ACTIVE, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&w->lock);
		ssd_worker_wake(w);
		return -ETIMEDOUT;
	}
report:
	ssd_qp_report(qp, st);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

bool ssd_qp_is_quiesced(struct ssd_qp *qp)
{
	struct ssd_worker *w = qp->w;
	bool q;

	pthread_mutex_lock(&w->lock);
	q = qp->state == SSD_QP_QUIESCED || (qp->state == SSD_QP_NEW && qp->start_quiesced);
	pthread_mutex_unlock(&w->lock);
	return q;
}

int ssd_qp_resume(struct ssd_qp *qp)
{
	struct ssd_worker *w = qp->w;
	int r = 0;

	pthread_mutex_lock(&w->lock);
	if (qp->state == SSD_QP_NEW && qp->start_quiesced)
		qp->start_quiesced = false;
	else if (qp->state == SSD_QP_QUIESCED)
		__atomic_store_n(&qp->state, SSD_QP_ACTIVE, __ATOMIC_RELEASE);
	else
		r = -EINVAL;
	pthread_mutex_unlock(&w->lock);
	if (!r)
		ssd_worker_wake(w);
	return r;
}
