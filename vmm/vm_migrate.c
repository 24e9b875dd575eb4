/* Live migration of a VM between two lvmm processes over a Unix stream socket (vm.h,
 * docs/snapshot.md "Live migration"). The source sends its config, its RAM (pre-copied while
 * the guest runs, with KVM's dirty log, or its memfd for a local migration), pauses, sends the
 * last pages and the state a snapshot holds; the destination builds the VM as a restore does.
 * Handshake: the destination answers READY once it holds everything, paused; the source sends
 * COMMIT and from then on never resumes unless the destination is gone without its DONE; the
 * destination answers DONE and only then resumes. Every frame from the peer is checked
 * (migrate_proto.h); a failure leaves the source running and the destination without a VM. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "devices.h"
#include "migrate_proto.h"
#include "snapshot_fmt.h"
#include "vm_internal.h"

#define MIG_IO_TIMEOUT_MS     30000  /* a peer silent this long mid-migration is given up */
#define MIG_ACCEPT_TIMEOUT_MS 300000 /* how long a destination waits for its source */
#define MIG_MAX_ROUNDS	      8	     /* pre-copy rounds after the first full pass */
#define MIG_DIRTY_STOP	      256    /* pages: a dirty set this small ends the pre-copy */
#define MIG_RECLAIM_WAIT_MS   10000  /* for a failed destination's session to let a volume go */

static uint64_t mig_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int vm_migrate_url(const char *url, char *path, size_t len, char *err, unsigned errlen)
{
	static const char scheme[] = "unix:";
	const char *p = url + strlen(scheme);

	if (strncmp(url, scheme, strlen(scheme)) || !*p) {
		snprintf(err, errlen,
			 "'%.200s' is not a unix:PATH URL (the only kind lvmm migrates over)", url);
		return -EINVAL;
	}
	if (strlen(p) >= len || strlen(p) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		snprintf(err, errlen, "the migration socket's path is too long");
		return -EINVAL;
	}
	snprintf(path, len, "%s", p);
	return 0;
}

/* ---- frames over the socket ---- */

static int mig_wait(int fd, short ev, int timeout_ms, char *err, unsigned errlen)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0) {
		snprintf(err, errlen, "the peer was silent for %d s", timeout_ms / 1000);
		return -ETIMEDOUT;
	}
	if (r < 0) {
		snprintf(err, errlen, "poll: %s", strerror(errno));
		return -EIO;
	}
	return 0;
}

/* iov's bytes whole, with fd (when >= 0) in SCM_RIGHTS beside the first byte. */
static int mig_sendv(int sock, struct iovec *iov, int n, int fd, char *err, unsigned errlen)
{
	union {
		struct cmsghdr h;
		char room[CMSG_SPACE(sizeof(int))];
	} c;

	while (n > 0) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t k;
		int r;

		if (fd >= 0) {
			memset(&c, 0, sizeof(c));
			m.msg_control = c.room;
			m.msg_controllen = sizeof(c.room);
			c.h.cmsg_level = SOL_SOCKET;
			c.h.cmsg_type = SCM_RIGHTS;
			c.h.cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(&c.h), &fd, sizeof(int));
		}
		k = sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			r = mig_wait(sock, POLLOUT, MIG_IO_TIMEOUT_MS, err, errlen);
			if (r)
				return r;
			continue;
		}
		if (k < 0) {
			snprintf(err, errlen, "the peer is gone (%s)", strerror(errno));
			return -EPIPE;
		}
		fd = -1;
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}

static int mig_send(int sock, uint32_t type, const void *a, size_t alen, const void *b, size_t blen,
		    int fd, char *err, unsigned errlen)
{
	struct mig_hdr h;
	struct iovec iov[3] = {{&h, sizeof(h)}, {(void *)a, alen}, {(void *)b, blen}};

	mig_make_hdr(&h, type, alen + blen);
	return mig_sendv(sock, iov, 3, fd, err, errlen);
}

static void mig_send_error(int sock, const char *msg)
{
	char e[64];
	size_t n = strnlen(msg, MIG_MAX_ERROR);

	mig_send(sock, MIG_ERROR, msg, n, NULL, 0, -1, e, sizeof(e));
}

