/* `lvmm run --vnvme ssd0:10G` on a host where nobody serves ssd0: lvmm starts a softssd itself on
 * a sparse backing under the state directory, stopped after the last VM using it ends. */
#ifndef LVMM_SSD_AUTOSTART_H
#define LVMM_SSD_AUTOSTART_H

#include "vnvme.h"

#define SSD_AUTO_BACKING_MIN (64ULL << 30) /* sparse: costs only what volumes write */
#define SSD_AUTO_IDLE_MS     10000	   /* no VM session this long: the daemon stops */
#define SSD_AUTO_WAIT_MS     30000	   /* lvmm run: a loaded host starts processes slowly */
/* An API VMM's (--ssd-autostart) request: waits at most this long in all, so the API thread
 * is never held longer, and asks for at most SSD_AUTO_API_MAX of volumes per SSD. */
#define SSD_AUTO_API_WAIT_MS 10000
#define SSD_AUTO_API_MAX     (1ULL << 40)

/* The state directory: $LVMM_STATE_DIR, else /var/lib/lvmm for root, else
 * $XDG_STATE_HOME/lvmm or ~/.local/state/lvmm. 0 or -ENAMETOOLONG / -ENOENT. */
int ssd_state_dir(char *buf, size_t len);

/* For each ssd the n devices name that neither a softssd socket nor /dev/lightiov/NAME answers:
 * starts one (a supervisor process runs `lvmm ssd serve`, and stops it once no VM has used it
 * for SSD_AUTO_IDLE_MS) and waits until it serves. One line on stderr per SSD started. Call
 * before the seccomp filter (fork, exec). 0, or a negative errno with err naming the SSD. */
int ssd_autostart(const struct vnvme_config *v, unsigned n, char *err, unsigned errlen);
/* The same for one device (a hot-added vnvme, idx its index for the default id). */
int ssd_autostart_vnvme(const struct vnvme_config *vc, unsigned idx, char *err, unsigned errlen);

/* For a process about to confine itself (the API's empty VMM): forks a helper that keeps the
 * right to fork and exec, and from then on ssd_autostart() asks it to check and start each SSD
 * (same lines, same supervisor). The helper ends with the process. 0 or a negative errno. */
int ssd_autostart_helper(char *err, unsigned errlen);

#endif
