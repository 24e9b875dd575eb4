/* System-call allow-list for the lvmm process (libseccomp), installed on every thread. */
#ifndef LVMM_SECCOMP_FILTER_H
#define LVMM_SECCOMP_FILTER_H

#include <stdbool.h>

/* Loads the filter on all threads of the process (threads created later inherit it).
 * LVMM_SECCOMP=off skips it. 0 or a negative errno with a message in err. */
int seccomp_install(char *err, unsigned errlen);
/* True when LVMM_SECCOMP=off. */
bool seccomp_disabled(void);

#endif
