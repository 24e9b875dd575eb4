/* Debugging threads of a VM: LVMM_DEBUG_VCPU's periodic register dumps and LVMM_PROFILE's
 * sampling of every vCPU's guest RIP. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vm_internal.h"

/* LVMM_DEBUG_VCPU=SECONDS: every vCPU prints its registers that often (stuck-guest triage). */
void *vm_dump_thread(void *arg)
{
	struct vm *vm = arg;
	long period = strtol(getenv("LVMM_DEBUG_VCPU"), NULL, 10);
	struct timespec ts;

	pthread_setname_np(pthread_self(), "lvmm-dump");
	if (period < 1)
		period = 5;
	pthread_mutex_lock(&vm->lock);
	while (!vm->stop_req) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += period;
		if (pthread_cond_timedwait(&vm->cond, &vm->lock, &ts) == ETIMEDOUT &&
		    !vm->stop_req) {
			vm->dump_gen++;
			vm_kick_all(vm);
		}
	}
	pthread_mutex_unlock(&vm->lock);
	return NULL;
}

/* LVMM_PROFILE=FILE[,HZ]: a sampling profiler of the guest. Every 1/HZ s (default 1000) each vCPU
 * is kicked out of KVM_RUN and writes its RIP to FILE; tools/profile-guest.sh FILE vmlinux sums the
 * samples by symbol. A kick costs one exit per vCPU: on an emulating host (kvm_pvm) that is about
 * 1% at 1000 Hz, enough to find where a guest kernel's boot goes. */
void vm_profile_open(struct vm *vm)
{
	char path[4096], *comma;

	if (vm->prof_fp || !getenv("LVMM_PROFILE"))
		return;
	snprintf(path, sizeof(path), "%s", getenv("LVMM_PROFILE"));
	vm->prof_hz = 1000;
	comma = strrchr(path, ',');
	if (comma && !strcmp(comma, ",stack")) {
		vm->prof_stack = true;
		*comma = 0;
		comma = strrchr(path, ',');
	}
	if (comma) {
		*comma = 0;
		vm->prof_hz = strtol(comma + 1, NULL, 10);
		if (vm->prof_hz < 1 || vm->prof_hz > 100000)
			vm->prof_hz = 1000;
	}
	vm->prof_fp = fopen(path, "we");
	if (!vm->prof_fp)
		fprintf(stderr, "lvmm: LVMM_PROFILE: %s: %s (not profiling)\n", path,
			strerror(errno));
}

void *vm_profile_thread(void *arg)
{
	struct vm *vm = arg;
	struct timespec ts;
	long step = 1000000000L / vm->prof_hz;

	pthread_setname_np(pthread_self(), "lvmm-prof");
	pthread_mutex_lock(&vm->lock);
	clock_gettime(CLOCK_REALTIME, &ts);
	while (!vm->stop_req) {
		ts.tv_nsec += step;
		while (ts.tv_nsec >= 1000000000L) {
			ts.tv_nsec -= 1000000000L;
			ts.tv_sec++;
		}
		if (pthread_cond_timedwait(&vm->cond, &vm->lock, &ts) == ETIMEDOUT &&
		    !vm->stop_req) {
			unsigned i;

			__atomic_add_fetch(&vm->prof_gen, 1, __ATOMIC_RELAXED);
			for (i = 0; i < vm->ncpus; i++)
				if (vm->vcpus[i].thread_started)
					pthread_kill(vm->vcpus[i].thread, vcpu_kick_signal);
		}
	}
	pthread_mutex_unlock(&vm->lock);
	return NULL;
}
