/* The vNVMe's binding to a LightIOV backend (softssd socket): one session per device, its volume,
 * the queue memory lvmm maps as the CMB, and one backend queue pair per guest I/O queue pair. */
#ifndef LVMM_NVME_LIO_H
#define LVMM_NVME_LIO_H

#include <stdbool.h>
#include <stdint.h>

#include "guest_mem.h"
#include "lightiov/uapi.h"
#include "nvme_ctrl.h"

struct nvme_lio;

enum nvme_lio_db {
	NVME_LIO_DB_AUTO,    /* what the SSD prefers (poll when it offers it) */
	NVME_LIO_DB_POLL,    /* doorbell pages shared with the backend: no exit at all */
	NVME_LIO_DB_EVENTFD, /* ioeventfd + shadow doorbell buffer: one exit into the kernel */
};

struct nvme_lio_cfg {
	const char *id;	 /* the device id, for messages */
	const char *ssd; /* SSD name (socket under $LVMM_RUN_DIR/ssd) or a socket path */
	const char *vol; /* named volume, or NULL/"" for an anonymous one */
	uint64_t size;	 /* bytes: anonymous size, or create-if-absent size; 0 = must exist */
	bool readonly;
	uint32_t mode; /* LIGHTIOV_MODE_PASSTHROUGH or LIGHTIOV_MODE_ISOLATED */
	enum nvme_lio_db db;
	unsigned nqueues;  /* I/O queue pairs the controller offers: doorbell pages to reserve */
	uint64_t cmb_size; /* bytes of queue memory the guest sees as its CMB */
	const char *label; /* session label at the SSD (the VM's id) */
};

/* Connects, attaches the volume and allocates the queue memory. 0 or a negative errno with err
 * naming the device, the SSD and the value refused. */
int nvme_lio_open(struct nvme_lio **out, const struct nvme_lio_cfg *cfg, char *err,
		  unsigned errlen);
/* Destroys every queue pair, detaches, closes the session (an anonymous volume goes with it). */
void nvme_lio_close(struct nvme_lio *l);

void *nvme_lio_cmb(struct nvme_lio *l); /* cfg->cmb_size bytes, page aligned */
uint64_t nvme_lio_lba_start(const struct nvme_lio *l);
uint64_t nvme_lio_lba_count(const struct nvme_lio *l);
uint32_t nvme_lio_lba_shift(const struct nvme_lio *l);
bool nvme_lio_db_poll(const struct nvme_lio *l); /* the doorbell kind chosen */
/* doorbell=auto that moves to eventfd doorbells at Doorbell Buffer Config (nvme_lio_db_poll too:
 * queue pairs start on pages) */
bool nvme_lio_db_switch(const struct nvme_lio *l);
/* Whether the queue pair of b gets eventfd doorbells (else doorbell pages): always without
 * polled pages; with db_switch once b carries a shadow buffer whose slots lie in guest RAM. */
bool nvme_lio_bind_eventfd(const struct nvme_lio *l, const struct nvme_qp_bind *b,
			   const struct guest_mem *gm);
const char *nvme_lio_vol_name(const struct nvme_lio *l);
bool nvme_lio_anon(const struct nvme_lio *l);

/*
 * Creates the backend queue pair for b. The DMA window (guest RAM, plus the CMB at cmb_gpa when
 * it decodes) is registered first when it changed. db_fd (eventfd doorbells) and irq_fd (-1: no
 * interrupts) are sent along. *db_host gets the doorbell page pair to map over BAR0 (poll mode).
 * Returns an NVMe status; on failure the reason is printed once with the device id.
 */
uint16_t nvme_lio_bind(struct nvme_lio *l, const struct nvme_qp_bind *b, const struct guest_mem *gm,
		       uint64_t cmb_gpa, int db_fd, int irq_fd, uint32_t *qp_id, void **db_host);
void nvme_lio_unbind(struct nvme_lio *l, uint32_t qp_id);
/* Snapshots. The backend serves the queue-pair state calls (IDENTIFY's LIO_ID_QP_STATE). */
bool nvme_lio_has_qp_state(const struct nvme_lio *l);
/* Stops the queue pair fetching, waits for what it holds to complete (LIO_OP_QP_QUIESCE) and
 * returns its state; 0 or a negative errno (the reason printed with the device id). */
int nvme_lio_quiesce(struct nvme_lio *l, uint32_t qp_id, struct lio_qp_state *st);
/* It fetches again (LIO_OP_QP_RESUME). */
int nvme_lio_resume(struct nvme_lio *l, uint32_t qp_id);
/* Live migration: the volume detached once its queue pairs are gone (another VMM attaches it),
 * and attached again, refused unless it is where and as large as it was. */
int nvme_lio_release(struct nvme_lio *l, char *err, unsigned errlen);
int nvme_lio_reclaim(struct nvme_lio *l, char *err, unsigned errlen);
/* nvme_lio_bind of a restored queue: the backend queue pair starts quiesced at *saved (resume
 * it with nvme_lio_resume). */
uint16_t nvme_lio_bind_saved(struct nvme_lio *l, const struct nvme_qp_bind *b,
			     const struct guest_mem *gm, uint64_t cmb_gpa, int db_fd, int irq_fd,
			     const struct lio_qp_state *saved, uint32_t *qp_id, void **db_host);
int nvme_lio_qp_stats(struct nvme_lio *l, uint32_t qp_id, struct lio_qp_stats *s);
/* The guest's volatile write cache is off (on = true) or on again: the session's queue pairs
 * make every write durable before its completion. *syncs (may be NULL) gets the writes made
 * durable that way so far. 0 or a negative errno (the reason printed with the device id). */
int nvme_lio_write_through(struct nvme_lio *l, bool on, uint64_t *syncs);
/* The backend is gone (connection lost): every later bind fails at once. */
bool nvme_lio_dead(const struct nvme_lio *l);
/* Looks at the session socket without blocking: false once the daemon is gone (it hung up). */
bool nvme_lio_alive(struct nvme_lio *l);

#endif