/* len bytes into buf; an fd that comes with them into *fd (when fd is not NULL, else closed). */
static int mig_recv_all(int sock, void *buf, size_t len, int *fd, int timeout_ms, char *err,
			unsigned errlen)
{
	size_t done = 0;

	while (done < len) {
		union {
			struct cmsghdr h;
			char room[CMSG_SPACE(sizeof(int) * 4)];
		} c;
		struct iovec iov = {(uint8_t *)buf + done, len - done};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = c.room,
				   .msg_controllen = sizeof(c.room)};
		ssize_t k = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		int r;

		if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
			r = mig_wait(sock, POLLIN, timeout_ms, err, errlen);
			if (r)
				return r;
			continue;
		}
		if (k <= 0) {
			snprintf(err, errlen, "the peer is gone (%s)",
				 k ? strerror(errno) : "connection closed");
			return -EPIPE;
		}
		for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
			if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int f;

				memcpy(&f, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
				if (fd && *fd < 0)
					*fd = f;
				else
					close(f);
			}
		}
		done += (size_t)k;
	}
	return 0;
}

/* A frame's header, checked (type is the peer's; a header alone is read). */
static int mig_recv_hdr(int sock, struct mig_hdr *h, int *fd, int timeout_ms, char *err,
			unsigned errlen)
{
	int r = mig_recv_all(sock, h, sizeof(*h), fd, timeout_ms, err, errlen);

	return r ? r : mig_check_hdr(h, err, errlen);
}

/* ---- the source ---- */

struct mig_src {
	struct vm *vm;
	int sock;
	uint64_t *hash; /* per page, of the bytes last sent */
	uint64_t npages;
	struct vm_migrate_stats *st;
};

static uint64_t mig_page_hash(const uint8_t *p)
{
	const uint64_t *w = (const uint64_t *)p;
	uint64_t h = 0x9e3779b97f4a7c15ull;

	for (unsigned i = 0; i < MIG_PAGE / 8; i++)
		h = (h ^ w[i]) * 0x100000001b3ull + (h >> 29);
	return h | 1; /* 0: never sent */
}

/* Pages [first, first + n) of the RAM in MEMORY frames. */
static int mig_send_run(struct mig_src *s, uint64_t first, uint64_t n, char *err, unsigned errlen)
{
	while (n) {
		uint64_t k = n < MIG_MAX_PAGES / MIG_PAGE ? n : MIG_MAX_PAGES / MIG_PAGE;
		uint64_t off = first * MIG_PAGE;
		int r = mig_send(s->sock, MIG_MEMORY, &off, sizeof(off), s->vm->ram + off,
				 k * MIG_PAGE, -1, err, errlen);

		if (r)
			return r;
		s->st->bytes += k * MIG_PAGE;
		s->st->pages += k;
		first += k;
		n -= k;
	}
	return 0;
}

/* Sends the pages want() picks (with their hashes updated), in runs. */
static int mig_send_pages(struct mig_src *s, bool (*want)(struct mig_src *, uint64_t, void *),
			  void *ctx, uint64_t *sent, char *err, unsigned errlen)
{
	uint64_t run = 0, start = 0;
	int r;

	*sent = 0;
	for (uint64_t p = 0; p < s->npages; p++) {
		if (want(s, p, ctx)) {
			if (!run)
				start = p;
			run++;
			(*sent)++;
			continue;
		}
		if (run) {
			r = mig_send_run(s, start, run, err, errlen);
			if (r)
				return r;
			run = 0;
		}
	}
	return run ? mig_send_run(s, start, run, err, errlen) : 0;
}

/* First pass: every page not zero (the destination's RAM starts zeroed). */
static bool mig_want_first(struct mig_src *s, uint64_t p, void *ctx)
{
	const uint8_t *page = s->vm->ram + p * MIG_PAGE;

	(void)ctx;
	s->hash[p] = mig_page_hash(page);
	return !snap_all_zero(page, MIG_PAGE);
}

