/* `lvmm run --api-socket PATH`: owns the socket file's lifetime, ties the server to a
 * command-line VM (lvmm exits when it stops) or serves an empty VMM until vmm.shutdown. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "api/api.h"
#include "api/api_internal.h"

struct api_waiter {
	struct vm *vm;
	int efd;
	enum vm_exit_reason reason;
};

/* vm_wait() blocks, so it gets its own thread; the server learns of the stop by the eventfd. */
static void *api_wait_thread(void *arg)
{
	struct api_waiter *w = arg;
	uint64_t one = 1;

	w->reason = vm_wait(w->vm);
	if (write(w->efd, &one, sizeof(one)) < 0) {
		/* an eventfd write of 1 cannot fail short of a closed fd */
	}
	return NULL;
}

static int api_exit_status(struct vm *vm, enum vm_exit_reason reason)
{
	switch (reason) {
	case VM_EXIT_TRIPLE_FAULT:
	case VM_EXIT_ERROR:
		fprintf(stderr, "lvmm: VM stopped: %s\n", vm_exit_msg(vm));
		return 1;
	default:
		return 0;
	}
}

int api_vmm_main(const char *socket_path, struct vm *vm)
{
	char err[API_ERR_LEN];
	struct api_waiter w = {.vm = vm, .efd = -1};
	struct api_vmm vmm;
	pthread_t waiter;
	sigset_t sigs, old;
	int lfd, stop_fd, r, status = 0;

	lfd = api_socket_listen(socket_path, err, sizeof(err));
	if (lfd < 0) {
		fprintf(stderr, "lvmm: %s\n", err);
		return 1;
	}
	api_vmm_init(&vmm, &api_vm_ops_kvm, vm);

	if (vm) {
		w.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (w.efd < 0 || (r = pthread_create(&waiter, NULL, api_wait_thread, &w))) {
			fprintf(stderr, "lvmm: api socket %s: cannot start the VM waiter\n",
				socket_path);
			if (w.efd >= 0)
				close(w.efd);
			close(lfd);
			unlink(socket_path);
			return 1;
		}
		stop_fd = w.efd;
	} else {
		/* An empty VMM stops cleanly on SIGINT/SIGTERM: the socket file is removed and any
		 * VM created later inherits the blocked mask, so only this signalfd sees them. */
		sigemptyset(&sigs);
		sigaddset(&sigs, SIGINT);
		sigaddset(&sigs, SIGTERM);
		pthread_sigmask(SIG_BLOCK, &sigs, &old);
		stop_fd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	}

	r = api_serve(&vmm, lfd, stop_fd, 0);
	if (r < 0) {
		fprintf(stderr, "lvmm: api socket %s: server failed: %s\n", socket_path,
			strerror(-r));
		status = 1;
	}
	close(lfd);
	unlink(socket_path);

	if (vm) {
		/* The server returns on vmm.shutdown (the VM was stopped there) or once the VM
		 * stopped by itself; on a server failure stop it so the waiter can finish. */
		if (r < 0) {
			enum vm_state s = vm_get_state(vm);

			if (s == VM_RUNNING || s == VM_PAUSED)
				vm_shutdown(vm, err, sizeof(err));
		}
		pthread_join(waiter, NULL);
		close(w.efd);
		if (!status)
			status = api_exit_status(vm, w.reason);
	} else {
		api_vmm_release(&vmm);
		if (stop_fd >= 0)
			close(stop_fd);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return status;
}
