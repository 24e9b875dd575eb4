/* `lvmm run --api-socket PATH`: owns the socket file's lifetime, ties the server to a
 * command-line VM (lvmm exits when it stops) or serves an empty VMM until vmm.shutdown. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "api/api.h"
#include "api/api_internal.h"
#include "nvme-lightiov/ssd_autostart.h"
#include "seccomp_filter.h"

static int api_exit_status(struct vm *vm, enum vm_exit_reason reason)
{
	/* As `lvmm run` without the API: poweroff, reboot, reset and triple fault are the guest's
	 * doing and end with 0; only a monitor-side error is a failure. */
	switch (reason) {
	case VM_EXIT_ERROR:
		fprintf(stderr, "lvmm: VM stopped: %s\n", vm_exit_msg(vm));
		return 1;
	default: /* the caller prints the reason */
		return 0;
	}
}

/* The command-line VM: the waiter's eventfd ends the server when the VM stops. */
static int api_main_vm(const char *path, int lfd, struct vm *vm, const char *allowed_dir)
{
	struct api_vmm vmm;
	int r, status = 0;

	api_vmm_init(&vmm, &api_vm_ops_kvm, vm);
	vmm.allowed_dir = allowed_dir;
	vmm.stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (vmm.stop_efd < 0 || api_vmm_watch(&vmm)) {
		fprintf(stderr, "lvmm: api socket %s: cannot start the VM waiter\n", path);
		if (vmm.stop_efd >= 0)
			close(vmm.stop_efd);
		api_vmm_unwatch(&vmm);
		return 1;
	}
	r = api_serve(&vmm, lfd, vmm.stop_efd, 0);
	if (r < 0) {
		fprintf(stderr, "lvmm: api socket %s: server failed: %s\n", path, strerror(-r));
		status = 1;
	}
	/* Returns on vmm.shutdown (the VM was stopped there) or once the VM stopped by itself;
	 * on a server failure this stops it, so the waiter always finishes. */
	api_vmm_unwatch(&vmm);
	close(vmm.stop_efd);
	if (!status)
		status = api_exit_status(vm, vmm.wait_reason);
	return status;
}

/* vm.create (and vm.boot's re-create) as `lvmm run` does it: an SSD nobody serves is started
 * first, by the helper forked before the seccomp filter. */
static int api_create_autostart(const struct vm_config *cfg, struct vm **out, char *err,
				unsigned errlen)
{
	int r = ssd_autostart(cfg->vnvme,
			      cfg->nvnvme < CONFIG_MAX_VNVME ? cfg->nvnvme : CONFIG_MAX_VNVME, err,
			      errlen);

	return r ? r : api_vm_ops_kvm.create(cfg, out, err, errlen);
}

/* vm.add-vnvme likewise: the hot-added function's SSD first, then the function. */
static int api_add_vnvme_autostart(struct vm *vm, struct vnvme_config *c, char *err,
				   unsigned errlen)
{
	int r = ssd_autostart_vnvme(c, api_vm_ops_kvm.get_config(vm)->nvnvme, err, errlen);

	return r ? r : api_vm_ops_kvm.add_vnvme(vm, c, err, errlen);
}

/* An empty VMM: serves until vmm.shutdown, SIGINT, SIGTERM or SIGHUP. */
static int api_main_empty(const char *path, int lfd, const char *allowed_dir, bool autostart)
{
	char err[API_ERR_LEN];
	struct api_vm_ops ops = api_vm_ops_kvm;
	struct api_vmm vmm;
	sigset_t sigs, old;
	int sfd, r, status = 0;

	/* Blocked before any VM exists: vCPU threads inherit the mask, so only the signalfd
	 * sees these and the VM is shut down in order, restoring the terminal. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		fprintf(stderr, "lvmm: api socket %s: signalfd: %s\n", path, strerror(errno));
		status = 1;
		goto out;
	}
	/* a fork and an exec per SSD started: not allowed once the filter is in. Only when the
	 * operator asked: each start is a root daemon and a backing file a client names. */
	if (autostart && ssd_autostart_helper(err, sizeof(err))) {
		fprintf(stderr, "lvmm: %s: an SSD nobody serves will not be started\n", err);
	} else if (autostart) {
		ops.create = api_create_autostart;
		ops.add_vnvme = api_add_vnvme_autostart;
	}
	if (seccomp_install(err, sizeof(err))) {
		fprintf(stderr, "lvmm: %s\n", err);
		status = 1;
		goto out;
	}
	api_vmm_init(&vmm, &ops, NULL);
	vmm.allowed_dir = allowed_dir;
	r = api_serve(&vmm, lfd, sfd, 0);
	if (r < 0) {
		fprintf(stderr, "lvmm: api socket %s: server failed: %s\n", path, strerror(-r));
		status = 1;
	}
	api_vmm_release(&vmm);
out:
	if (sfd >= 0) {
		struct signalfd_siginfo si;

		/* Consume the signal that stopped us, or unblocking below would deliver it. */
		while (read(sfd, &si, sizeof(si)) == sizeof(si))
			;
		close(sfd);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return status;
}

int api_vmm_main(const char *socket_path, int listen_fd, struct vm *vm, const char *allowed_dir,
		 bool ssd_autostart)
{
	char err[API_ERR_LEN];
	int lfd, status;

	lfd = listen_fd >= 0 ? listen_fd : api_socket_listen(socket_path, err, sizeof(err));
	if (lfd < 0) {
		fprintf(stderr, "lvmm: %s\n", err);
		/* The caller waits for its VM after we return: without an API it must not run. */
		if (vm)
			vm_shutdown(vm, err, sizeof(err));
		return 1;
	}
	status = vm ? api_main_vm(socket_path, lfd, vm, allowed_dir)
		    : api_main_empty(socket_path, lfd, allowed_dir, ssd_autostart);
	close(lfd);
	if (listen_fd < 0) /* else the jail's outer process removes it */
		unlink(socket_path);
	return status;
}