/* Pages in the dirty bitmap of the whole RAM (bit p: RAM page p). */
static bool mig_want_dirty(struct mig_src *s, uint64_t p, void *ctx)
{
	const uint64_t *bm = ctx;

	if (!(bm[p / 64] >> (p % 64) & 1))
		return false;
	s->hash[p] = mig_page_hash(s->vm->ram + p * MIG_PAGE);
	return true;
}

/* Final pass while paused: pages whose bytes differ from what was sent (written by a device
 * model, which KVM's log does not see). */
static bool mig_want_changed(struct mig_src *s, uint64_t p, void *ctx)
{
	uint64_t h = mig_page_hash(s->vm->ram + p * MIG_PAGE);

	(void)ctx;
	if (h == s->hash[p])
		return false;
	s->hash[p] = h;
	return true;
}

/* KVM's dirty log of every RAM slot into bm (bit per RAM page), and the number of dirty pages. */
static int mig_dirty_collect(struct mig_src *s, uint64_t *bm, uint64_t *count, char *err,
			     unsigned errlen)
{
	struct vm *vm = s->vm;

	memset(bm, 0, (s->npages + 63) / 64 * 8);
	*count = 0;
	for (unsigned i = 0; i < vm->gmem.nslots; i++) {
		const struct gmem_slot *sl = &vm->gmem.slots[i];
		uint64_t n = sl->size / MIG_PAGE, base = sl->fd_off / MIG_PAGE;
		uint64_t *tmp = calloc((n + 63) / 64 + 1, 8);
		int r;

		if (!tmp) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		r = vm_ram_dirty_get(vm, i, tmp);
		if (r) {
			snprintf(err, errlen, "KVM_GET_DIRTY_LOG (slot %u): %s", i, strerror(-r));
			free(tmp);
			return r;
		}
		for (uint64_t p = 0; p < n; p++)
			if (tmp[p / 64] >> (p % 64) & 1) {
				bm[(base + p) / 64] |= 1ull << ((base + p) % 64);
				(*count)++;
			}
		free(tmp);
	}
	return 0;
}

