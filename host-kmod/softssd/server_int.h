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
};

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

#endif
