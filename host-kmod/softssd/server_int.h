/* softssd's control plane inside: the session, server and request structs shared by the socket
 * loop (server.c) and the operation handlers (session.c). */
#ifndef SOFTSSD_SERVER_INT_H
#define SOFTSSD_SERVER_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>

#include "lightiov/uapi.h"
#include "softssd/qpair.h"
#include "softssd/server.h"

#define SSD_UPGRADE_TOKEN_LEN 32

#define SSD_MAX_PAYLOAD	    4096
#define SSD_MAX_RX_FDS	    16
#define SSD_EV_LISTEN	    ((void *)1)
#define SSD_EV_SIGNAL	    ((void *)2)
#define SSD_MAX_REFUSED	    64	 /* refusals waiting to be told; past that, a plain close */
#define SSD_LISTEN_RETRY_MS 1000 /* a listener paused for want of fds is tried again after */

struct ssd_attached {
	uint32_t vol_id;
	uint32_t flags;
	uint64_t lba_start, lba_count;
};

struct ssd_session {
	int fd;
	pid_t pid;
	uid_t uid;
	bool admin; /* uid 0 or the daemon's own: every volume (volumes.h, struct ssd_vol_who) */
	uint64_t owner; /* the volume manager's tag for this session, never 0 */
	char label[LIO_NAME_MAX];
	struct ssd_window win;
	int win_fd[LIO_MAX_REGIONS];
	uint64_t win_off[LIO_MAX_REGIONS]; /* each region's fd_offset (for a hand-over) */
	uint64_t win_bytes;
	int qmem_fd;
	uint8_t *qmem;
	uint64_t qmem_bytes;
	uint8_t *qmem_used; /* one byte per queue-memory page */
	struct ssd_attached vols[LIO_MAX_ATTACHED];
	unsigned nvols;
	struct ssd_qp *qps;
	unsigned nqps;
	struct ssd_counters retired; /* of its destroyed queue pairs */
	uint32_t flags;		     /* LIO_SESSION_* */
	int refused;		     /* -errno: answers its first request with it, then ends */
	uint64_t nreq;		     /* requests served: a hand-over is asked only first */
	char why[LIO_ERR_MAX];
	struct ssd_session *next;
};

struct ssd_server {
	const struct ssd_server_cfg *cfg;
	struct ssd_volumes *vols;
	struct ssd_engine *eng;
	int lfd, sigfd, epfd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct ssd_session *sessions;
	unsigned nsessions;
	struct ssd_session *refused; /* connections told why they are refused, then closed */
	unsigned nrefused;
	bool listen_paused;	/* out of fds: the listener is out of the epoll set */
	uint64_t listen_pauses; /* times it was */
	uint64_t listen_paused_ns;
	struct ssd_qp **qp_by_id; /* LIO_MAX_QPAIRS + 1 slots; 0 is never used */
	unsigned nqpairs;
	uint32_t next_qp_id;
	struct ssd_counters retired; /* of ended sessions */
	uint64_t start_ns, next_owner;
	uint32_t lba_shift; /* the volume table's */
	/* the upgrade's secret: in a 0600 file beside the socket (ssd_token_path), asked of every
	 * hand-over request; the same across upgrades (the successor read it to ask) */
	uint8_t ho_token[SSD_UPGRADE_TOKEN_LEN];
	uint64_t ho_last_ns; /* the last refusal logged */
};

/* PATH of the upgrade token of the daemon whose socket is sock: sock + ".upgrade". 0 or
 * -ENAMETOOLONG. */
int ssd_token_path(const char *sock, char *path, size_t len);

/* One request being served. */
struct ssd_call {
	struct ssd_server *s;
	struct ssd_session *ss;
	const void *in;
	uint32_t inlen;
	int *fds;
	unsigned nfds;
	_Alignas(8) uint8_t out[SSD_MAX_PAYLOAD]; /* reply structs are built in place */
	uint32_t outlen;
	int outfd; /* -1: none */
	char err[LIO_ERR_MAX];
};

static inline uint64_t ssd_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define ssd_err(c, ...) snprintf((c)->err, sizeof((c)->err), __VA_ARGS__)

/* Payload bytes each operation's request carries (0: none). */
extern const uint32_t ssd_in_size[LIO_OP_MAX];
/* Runs one request whose header and fds were checked: 0 or -errno with c->err set. */
int ssd_dispatch(struct ssd_call *c, uint32_t op);
/* Totals of a session: its live queue pairs and the retired ones. */
void ssd_session_counters(const struct ssd_session *ss, struct ssd_counters *t);
/* Stops and frees the queue pair at *pp (unlinked from its session). */
void ssd_qp_destroy(struct ssd_server *s, struct ssd_session *ss, struct ssd_qp **pp);
/* Unmaps and closes the session's DMA window. */
void ssd_window_drop(struct ssd_session *ss);

/* ---- start-up pieces shared by `serve` (server.c) and a take-over (upgrade_take.c) ---- */
/* Signals blocked (signalfd takes them), SIGPIPE ignored, the fd limit raised. */
void ssd_process_setup(void);
/* The queue-pair table and the workers, once s->vols is open. */
int ssd_start_engine(struct ssd_server *s, char *err, unsigned errlen);
/* The signalfd and the epoll set with the listener (s->lfd) in it. */
int ssd_start_events(struct ssd_server *s, char *err, unsigned errlen);
/* Capabilities dropped and the seccomp filter installed: the last step before serving. */
int ssd_start_confine(struct ssd_server *s, char *err, unsigned errlen);
/* Serves until a stop signal (status 0) or at once with status, then tears everything down. */
int ssd_serve_loop(struct ssd_server *s, int status);
/* systemd's notification socket ($NOTIFY_SOCKET; nothing without it): opened, one message sent,
 * and READY=1 with this process as the main one. */
void ssd_notify_open(void);
void ssd_notify(const char *msg);
void ssd_notify_ready(void);
void ssd_session_end(struct ssd_server *s, struct ssd_session *ss);

/* ---- hand-over (upgrade_give.c, upgrade_take.c, session.c) ---- */
struct ssd_ho_qp;
/* Fills rec's id, creation request, queue-memory offsets and counters (not its state). */
void ssd_qp_handover(const struct ssd_qp *qp, struct ssd_ho_qp *rec);
/* Rebuilds a queue pair of c->ss from a hand-over record (its eventfds in c->fds), quiesced. */
int ssd_qp_adopt(struct ssd_call *c, const struct ssd_ho_qp *rec);
/* Takes the predecessor's queue memory fd (bytes long) for c->ss. */
int ssd_qmem_adopt(struct ssd_call *c, int fd, uint64_t bytes);
/* The old daemon's side of `lvmm ssd upgrade`, on a hand-over message from session req (buf,
 * len bytes, nfds fds already closed): on success the process exits; on refusal or failure it
 * returns with every queue pair serving as before, and the caller ends req. */
void ssd_upgrade_give(struct ssd_server *s, struct ssd_session *req, const void *buf, size_t len,
		      unsigned nfds, int trunc);

#endif