static int mig_precopy(struct mig_src *s, bool running, char *err, unsigned errlen)
{
	uint64_t *bm = calloc((s->npages + 63) / 64, 8), sent, dirty;
	int r;

	s->hash = calloc(s->npages, sizeof(*s->hash));
	if (!bm || !s->hash) {
		free(bm);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (running) {
		r = vm_ram_dirty_log(s->vm, true);
		if (r) {
			snprintf(err, errlen, "KVM dirty logging: %s", strerror(-r));
			goto out;
		}
		s->st->dirty_log = true;
	}
	r = mig_send_pages(s, mig_want_first, NULL, &sent, err, errlen);
	s->st->rounds = 1;
	while (!r && running && s->st->rounds <= MIG_MAX_ROUNDS) {
		r = mig_dirty_collect(s, bm, &dirty, err, errlen);
		if (!r)
			r = mig_send_pages(s, mig_want_dirty, bm, &sent, err, errlen);
		s->st->rounds++;
		s->st->last_dirty = dirty;
		if (dirty <= MIG_DIRTY_STOP)
			break;
	}
	if (r)
		goto out;
	if (running) {
		r = vm_pause(s->vm, err, errlen);
		if (r)
			goto out;
		s->st->paused_at = mig_now_us();
		r = mig_dirty_collect(s, bm, &dirty, err, errlen);
		if (!r)
			r = mig_send_pages(s, mig_want_dirty, bm, &sent, err, errlen);
		s->st->final_pages = sent;
	}
	if (!r) {
		r = mig_send_pages(s, mig_want_changed, NULL, &sent, err, errlen);
		s->st->final_pages += sent;
	}
out:
	free(bm);
	return r;
}

/* A destination that refused closes after its ERROR frame: a write then fails before the
 * source reads it; what it said replaces "the peer is gone" when it is there to read. */
static void mig_peer_reason(int sock, char *err, unsigned errlen)
{
	char msg[MIG_MAX_ERROR + 1] = "", e[64];
	struct mig_hdr h;

	if (mig_recv_hdr(sock, &h, NULL, 1000, e, sizeof(e)) || h.type != MIG_ERROR ||
	    mig_recv_all(sock, msg, h.len, NULL, 1000, e, sizeof(e)))
		return;
	msg[h.len] = 0;
	snprintf(err, errlen, "the destination refused: %s", msg);
}

/* One FDS frame per host fd a device hands over (devices_hand_fds): a device's count fits the
 * record's limit. */
_Static_assert(DEV_MAX_HAND_FDS <= MIG_MAX_DEV_FDS, "a device hands over more fds than FDS takes");
static int mig_send_fds(void *ctx, const char *id, const int *fds, unsigned n, char *err,
			unsigned errlen)
{
	struct mig_src *s = ctx;

	for (unsigned i = 0; i < n; i++) {
		struct mig_fd f = {.index = i, .count = n};
		int r;

		snprintf(f.id, sizeof(f.id), "%s", id);
		r = mig_send(s->sock, MIG_FDS, &f, sizeof(f), NULL, 0, fds[i], err, errlen);
		if (r)
			return r;
		s->st->fds++;
	}
	return 0;
}

int vm_migrate_send(struct vm *vm, const char *path, bool local, const void *config,
		    size_t config_len, struct vm_migrate_stats *st, char *err, unsigned errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct mig_src s = {.vm = vm, .sock = -1, .st = st};
	struct mig_hello hello = {0};
	struct mig_hdr h;
	uint8_t *state = NULL;
	size_t state_len = 0;
	struct vm_snapshot_stats ss;
	bool running, committed = false, released = false;
	int r;

	memset(st, 0, sizeof(*st));
	st->local = local;
	st->start = mig_now_us();
	pthread_mutex_lock(&vm->lock);
	running = vm->state == VM_RUNNING && !vm->stop_req;
	r = running || (vm->state == VM_PAUSED && !vm->stop_req) ? 0 : -EINVAL;
	pthread_mutex_unlock(&vm->lock);
	if (r) {
		snprintf(err, errlen, "the VM is %s; only a running or paused VM migrates",
			 vm_state_name(vm->state));
		return r;
	}
	/* what a snapshot refuses, refused before anything is sent */
	r = vm_save_check(vm, err, errlen);
	if (r)
		return r;
	for (unsigned k = 0; local && k < vm->cfg.nvnvme && k < CONFIG_MAX_VNVME; k++)
		if (vm_vnvme_maps_ram(&vm->cfg.vnvme[k])) {
			snprintf(err, errlen,
				 "vNVMe %s hands guest RAM to its SSD backend: migrate it without "
				 "local",
				 vm->cfg.vnvme[k].id);
			return -EOPNOTSUPP;
		}
	s.npages = vm->gmem.size / MIG_PAGE;
	s.sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s.sock < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -EIO;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(s.sock, (struct sockaddr *)&sa, sizeof(sa))) {
		snprintf(err, errlen, "%s: connect: %s (is a destination receiving there?)", path,
			 strerror(errno));
		close(s.sock);
		return -ECONNREFUSED;
	}
	hello.memory = vm->gmem.size;
	hello.ncpus = vm->ncpus;
	hello.local = local;
	hello.running = running;
	r = mig_send(s.sock, MIG_HELLO, &hello, sizeof(hello), NULL, 0, -1, err, errlen);
	if (!r)
		r = mig_send(s.sock, MIG_CONFIG, config, config_len, NULL, 0, -1, err, errlen);
	if (!r && !local) {
		r = mig_precopy(&s, running, err, errlen);
	} else if (!r) {
		struct mig_memfd m = {.size = vm->gmem.size};

		if (running) {
			r = vm_pause(vm, err, errlen);
			st->paused_at = mig_now_us();
		}
		/* a RAM mapped from a snapshot file is not in the memfd yet */
		if (!r)
			r = vm_ram_share(vm, err, errlen);
		if (!r)
			r = mig_send(s.sock, MIG_MEMFD, &m, sizeof(m), NULL, 0, vm->gmem.memfd, err,
				     errlen);
	}
	if (!r && !st->paused_at)
		st->paused_at = mig_now_us(); /* a paused VM: no downtime of ours */
	if (!r)
		r = vm_save_state(vm, config, config_len, &state, &state_len, &ss, err, errlen);
	/* What one VMM holds at a time (an SSD-mode vNVMe's volume, a disk image's lock) is let go
	 * now, saved and quiesced, for the destination to take when STATE comes; taken back below
	 * if the migration fails. */
	if (!r) {
		r = devices_release(vm, err, errlen);
		released = !r;
	}
	/* host ends that go across as they are (a tap's queues, the vsock's listening socket) */
	if (!r)
		r = devices_hand_fds(vm, mig_send_fds, &s, err, errlen);
	if (!r) {
		st->state_bytes = state_len;
		r = mig_send(s.sock, MIG_STATE, state, state_len, NULL, 0, -1, err, errlen);
	}
	free(state);
	if (!r) {
		r = mig_recv_hdr(s.sock, &h, NULL, MIG_IO_TIMEOUT_MS * 4, err, errlen);
		if (!r && h.type == MIG_ERROR) {
			char msg[MIG_MAX_ERROR + 1] = "";

			mig_recv_all(s.sock, msg, h.len, NULL, MIG_IO_TIMEOUT_MS, err, errlen);
			msg[h.len] = 0;
			snprintf(err, errlen, "the destination refused: %s", msg);
			r = -ECANCELED;
		} else if (!r && (h.type != MIG_READY || h.len)) {
			snprintf(err, errlen, "the destination answered %s, not READY",
				 mig_type_name(h.type));
			r = -EPROTO;
		}
	}
	if (!r) {
		/* From here the source never resumes unless the destination is gone without a
		 * DONE: the destination resumes only after it sent DONE. */
		r = mig_send(s.sock, MIG_COMMIT, NULL, 0, NULL, 0, -1, err, errlen);
		committed = !r;
	}
	if (committed) {
		r = mig_recv_hdr(s.sock, &h, NULL, -1, err, errlen);
		if (!r && h.type != MIG_DONE) {
			snprintf(err, errlen, "the destination answered %s, not DONE",
				 mig_type_name(h.type));
			r = -EPROTO;
		}
		/* a wrong answer still comes from a destination that took COMMIT: it may run */
		if (r == -EPROTO)
			r = 0;
	}
	if (!r) {
		st->resumed_at = mig_now_us();
		close(s.sock);
		free(s.hash);
		return 0;
	}
	if (!committed && r == -EPIPE)
		mig_peer_reason(s.sock, err, errlen);
	if (!committed)
		mig_send_error(s.sock, err);
	close(s.sock);
	free(s.hash);
	if (st->dirty_log)
		vm_ram_dirty_log(vm, false);
	if (released) {
		char e2[256];

		uint64_t t0 = mig_now_us();
		int r2;

		/* the destination refused or is gone: the volume is free again once its session
		 * has closed, which may take it a moment */
		while ((r2 = devices_reclaim(vm, e2, sizeof(e2))) &&
		       mig_now_us() - t0 < MIG_RECLAIM_WAIT_MS * 1000ULL)
			usleep(20000);
		if (r2) {
			fprintf(stderr,
				"lvmm: migration failed and a device was not taken back: %s; "
				"the VM stays paused\n",
				e2);
			running = false;
		}
	}
	if (running && vm_get_state(vm) == VM_PAUSED) {
		char e2[128];

		vm_resume(vm, e2, sizeof(e2));
	}
	return r;
}

