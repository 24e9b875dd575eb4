/* The default guest of `lvmm run` without --kernel (the one `make` builds and installs). */
#ifndef LVMM_DEFAULT_GUEST_H
#define LVMM_DEFAULT_GUEST_H

#include <stdbool.h>

#include "config.h"

/* Fills c->kernel (and c->initramfs and a console cmdline when they are unset) from
 * $LVMM_GUEST_DIR alone when it is set, else BINDIR/guest/, BINDIR/../share/lvmm/,
 * /usr/local/share/lvmm/ or /usr/share/lvmm/. 0, or -ENOENT with err listing where it looked. */
int default_guest_find(struct vm_config *c, char *err, unsigned errlen);

#endif
