/* Emulate mode over an SSD: lvmm parses the guest's commands as for a file and carries each one
 * out through a queue pair of its own on the SSD (bounce buffers in its own DMA window). */
#ifndef LVMM_NVME_LIO_EMU_H
#define LVMM_NVME_LIO_EMU_H

#include "nvme_ctrl.h"
#include "nvme_lio.h"

struct nvme_lio_emu;

/* Connects to cfg->ssd, attaches the volume (cfg->vol / cfg->size as in nvme_lio_open) and opens
 * one polled queue pair in isolated mode. *size gets the namespace bytes. 0 or a negative errno
 * with err naming the device and the SSD. */
int nvme_lio_emu_open(struct nvme_lio_emu **out, const struct nvme_lio_cfg *cfg, uint64_t *size,
		      char *err, unsigned errlen);
/* Stops the I/O thread: what it has not run completes with an error (nvme_ctrl_io_done), so
 * call it while the controller still exists; close calls it too. */
void nvme_lio_emu_stop(struct nvme_lio_emu *e);
void nvme_lio_emu_close(struct nvme_lio_emu *e);
/* false once a command timed out: the controller then reports CSTS.CFS (hooks.alive). */
bool nvme_lio_emu_alive(struct nvme_lio_emu *e);
/* Tests: how long one SSD command may take (default LIO_DRV_IO_TIMEOUT_MS). */
void nvme_lio_emu_set_timeout_ms(struct nvme_lio_emu *e, int ms);
const char *nvme_lio_emu_vol_name(const struct nvme_lio_emu *e);
/* log2 of the SSD's LBA size (9 or 12): the namespace's format in emulate mode too */
uint32_t nvme_lio_emu_lba_shift(const struct nvme_lio_emu *e);

/* Asynchronous: submit queues the request for the device's I/O thread, which completes it with
 * nvme_ctrl_io_done(); no vCPU waits on the SSD, and none holds the controller lock meanwhile. */
extern const struct nvme_backend_ops nvme_lio_emu_ops;

#endif
