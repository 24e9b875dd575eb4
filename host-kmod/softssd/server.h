/* softssd's control plane: the Unix socket at RUN_DIR/ssd/NAME.sock, one session per connection
 * (its DMA window, queue memory, volumes and queue pairs), every uapi.h operation, limits. */
#ifndef SOFTSSD_SERVER_H
#define SOFTSSD_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "softssd/model.h"

struct nvme_pci;

#define SSD_DEF_MAX_CLIENTS   64
#define SSD_DEF_MAX_QP_CLIENT 256	    /* queue pairs of one session */
#define SSD_DEF_MAX_MEM	      (64ull << 30) /* registered DMA window of one session */

enum ssd_seccomp_mode { SSD_SECCOMP_KILL, SSD_SECCOMP_LOG, SSD_SECCOMP_OFF };

struct ssd_server_cfg {
	const char *name;      /* the SSD's name: socket, volume table, status lines */
	int backing_fd;	       /* open read/write, locked by ssd_volumes_open */
	int direct_fd;	       /* the same with O_DIRECT for the data path, or -1 */
	struct nvme_pci *nvme; /* --vfio: namespace 1 of this controller instead (fds -1) */
	uint64_t capacity;     /* backing bytes */
	uint32_t lba_shift;
	struct ssd_model *model;
	unsigned workers;
	unsigned max_clients;
	unsigned max_qp_client;
	unsigned max_qpairs; /* all sessions together, <= LIO_MAX_QPAIRS */
	uint64_t max_mem_client;
	uid_t allow_uid;       /* (uid_t)-1: none beyond root and the daemon's own uid */
	gid_t allow_gid;       /* (gid_t)-1: none */
	bool require_resident; /* refuse DMA windows with pages not populated (memory charging) */
	enum ssd_seccomp_mode seccomp;
	int notify; /* write READY=1 to $NOTIFY_SOCKET once serving */
};

/* Serves until SIGINT or SIGTERM: 0 after a clean stop, else 1 with the reason on stderr. */
int ssd_serve(const struct ssd_server_cfg *cfg);

/* Takes over the sessions of the daemon serving name (`lvmm ssd upgrade`, upgrade_take.c) and
 * serves them as it was configured; one line, "ok PID" or the reason, goes to status_fd (then
 * closed). Exits like ssd_serve; 1 when the take-over failed (the old daemon serves on). */
int ssd_take_over(const char *name, int status_fd);

/* The daemon's system-call filter (seccomp.c), installed on every thread once start-up is done;
 * vfio adds what a controller driven through VFIO needs after start-up (a client window's DMA
 * mapping or locking, the device's interrupts and reset at the stop). */
int ssd_seccomp_install(enum ssd_seccomp_mode mode, bool vfio, char *err, unsigned errlen);
/* Drops every capability of the daemon, bounding set included (seccomp.c). */
int ssd_drop_caps(char *err, unsigned errlen);

#endif
