/* Helpers for tests that drive a real `lvmm run --api-socket` with curl: one lvmm process per
 * test, its socket, console and log in a temp directory, and curl requests against it. */
#ifndef LVMM_APITEST_H
#define LVMM_APITEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct apitest {
	const char *lvmm;
	char dir[64], sock[128], console[128], log[128];
	unsigned curl_max_s; /* curl --max-time, default 30 */
	pid_t pid;	     /* 0 when not running */
	int early_status;    /* exit status of an lvmm that ended inside apitest_start() */
};

/* Runs argv (argv[0] looked up in PATH) with stdout (and stderr, if err) captured; returns the
 * exit status, or -1 on a signal. */
int apitest_run_capture(char *const argv[], char *out, size_t outlen, char *err, size_t errlen);

/* mkdtemp("<prefix>XXXXXX") and the paths in it; $LVMM or build/lvmm, checked executable. */
void apitest_init(struct apitest *t, const char *prefix);
/* Kills a still-running lvmm and removes the directory. */
void apitest_fini(struct apitest *t);

/* Starts `lvmm run --api-socket SOCK EXTRA...` (extra may be NULL) with output to t->log and
 * returns once vmm.ping answers, or once lvmm has already exited (its status is kept). */
void apitest_start(struct apitest *t, char *const extra[]);
/* Waits up to limit_s for lvmm to exit; its exit status, or -1 if it had to be killed. */
int apitest_wait(struct apitest *t, unsigned limit_s);

/* One request with curl (fails the test if curl itself fails); returns the HTTP status and the
 * parsed JSON body (or NULL when empty) in *body when body is not NULL. */
int apitest_curl(struct apitest *t, const char *method, const char *endpoint, const char *data,
		 json_t **body);
/* PUT endpoint must fail with status want and a message containing needle; lvmm serves on
 * (vmm.ping answers 200 afterwards). */
void apitest_expect_error(struct apitest *t, const char *endpoint, const char *data, int want,
			  const char *needle);
/* True when vmm.ping answers 200; a refused connection is not a failure. */
bool apitest_ping(struct apitest *t);
/* vm.info's state ("Created", "Running", ...), in a static buffer. */
const char *apitest_vm_state(struct apitest *t);
/* How often the console file shows what (its first 4 MiB; 0 when absent). */
unsigned apitest_console_count(struct apitest *t, const char *what);
/* Size of the console file (0 when absent). */
off_t apitest_console_size(struct apitest *t);
/* A fake virtio-fs back end listening at path: it answers one vhost-user negotiation (VERSION_1
 * and REPLY_ACK offered, 8 queues) on its first connection, enough for a share to be created.
 * Returns the listening fd (close it when done). */
int apitest_fake_vhost_fs(const char *path);

#endif
