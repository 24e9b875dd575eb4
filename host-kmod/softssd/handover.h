/* softssd's hand-over to its successor (`lvmm ssd upgrade`): the records the old daemon sends
 * over the new one's connection, their fds (SCM_RIGHTS) and the checks the new one makes.
 *
 * new: REQUEST; old: SERVER; new: ACK (volumes and workers ready); old quiesces every queue
 * pair, then SESSION (each followed by its QP records) ... END; new rebuilds them, ACK; the old
 * one exits and the new one resumes once the connection ends. ABORT (old) or an ACK with a
 * negative status (new) at any step: the old daemon resumes and serves on. */
#ifndef SOFTSSD_HANDOVER_H
#define SOFTSSD_HANDOVER_H

#include <stdint.h>
#include <time.h>

#include "lightiov/uapi.h"
#include "softssd/qpair.h"

#define SSD_HO_MAGIC	  0x4f48534cu /* "LSHO": never LIO_MAGIC, so no client op is one */
#define SSD_HO_VERSION	  2u
#define SSD_HO_MAX_FDS	  16 /* per record: a session's socket, 8 memfds, its queue memory */
#define SSD_HO_MAX_BYTES  4096
#define SSD_HO_TIMEOUT_MS 10000u /* each step of the exchange; the quiesce has its own bound */

enum ssd_ho_kind {
	SSD_HO_REQUEST = 1, /* new -> old: ssd_ho_request */
	SSD_HO_SERVER, /* old -> new: ssd_ho_server + listener, backing, stdout, stderr[, direct] */
	SSD_HO_SESSION, /* ssd_ho_session + client socket, window memfds[, queue memory] */
	SSD_HO_QP,	/* ssd_ho_qp + db eventfd if DB_EVENTFD, irq eventfd if IRQ_ENABLED */
	SSD_HO_END,	/* ssd_ho_end: the counts, nothing after it */
	SSD_HO_ACK,	/* new -> old: ssd_ho_ack; after SERVER: ready for the sessions, after
			 * END: rebuilt, the old one goes; status < 0: refused */
	SSD_HO_ABORT,	/* old -> new: ssd_ho_ack; the old one serves on */
	SSD_HO_KIND_MAX
};

struct ssd_ho_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t kind;
	uint32_t len;  /* payload bytes: exactly the kind's struct */
	uint32_t nfds; /* fds attached: exactly what the record's fields say */
};

struct ssd_ho_request {
	uint32_t pid; /* the new daemon: the asking connection's own (SO_PEERCRED) */
	uint32_t rsvd;
	uint8_t token[32]; /* the daemon's upgrade token (server_int.h) */
};

#define SSD_HO_SRV_DIRECT   (1u << 0) /* an O_DIRECT descriptor of the backing follows */
#define SSD_HO_SRV_RESIDENT (1u << 1) /* --require-resident */
#define SSD_HO_SRV_NOTIFY   (1u << 2) /* tell systemd the new main pid */
#define SSD_HO_SRV_ALL	    (SSD_HO_SRV_DIRECT | SSD_HO_SRV_RESIDENT | SSD_HO_SRV_NOTIFY)

struct ssd_ho_server {
	char name[LIO_NAME_MAX];
	char model[40]; /* the model's canonical text, parsed again */
	uint64_t capacity;
	uint64_t max_mem_client;
	uint64_t next_owner;
	uint64_t start_ns;
	uint32_t lba_shift;
	uint32_t workers;
	uint32_t max_clients, max_qp_client, max_qpairs;
	uint32_t allow_uid, allow_gid;
	uint32_t seccomp; /* enum ssd_seccomp_mode */
	uint32_t flags;	  /* SSD_HO_SRV_* */
	uint32_t next_qp_id;
	uint32_t pid; /* the old daemon: the new one resumes only once this process has exited */
	struct ssd_counters retired;
};

struct ssd_ho_vol {
	char name[LIO_NAME_MAX];
	uint32_t vol_id;
	uint32_t flags; /* as attached (LIO_ATTACH_*) */
	uint64_t lba_start, lba_count;
};

