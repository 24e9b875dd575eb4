/* REST API on a Unix socket (cloud-hypervisor endpoint names) and the `lvmm api` client. */
#ifndef LVMM_API_H
#define LVMM_API_H

#include <stdbool.h>

struct vm;

/* `lvmm run --api-socket PATH`: serves the API; vm is the VM started from the command line, or
 * NULL for an empty VMM waiting for vm.create + vm.boot. listen_fd: a socket already listening
 * on PATH (a jail's, made before it), or -1 to make it here. allowed_dir ("" for none, else an
 * absolute path without symlinks) confines every file a client names. ssd_autostart: an empty
 * VMM starts a softssd for an SSD nobody serves (a helper forked before seccomp); without it
 * such a vm.create fails at once. Returns main()'s exit status: when vm was given, once it
 * stops; always on vmm.shutdown. */
int api_vmm_main(const char *socket_path, int listen_fd, struct vm *vm, const char *allowed_dir,
		 bool ssd_autostart);

/* `lvmm api --socket PATH VERB [JSON|@file]` */
int api_client_main(int argc, char **argv);

#endif
