/* A softssd daemon for a test: `lvmm ssd serve` run in the background and waited for. */
#ifndef LVMM_SSDUTIL_H
#define LVMM_SSDUTIL_H

#include <sys/types.h>

/* Starts `$LVMM ssd serve NAME OPTS...` (opts NULL-terminated, may be NULL) with its output
 * appended to log, and returns once a client's identify is answered; fails the test with the
 * log when it is not within 30 s. */
pid_t testutil_ssd_start(const char *name, const char *log, const char *const opts[]);
/* Sends sig to *pid and reaps it (20 s at most): its waitpid status, 0 when *pid was not set;
 * *pid becomes 0. */
int testutil_ssd_stop(pid_t *pid, int sig);

#endif