struct ssd_ho_session {
	uint32_t pid, uid;
	uint64_t owner;
	uint32_t admin; /* 0 or 1 */
	uint32_t flags; /* LIO_SESSION_* */
	char label[LIO_NAME_MAX];
	uint64_t qmem_bytes; /* 0: none; else its memfd follows the window's */
	uint32_t nvols;
	uint32_t nqps;		   /* SSD_HO_QP records of this session that follow */
	struct lio_dma_window win; /* nr_regions 0: none registered */
	struct ssd_ho_vol vols[LIO_MAX_ATTACHED];
	struct ssd_counters retired;
};

#define SSD_HO_QP_QUIESCED (1u << 0) /* its client had quiesced it: it stays so */
#define SSD_HO_QP_SQ_OFF   (1u << 1) /* the offsets below are carvings of queue memory */
#define SSD_HO_QP_CQ_OFF   (1u << 2)
#define SSD_HO_QP_DB_OFF   (1u << 3)
#define SSD_HO_QP_ALL	   (SSD_HO_QP_QUIESCED | SSD_HO_QP_SQ_OFF | SSD_HO_QP_CQ_OFF | SSD_HO_QP_DB_OFF)

struct ssd_ho_qp {
	uint32_t qp_id;
	uint32_t flags; /* SSD_HO_QP_* */
	uint64_t sq_off, cq_off, db_off;
	struct lio_qp_restore rq; /* the creation request and the state it was quiesced at */
	struct ssd_counters ctr;
};

struct ssd_ho_end {
	uint32_t nsessions;
	uint32_t nqps;
	uint64_t quiesce_ns; /* when the old daemon began to quiesce (CLOCK_MONOTONIC) */
};

struct ssd_ho_ack {
	int32_t status; /* 0 or -errno */
	uint32_t pid;
	char err[LIO_ERR_MAX];
};

/* deadline_ns for the record calls: ms from now (CLOCK_MONOTONIC) */
static inline uint64_t ssd_ho_deadline(uint32_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
	       (uint64_t)ms * 1000000ull;
}

/* One record as received: its kind, its payload (aligned copy) and its fds. */
struct ssd_ho_rec {
	uint16_t kind;
	union {
		struct ssd_ho_request req;
		struct ssd_ho_server srv;
		struct ssd_ho_session sess;
		struct ssd_ho_qp qp;
		struct ssd_ho_end end;
		struct ssd_ho_ack ack;
	} u;
	int fds[SSD_HO_MAX_FDS];
	unsigned nfds;
};

/* Checks one received message (buf, len bytes; nfds fds arrived, truncated when trunc) and
 * copies it into rec (fds not touched: the caller puts them there). The header (magic, version,
 * kind, length, fd count) and each field a record's fds or sizes depend on are checked here;
 * the rest (windows, queue pairs, volumes) by the same code that checks a client's requests.
 * 0, or -EPROTO/-EINVAL with err naming the record and the value. */
int ssd_ho_parse(const void *buf, size_t len, unsigned nfds, int trunc, struct ssd_ho_rec *rec,
		 char *err, unsigned errlen);
/* The fds a record of this payload must carry. */
unsigned ssd_ho_fds_for(const struct ssd_ho_rec *rec);

/* Sends one record (at most SSD_HO_MAX_FDS fds) on a SOCK_SEQPACKET socket, retrying until
 * deadline_ns (CLOCK_MONOTONIC): 0 or -errno. */
int ssd_ho_send(int fd, uint16_t kind, const void *p, uint32_t len, const int *fds, unsigned nfds,
		uint64_t deadline_ns);
/* Receives and parses one record, waiting until deadline_ns: 0, -ETIMEDOUT, -ECONNRESET (the
 * peer went), or the parser's refusal; rec->fds are the caller's to close (closed on refusal). */
int ssd_ho_recv(int fd, struct ssd_ho_rec *rec, uint64_t deadline_ns, char *err, unsigned errlen);
void ssd_ho_close_fds(struct ssd_ho_rec *rec);

#endif