/* ---- the destination ---- */

static int mig_accept(const char *path, char *err, unsigned errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), c = -1, r;

	if (l < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -EIO;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		r = errno == EADDRINUSE ? -EEXIST : -EINVAL;
		close(l);
		return r;
	}
	r = mig_wait(l, POLLIN, MIG_ACCEPT_TIMEOUT_MS, err, errlen);
	if (!r) {
		c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			snprintf(err, errlen, "%s: accept: %s", path, strerror(errno));
			r = -EIO;
		}
	} else if (r == -ETIMEDOUT) {
		snprintf(err, errlen, "no source connected to %s within %d s", path,
			 MIG_ACCEPT_TIMEOUT_MS / 1000);
	}
	close(l);
	unlink(path);
	return r ? r : c;
}

/* RAM received before its VM exists: a sealed memfd of size bytes the VM adopts later. */
static uint8_t *mig_stage_ram(uint64_t size, int *fd, char *err, unsigned errlen)
{
	uint8_t *p;

	*fd = memfd_create("lvmm-ram", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (*fd < 0) {
		snprintf(err, errlen, "memory: memfd_create: %s", strerror(errno));
		return NULL;
	}
	if (ftruncate(*fd, (off_t)size) || fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)) {
		snprintf(err, errlen, "memory: %llu MiB: %s", (unsigned long long)(size >> 20),
			 strerror(errno));
		close(*fd);
		*fd = -1;
		return NULL;
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, *fd, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "memory: mmap of %llu MiB: %s",
			 (unsigned long long)(size >> 20), strerror(errno));
		close(*fd);
		*fd = -1;
		return NULL;
	}
	return p;
}

