/* lvmm run --jail DIR: the VM process confined in new mount, PID, network, IPC and UTS
 * namespaces, with DIR as its root holding only the VM's files, as an unprivileged user. */
#ifndef LVMM_JAIL_H
#define LVMM_JAIL_H

#include "config.h"

struct jail_opts {
	const char *dir;	 /* becomes / (a tmpfs is mounted on it: DIR itself is untouched) */
	const char *api_socket;	 /* its directory is bound in, so clients outside reach it */
	const char *allowed_dir; /* bound in read-write: API clients name files there */
};

/* Confines the calling process (single-threaded, root): on success it returns 0 in the
 * confined child (PID 1 of the new namespace), with cfg's paths made absolute; the original
 * process waits for it and exits with its status, forwarding SIGINT, SIGTERM and SIGHUP.
 * The uid and gid become DIR's owner's, or 65534 when root owns DIR. Every fd but 0-2 is
 * closed; RLIMIT_CORE 0, RLIMIT_NOFILE 4096. LVMM_JAIL_CGROUP=DIR (a cgroup v2 directory)
 * places the child in that cgroup. -errno with a message naming the path on failure. */
int jail_enter(struct vm_config *cfg, const struct jail_opts *o, char *err, unsigned errlen);

#endif
