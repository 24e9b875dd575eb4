/* lvmm run --jail DIR: the VM process confined in new mount, PID, network, IPC and UTS
 * namespaces, with DIR as its root holding only the VM's files, as an unprivileged user. */
#ifndef LVMM_JAIL_H
#define LVMM_JAIL_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "config.h"

#define JAIL_MAX_KEEP 64
/* The default jail uid and gid: this plus the outer lvmm's pid (pid_max is at most 2^22), so
 * no two running jails, and no account, share one. */
#define JAIL_UID_BASE 1500000000u

struct jail_opts {
	const char *dir;	/* becomes / (a tmpfs is mounted on it: DIR itself is untouched);
				 * root's, as every directory above it, writable by root only */
	const char *api_socket; /* listened on before (a kept fd): removed once the VM ends */
	bool uid_set;		/* --jail-uid: uid and gid below, else JAIL_UID_BASE + pid */
	uid_t uid;
	gid_t gid;
	const int *keep_fds; /* fds the VM process keeps: the API socket (its directory is not
			      * bound in), the held allowed directory */
	unsigned nkeep;
	/* --allowed-dir, held open as allowed_fd (one of keep_fds) since start: bound in at its
	 * path, if that path is still the same directory, and allowed_fd replaced by the bound
	 * one (an fd of the host's mount would reach the host's tree through ".."). */
	const char *allowed_dir;
	int allowed_fd;
	/* --vsock: the socket made at the config's path before the jail (lstat right after its
	 * bind), removed when the VM process ends if that name is still it */
	struct stat vsock_made;
};

/* Confines the calling process (single-threaded, root): on success it returns 0 in the
 * confined child (PID 1 of the new namespace), with cfg's paths made absolute; the original
 * process waits for it and exits with its status, forwarding SIGINT, SIGTERM and SIGHUP.
 * Every path (DIR, the VM's files) is walked from / without following a symlink, and the
 * root is built on file descriptors only. Every fd but 0-2 and keep_fds is closed;
 * RLIMIT_CORE 0, RLIMIT_NOFILE 4096. LVMM_JAIL_CGROUP=DIR (a cgroup v2 directory) places
 * the child in that cgroup. -errno with a message naming the path on failure. */
int jail_enter(struct vm_config *cfg, const struct jail_opts *o, char *err, unsigned errlen);

#endif
