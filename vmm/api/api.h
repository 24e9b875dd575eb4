/* REST API on a Unix socket (cloud-hypervisor endpoint names) and the `lvmm api` client. */
#ifndef LVMM_API_H
#define LVMM_API_H

struct vm;

/* `lvmm run --api-socket PATH`: serves the API; vm is the VM started from the command line, or
 * NULL for an empty VMM waiting for vm.create + vm.boot. allowed_dir ("" for none, else an
 * absolute path without symlinks) confines every file a client names. Returns main()'s exit
 * status: when vm was given, once it stops; always on vmm.shutdown. */
int api_vmm_main(const char *socket_path, struct vm *vm, const char *allowed_dir);

/* `lvmm api --socket PATH VERB [JSON|@file]` */
int api_client_main(int argc, char **argv);

#endif
