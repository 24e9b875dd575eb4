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
void nvme_lio_emu_close(struct nvme_lio_emu *e);
const char *nvme_lio_emu_vol_name(const struct nvme_lio_emu *e);
/* log2 of the SSD's LBA size (9 or 12): the namespace's format in emulate mode too */
uint32_t nvme_lio_emu_lba_shift(const struct nvme_lio_emu *e);

/* Synchronous: each request completes inside submit (the controller runs it on the thread that
 * rang the doorbell). */
extern const struct nvme_backend_ops nvme_lio_emu_ops;

#endif