int vm_migrate_receive(const char *path, vm_migrate_config_fn parse, void *ctx, struct vm **out,
		       struct vm_migrate_stats *st, char *err, unsigned errlen)
{
	struct mig_rx rx;
	struct vm_config *cfg = NULL;
	struct vm *vm = NULL;
	uint8_t *buf = NULL, *config = NULL, *stage = NULL;
	size_t config_len = 0;
	int sock, fd = -1, stage_fd = -1, r = 0;
	bool late = false;     /* the VM is built at STATE (below) */
	bool populate = false; /* its RAM all faulted in then (an SSD backend maps it) */

	*out = NULL;
	memset(st, 0, sizeof(*st));
	sock = mig_accept(path, err, errlen);
	if (sock < 0)
		return sock;
	st->start = mig_now_us();
	mig_rx_init(&rx);
	while (!r && rx.phase != MIG_RX_END) {
		struct mig_hdr h;
		uint64_t off = 0, n = 0;
		const uint8_t *pages = NULL;

		r = mig_recv_hdr(sock, &h, &fd, MIG_IO_TIMEOUT_MS, err, errlen);
		if (!r && fd >= 0 && h.type != MIG_MEMFD && h.type != MIG_FDS) {
			snprintf(err, errlen, "frame %s came with a file descriptor",
				 mig_type_name(h.type));
			r = -EPROTO;
		}
		if (!r)
			r = mig_rx_expect(&rx, h.type, err, errlen);
		if (r)
			break;
		free(buf);
		buf = malloc(h.len + 1);
		if (!buf) {
			snprintf(err, errlen, "frame %s: out of memory for %llu bytes",
				 mig_type_name(h.type), (unsigned long long)h.len);
			r = -ENOMEM;
			break;
		}
		r = mig_recv_all(sock, buf, h.len, NULL, MIG_IO_TIMEOUT_MS, err, errlen);
		if (!r)
			r = mig_rx_frame(&rx, h.type, buf, h.len, &off, &pages, &n, err, errlen);
		if (r)
			break;
		buf[h.len] = 0;
		switch (h.type) {
		case MIG_CONFIG:
			cfg = calloc(1, sizeof(*cfg));
			if (!cfg) {
				snprintf(err, errlen, "out of memory");
				r = -ENOMEM;
				break;
			}
			r = parse(ctx, (const char *)buf, h.len, cfg, err, errlen);
			if (!r && (cfg->memory != rx.hello.memory || cfg->cpus != rx.hello.ncpus)) {
				snprintf(err, errlen,
					 "the config says %u vCPUs and %llu bytes of RAM, the "
					 "source %u and %llu",
					 cfg->cpus, (unsigned long long)cfg->memory, rx.hello.ncpus,
					 (unsigned long long)rx.hello.memory);
				r = -EINVAL;
			}
			for (unsigned k = 0; !r && k < cfg->nvnvme; k++)
				if (vm_vnvme_maps_ram(&cfg->vnvme[k]) && rx.hello.local) {
					snprintf(err, errlen,
						 "vNVMe %s hands RAM to an SSD backend: no local "
						 "migration",
						 cfg->vnvme[k].id);
					r = -EINVAL;
				} else if (vm_vnvme_maps_ram(&cfg->vnvme[k])) {
					populate = true;
				}
			/* A device that one VMM holds at a time (an SSD volume, a locked disk
			 * image) is taken as the device is made, and the source holds it until it
			 * has paused, saved and released it: such a VM is built when STATE comes,
			 * its RAM received meanwhile into a memfd (or the source's memfd, local)
			 * it adopts then. */
			late = !r && devices_hand_over(cfg);
			if (!r && late && !rx.hello.local) {
				stage = mig_stage_ram(rx.hello.memory, &stage_fd, err, errlen);
				r = stage ? 0 : -ENOMEM;
			} else if (!r && !late) {
				r = vm_restore_create(cfg, &vm, err, errlen);
			}
			if (!r && !late && madvise(vm->ram, vm->gmem.size, MADV_REMOVE))
				memset(vm->ram, 0, vm->gmem.size);
			if (!r) {
				config = buf;
				config_len = h.len;
				buf = NULL;
			}
			break;
		case MIG_MEMORY:
			memcpy((late ? stage : vm->ram) + off, pages, n);
			break;
		case MIG_MEMFD:
			if (fd < 0) {
				snprintf(err, errlen, "MEMFD came without a file descriptor");
				r = -EPROTO;
				break;
			}
			if (late) {
				stage_fd = fd; /* adopted when the VM is built, at STATE */
				fd = -1;
				break;
			}
			r = vm_adopt_ram(vm, fd, err, errlen);
			if (!r)
				fd = -1;
			break;
		case MIG_FDS: {
			struct mig_fd f;

			memcpy(&f, buf, sizeof(f));
			if (fd < 0 || !late) {
				snprintf(err, errlen, "FDS of device %.64s %s", f.id,
					 fd < 0 ? "came without a file descriptor"
						: "for a VM that takes none");
				r = -EPROTO;
				break;
			}
			r = devices_take_fd(cfg, f.id, f.index, f.count, fd, err, errlen);
			if (!r) {
				fd = -1; /* the config's now, closed with it */
				st->fds++;
			}
			break;
		}
		case MIG_STATE:
			st->paused_at = mig_now_us();
			if (late)
				r = config_fds_check(cfg, err, errlen);
			if (!r && late) {
				r = vm_restore_create(cfg, &vm, err, errlen);
				if (!r)
					r = vm_adopt_ram(vm, stage_fd, err, errlen);
				if (!r)
					stage_fd = -1;
				if (!r && populate)
					r = vm_populate_ram(vm, err, errlen);
			}
			if (!r)
				r = vm_restore_state(vm, buf, h.len, config, config_len, err,
						     errlen);
			if (!r)
				r = mig_send(sock, MIG_READY, NULL, 0, NULL, 0, -1, err, errlen);
			break;
		case MIG_COMMIT:
			/* DONE first: a source that reads it exits, one that does not resumes
			 * only when this process is gone */
			mig_send(sock, MIG_DONE, NULL, 0, NULL, 0, -1, err, errlen);
			if (rx.hello.running)
				r = vm_resume(vm, err, errlen);
			st->resumed_at = mig_now_us();
			break;
		}
		if (fd >= 0) {
			close(fd);
			fd = -1;
		}
	}
	st->bytes = rx.memory_bytes;
	st->pages = rx.memory_bytes / MIG_PAGE;
	st->local = rx.hello.local;
	if (r && rx.phase != MIG_RX_END && r != -EPIPE && r != -ECANCELED)
		mig_send_error(sock, err);
	close(sock);
	free(buf);
	free(config);
	if (cfg)
		config_fds_close(cfg); /* the VM holds duplicates of what it took */
	free(cfg);
	if (fd >= 0)
		close(fd);
	if (stage)
		munmap(stage, rx.hello.memory);
	if (stage_fd >= 0)
		close(stage_fd);
	if (r && rx.phase != MIG_RX_END) {
		vm_destroy(vm);
		return r;
	}
	/* past COMMIT the VM is this process's whatever happened: a failed resume leaves it
	 * paused, not gone */
	*out = vm;
	return 0;
}
