/* vCPU set-up and run loop: one thread per vCPU, 64-bit boot state for vCPU 0, exit dispatch to
 * the PIO/MMIO buses, and the kvm_pvm emulation-failure completions (int3, fwait, clac/stac). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostcompat.h"
#include "layout.h"
#include "seccomp_filter.h"
#include "vm_internal.h"

#define CR0_PE	  0x1ULL
#define CR0_MP	  0x2ULL
#define CR0_ET	  0x10ULL
#define CR0_NE	  0x20ULL
#define CR0_PG	  0x80000000ULL
#define CR4_PAE	  0x20ULL
#define EFER_LME  0x100ULL
#define EFER_LMA  0x400ULL
#define RFLAGS_AC (1ULL << 18)
/* KVM_FEATURE_PV_UNHALT (kick), PV_SEND_IPI, PV_SCHED_YIELD: the hypercall-based ones. */
#define KVM_PV_HYPERCALL_FEATURES ((1u << 7) | (1u << 11) | (1u << 13))

#define BOOT_CS	 0x10
#define BOOT_DS	 0x18
#define BOOT_TSS 0x20

int vcpu_kick_signal;

static void vcpu_kick_handler(int sig)
{
	/* Nothing to do: the signal exists only to make KVM_RUN return -EINTR. */
	(void)sig;
}

void vcpu_signals_init(void)
{
	struct sigaction sa;

	vcpu_kick_signal = SIGRTMIN;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = vcpu_kick_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(vcpu_kick_signal, &sa, NULL); /* no SA_RESTART: KVM_RUN must return */
}

/* KVM's CPUID for this host (what the vCPUs get, lvmm's edits aside): malloc'd, or NULL with
 * *ret a negative errno. */
static struct kvm_cpuid2 *vcpu_supported_cpuid(int kvm_fd, int *ret)
{
	struct kvm_cpuid2 *c;
	unsigned nent = 128;

	for (;;) {
		c = calloc(1, sizeof(*c) + nent * sizeof(c->entries[0]));
		if (!c) {
			*ret = -ENOMEM;
			return NULL;
		}
		c->nent = nent;
		if (!ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, c))
			return c;
		*ret = -errno;
		free(c);
		if (*ret != -E2BIG || nent >= 4096)
			return NULL;
		nent *= 2;
	}
}

unsigned vm_guest_phys_bits(struct vm *vm)
{
	struct kvm_cpuid2 *c;
	unsigned bits = 0;
	int ret;

	c = vcpu_supported_cpuid(vm->kvm_fd, &ret);
	for (unsigned i = 0; c && i < c->nent; i++)
		if (c->entries[i].function == 0x80000008)
			bits = c->entries[i].eax & 0xff;
	free(c);
	return bits;
}

static int vcpu_set_cpuid(struct vcpu *v, char *err, unsigned errlen)
{
	struct kvm_cpuid2 *c;
	unsigned i;
	int ret;

	c = vcpu_supported_cpuid(v->vm->kvm_fd, &ret);
	if (!c) {
		if (ret != -ENOMEM)
			snprintf(err, errlen, "vcpu %u: KVM_GET_SUPPORTED_CPUID: %s", v->id,
				 strerror(-ret));
		return ret;
	}
	for (i = 0; i < c->nent; i++) {
		struct kvm_cpuid_entry2 *e = &c->entries[i];

		switch (e->function) {
		case 1:
			/* Initial APIC ID and the logical processor count Linux reads for SMP. */
			e->ebx = (e->ebx & 0x0000ffff) | (v->id << 24) | (v->vm->ncpus << 16);
			if (v->vm->ncpus > 1)
				e->edx |= 1u << 28; /* HTT: the count above is valid */
			break;
		case 0xb:
		case 0x1f:
			e->edx = v->id; /* x2APIC ID */
			break;
		case 0x40000001:
			/* kvm_pvm never completes a guest hypercall (the vCPU spins on vmcall):
			 * hide the PV features that are hypercalls (IPIs, sched yield, kicks). */
			if (v->vm->hostcompat)
				e->eax &= ~(KVM_PV_HYPERCALL_FEATURES);
			break;
		}
	}
	ret = ioctl(v->fd, KVM_SET_CPUID2, c) ? -errno : 0;
	if (ret)
		snprintf(err, errlen, "vcpu %u: KVM_SET_CPUID2: %s", v->id, strerror(-ret));
	free(c);
	return ret;
}

int vcpu_create(struct vm *vm, unsigned id, char *err, unsigned errlen)
{
	struct vcpu *v = &vm->vcpus[id];
	int size, ret;

	v->vm = vm;
	v->id = id;
	v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)id);
	if (v->fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "vcpu %u: KVM_CREATE_VCPU: %s", id, strerror(errno));
		return ret;
	}
	size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (size < (int)sizeof(struct kvm_run)) {
		snprintf(err, errlen, "vcpu %u: KVM_GET_VCPU_MMAP_SIZE returned %d", id, size);
		return -EINVAL;
	}
	v->run_size = (size_t)size;
	v->run = mmap(NULL, v->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
	if (v->run == MAP_FAILED) {
		ret = -errno;
		v->run = NULL;
		snprintf(err, errlen, "vcpu %u: mmap of kvm_run: %s", id, strerror(errno));
		return ret;
	}
	return vcpu_set_cpuid(v, err, errlen);
}

static void seg_flat(struct kvm_segment *s, uint16_t sel, uint8_t type, bool code)
{
	memset(s, 0, sizeof(*s));
	s->selector = sel;
	s->base = 0;
	s->limit = 0xffffffff;
	s->type = type;
	s->present = 1;
	s->s = 1;
	s->g = 1;
	s->l = code;
	s->db = !code;
}

/* The 64-bit boot state: flat segments, identity page tables, RIP at the entry, RSI at the zero
 * page, RBX the vCPU index (0 on the boot CPU; APs of a guest with lvmm's AP-entry note). */
static int vcpu_setup_long(struct vcpu *v, char *err, unsigned errlen)
{
	struct vm *vm = v->vm;
	/* Null, unused, flat 64-bit code (0x10), flat data (0x18), TSS (0x20): Linux's boot GDT. */
	const uint64_t gdt[] = {
	    0, 0, 0x00af9b000000ffffULL, 0x00cf93000000ffffULL, 0x00008b0000000067ULL, 0};
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	struct kvm_fpu fpu;
	int ret;

	if (gmem_write(&vm->gmem, VM_BOOT_GDT, gdt, sizeof(gdt))) {
		snprintf(err, errlen, "vcpu 0: boot GDT at 0x%llx is outside RAM", VM_BOOT_GDT);
		return -EFAULT;
	}
	if (ioctl(v->fd, KVM_GET_SREGS, &sregs))
		goto fail;
	seg_flat(&sregs.cs, BOOT_CS, 0xb, true);
	seg_flat(&sregs.ds, BOOT_DS, 0x3, false);
	sregs.es = sregs.fs = sregs.gs = sregs.ss = sregs.ds;
	memset(&sregs.tr, 0, sizeof(sregs.tr));
	sregs.tr.selector = BOOT_TSS;
	sregs.tr.limit = 0x67;
	sregs.tr.type = 0xb; /* busy 64-bit TSS: VM entry insists on a usable TR */
	sregs.tr.present = 1;
	sregs.gdt.base = VM_BOOT_GDT;
	sregs.gdt.limit = sizeof(gdt) - 1;
	sregs.idt.base = 0;
	sregs.idt.limit = 0;
	sregs.cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_PG;
	sregs.cr3 = vm->boot.cr3;
	sregs.cr4 = CR4_PAE;
	sregs.efer = EFER_LME | EFER_LMA;
	if (ioctl(v->fd, KVM_SET_SREGS, &sregs))
		goto fail;

	memset(&regs, 0, sizeof(regs));
	regs.rip = vm->boot.entry;
	regs.rsi = vm->boot.zero_page;
	regs.rbx = v->id;
	regs.rsp = regs.rbp = VM_BOOT_STACK;
	regs.rflags = 0x2;
	if (ioctl(v->fd, KVM_SET_REGS, &regs))
		goto fail;

	memset(&fpu, 0, sizeof(fpu));
	fpu.fcw = 0x37f;
	fpu.mxcsr = 0x1f80;
	if (ioctl(v->fd, KVM_SET_FPU, &fpu))
		goto fail;
	return 0;
fail:
	ret = -errno;
	snprintf(err, errlen, "vcpu %u: boot register set-up: %s", v->id, strerror(errno));
	return ret;
}

int vcpu_setup_bsp(struct vcpu *v, char *err, unsigned errlen)
{
	struct kvm_lapic_state lapic;
	int ret = vcpu_setup_long(v, err, errlen);

	if (ret)
		return ret;
	/* Route the PIC through LINT0 (ExtINT) and NMIs through LINT1, as firmware leaves it. */
	if (!ioctl(v->fd, KVM_GET_LAPIC, &lapic)) {
		uint32_t *lint0 = (uint32_t *)&lapic.regs[0x350];
		uint32_t *lint1 = (uint32_t *)&lapic.regs[0x360];

		*lint0 = (*lint0 & ~0x700u) | (7u << 8);
		*lint1 = (*lint1 & ~0x700u) | (4u << 8);
		ioctl(v->fd, KVM_SET_LAPIC, &lapic);
	}
	return 0;
}

/* The AP starts runnable in the boot CPU's state, without INIT/SIPI (which kvm_pvm never
 * delivers): the guest tells the CPUs apart by RBX and parks the ones it does not use. */
int vcpu_setup_ap_entry(struct vcpu *v, char *err, unsigned errlen)
{
	struct kvm_mp_state mp = {.mp_state = KVM_MP_STATE_RUNNABLE};
	int ret = vcpu_setup_long(v, err, errlen);

	if (ret)
		return ret;
	if (ioctl(v->fd, KVM_SET_MP_STATE, &mp)) {
		ret = -errno;
		snprintf(err, errlen, "vcpu %u: cannot make the AP runnable: %s", v->id,
			 strerror(errno));
	}
	return ret;
}

static int vcpu_paging(struct vcpu *v, struct hostcompat_paging *pg, struct kvm_regs *regs)
{
	struct kvm_sregs s;

	if (ioctl(v->fd, KVM_GET_SREGS, &s) || ioctl(v->fd, KVM_GET_REGS, regs))
		return -errno;
	pg->cr0 = s.cr0;
	pg->cr3 = s.cr3;
	pg->cr4 = s.cr4;
	pg->efer = s.efer;
	/* In long mode CS.base is 0; outside it the linear address needs the base added. */
	if (!(s.efer & EFER_LMA))
		regs->rip = (regs->rip + s.cs.base) & 0xffffffffULL;
	return 0;
}

static int vcpu_inject_bp(struct vcpu *v)
{
	struct kvm_vcpu_events ev;

	if (ioctl(v->fd, KVM_GET_VCPU_EVENTS, &ev))
		return -errno;
	ev.exception.injected = 1;
	ev.exception.nr = 3;
	ev.exception.has_error_code = 0;
	ev.exception.error_code = 0;
	ev.flags = 0;
	return ioctl(v->fd, KVM_SET_VCPU_EVENTS, &ev) ? -errno : 0;
}

/* Emulation failure: complete the instructions kvm_pvm cannot emulate, stop on anything else. */
static bool vcpu_emulation_failure(struct vcpu *v)
{
	struct vm *vm = v->vm;
	struct hostcompat_paging pg;
	struct kvm_regs regs;
	uint8_t bytes[16];
	unsigned n = 0, len = 0;
	enum hostcompat_insn insn = HC_INSN_UNKNOWN;
	char hex[64];
	uint64_t linear_rip = 0;

	if (!vcpu_paging(v, &pg, &regs)) {
		linear_rip = regs.rip;
		n = hostcompat_fetch(&vm->gmem, &pg, linear_rip, bytes, sizeof(bytes));
		insn = hostcompat_decode(bytes, n, &len);
	}
	if (vm->hostcompat && insn != HC_INSN_UNKNOWN) {
		struct kvm_regs r;

		/* Re-read: vcpu_paging may have folded CS.base into rip. */
		if (ioctl(v->fd, KVM_GET_REGS, &r))
			goto fail;
		r.rip += len;
		if (insn == HC_INSN_CLAC)
			r.rflags &= ~RFLAGS_AC;
		else if (insn == HC_INSN_STAC)
			r.rflags |= RFLAGS_AC;
		if (ioctl(v->fd, KVM_SET_REGS, &r))
			goto fail;
		/* int3 is a trap: #BP is delivered with RIP already past the 0xcc. */
		if (insn == HC_INSN_INT3 && vcpu_inject_bp(v))
			goto fail;
		return true;
	}
fail:
	hostcompat_format_bytes(bytes, n, hex, sizeof(hex));
	vm_request_stop(vm, VM_EXIT_ERROR,
			"vcpu %u: emulation failure at RIP 0x%llx, instruction bytes: %s", v->id,
			(unsigned long long)linear_rip, hex);
	return false;
}

static void vcpu_pio(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	uint8_t *data = (uint8_t *)run + run->io.data_offset;
	bool out = run->io.direction == KVM_EXIT_IO_OUT;
	uint32_t i;

	for (i = 0; i < run->io.count; i++, data += run->io.size) {
		if (out &&
		    legacy_reset_port_write(&v->vm->legacy, run->io.port, run->io.size, data[0]))
			continue;
		bus_access(&v->vm->pio, run->io.port, data, run->io.size, out);
	}
}

static const char *system_event_name(uint32_t type)
{
	switch (type) {
	case KVM_SYSTEM_EVENT_SHUTDOWN:
		return "shutdown";
	case KVM_SYSTEM_EVENT_RESET:
		return "reset";
	case KVM_SYSTEM_EVENT_CRASH:
		return "crash";
	default:
		return "unknown";
	}
}

/* Handles one exit; false when the vCPU must stop. */
bool vcpu_handle_exit(struct vcpu *v)
{
	struct kvm_run *run = v->run;
	struct vm *vm = v->vm;
	struct kvm_regs regs;

	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		v->exits[VCPU_EXIT_IO]++;
		vcpu_pio(v);
		return true;
	case KVM_EXIT_MMIO:
		v->exits[VCPU_EXIT_MMIO]++;
		if (run->mmio.len > sizeof(run->mmio.data))
			return true;
		bus_access(&vm->mmio, run->mmio.phys_addr, run->mmio.data, run->mmio.len,
			   run->mmio.is_write);
		return true;
	case KVM_EXIT_INTR:
		v->exits[VCPU_EXIT_INTR]++;
		return true;
	case KVM_EXIT_IOAPIC_EOI:
		if (vm->split_irqchip)
			ioapic_eoi(&vm->ioapic, run->eoi.vector);
		return true;
	case KVM_EXIT_INTERNAL_ERROR:
		v->exits[VCPU_EXIT_EMUL]++;
		if (run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION)
			return vcpu_emulation_failure(v);
		vm_request_stop(vm, VM_EXIT_ERROR, "vcpu %u: KVM internal error, suberror %u",
				v->id, run->internal.suberror);
		return false;
	case KVM_EXIT_SHUTDOWN:
		memset(&regs, 0, sizeof(regs));
		ioctl(v->fd, KVM_GET_REGS, &regs);
		vm_request_stop(vm, VM_EXIT_TRIPLE_FAULT,
				"guest triple fault (vcpu %u, RIP 0x%llx)", v->id,
				(unsigned long long)regs.rip);
		return false;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_SHUTDOWN)
			vm_request_stop(vm, VM_EXIT_POWEROFF, "guest powered off");
		else if (run->system_event.type == KVM_SYSTEM_EVENT_RESET)
			vm_request_stop(vm, VM_EXIT_RESET, "guest reset");
		else
			vm_request_stop(vm, VM_EXIT_ERROR, "vcpu %u: system event %s", v->id,
					system_event_name(run->system_event.type));
		return false;
	case KVM_EXIT_HLT:
		/* Only without an in-kernel LAPIC; nothing can wake the vCPU then. */
		vm_request_stop(vm, VM_EXIT_ERROR, "vcpu %u: halted with no interrupt source",
				v->id);
		return false;
	case KVM_EXIT_FAIL_ENTRY:
		vm_request_stop(vm, VM_EXIT_ERROR, "vcpu %u: VM entry failed, reason 0x%llx", v->id,
				(unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		return false;
	default:
		v->exits[VCPU_EXIT_OTHER]++;
		vm_request_stop(vm, VM_EXIT_ERROR, "vcpu %u: unhandled KVM exit %u", v->id,
				run->exit_reason);
		return false;
	}
}

/* Parks here while the VM is paused; returns false once the VM is stopping. */
static bool vcpu_checkpoint(struct vcpu *v)
{
	struct vm *vm = v->vm;
	bool go;

	pthread_mutex_lock(&vm->lock);
	while (vm->pause_req && !vm->stop_req) {
		if (!v->parked) {
			v->parked = true;
			vm->nparked++;
			pthread_cond_broadcast(&vm->cond);
		}
		pthread_cond_wait(&vm->cond, &vm->lock);
	}
	if (v->parked) {
		v->parked = false;
		vm->nparked--;
	}
	go = !vm->stop_req;
	/* Cleared under the lock: a kick after this point sets it again before signalling. */
	v->run->immediate_exit = 0;
	pthread_mutex_unlock(&vm->lock);
	return go;
}

/* On kvm_pvm every guest timer tick is emulated ring-0 code costing tens of ms of host CPU. A
 * vCPU thread starved by other host work then spends its whole share in tick handlers, and with
 * 2+ vCPUs Linux's stop_machine() (the clocksource switch at fs_initcall) spins on one CPU
 * waiting for the other to leave them. Weighting the vCPU threads higher than ordinary host
 * work keeps them in step; LVMM_VCPU_NICE=N overrides (0 leaves the default weight). */
static void vcpu_set_priority(struct vcpu *v)
{
	const char *env = getenv("LVMM_VCPU_NICE");
	/* Linux only: a guest whose APs start at its entry (the bench guest) has no ticks to keep
	 * in step, and its polling vCPUs raised above the storage backend would starve it. */
	long nice = v->vm->ap_manual && !v->vm->boot.ap_entry ? HOSTCOMPAT_PVM_VCPU_NICE : 0;

	if (env && *env)
		nice = strtol(env, NULL, 10);
	if (!nice || nice < -20 || nice > 19)
		return;
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), (int)nice) && v->id == 0)
		fprintf(stderr, "lvmm: vcpu threads: nice %ld: %s (left at the default)\n", nice,
			strerror(errno));
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct vm *vm = v->vm;
	sigset_t set;
	char name[16], err[160];

	/* cloud-hypervisor's name: Kata finds the threads to pin by matching ^vcpu[0-9]+$ */
	snprintf(name, sizeof(name), "vcpu%u", v->id);
	pthread_setname_np(pthread_self(), name);
	sigemptyset(&set);
	sigaddset(&set, vcpu_kick_signal);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	vcpu_set_priority(v);
	/* Before the first KVM_RUN: from here on the guest can reach device code on this thread. */
	if (seccomp_thread_install(SECCOMP_VCPU, err, sizeof(err))) {
		vm_request_stop(vm, VM_EXIT_ERROR, "vcpu %u: %s", v->id, err);
		goto out;
	}

	if (vm->ap_manual && v->id && !vm->boot.ap_entry && !vm->restored) {
		if (!smp_ap_wait(v))
			goto out;
		pthread_mutex_lock(&vm->lock);
		v->ap_up = true;
		pthread_mutex_unlock(&vm->lock);
	}
	while (vcpu_checkpoint(v)) {
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				v->exits[VCPU_EXIT_INTR]++;
				if (v->dump_seen != vm->dump_gen) {
					v->dump_seen = vm->dump_gen;
					vcpu_dump(v);
				}
				vcpu_profile_sample(v);
				continue;
			}
			vm_request_stop(vm, VM_EXIT_ERROR, "vcpu %u: KVM_RUN: %s", v->id,
					strerror(errno));
			break;
		}
		if (!vcpu_handle_exit(v))
			break;
	}
out:
	pthread_mutex_lock(&vm->lock);
	vm->nthreads--;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	return NULL;
}

void vcpu_dump(struct vcpu *v)
{
	struct kvm_regs r;
	struct kvm_sregs s;
	struct kvm_mp_state mp = {0};

	if (ioctl(v->fd, KVM_GET_REGS, &r) || ioctl(v->fd, KVM_GET_SREGS, &s))
		return;
	ioctl(v->fd, KVM_GET_MP_STATE, &mp);
	fprintf(stderr,
		"lvmm: vcpu %u: rip 0x%llx rsp 0x%llx rflags 0x%llx cs 0x%x cr3 0x%llx mp %u "
		"exits io %llu mmio %llu intr %llu emul %llu\n",
		v->id, (unsigned long long)r.rip, (unsigned long long)r.rsp,
		(unsigned long long)r.rflags, s.cs.selector, (unsigned long long)s.cr3, mp.mp_state,
		(unsigned long long)v->exits[VCPU_EXIT_IO],
		(unsigned long long)v->exits[VCPU_EXIT_MMIO],
		(unsigned long long)v->exits[VCPU_EXIT_INTR],
		(unsigned long long)v->exits[VCPU_EXIT_EMUL]);
}

/* LVMM_PROFILE=FILE,HZ,stack: after the RIP, the words of the guest's stack (64 from RSP, up to
 * the end of its page) that point into the kernel's text, innermost first: return addresses and
 * stale words alike, as a guessing unwinder sees them; enough to tell a function's callers apart.
 * The stack's address is translated by KVM_TRANSLATE; a stack KVM cannot translate gives none. */
static void vcpu_profile_stack(struct vcpu *v, uint64_t rsp)
{
	struct kvm_translation t = {.linear_address = rsp};
	const uint8_t *w;
	unsigned n, i;
	uint64_t word;

	if (ioctl(v->fd, KVM_TRANSLATE, &t) || !t.valid)
		return;
	n = (unsigned)((4096 - (t.physical_address & 4095)) / 8);
	if (n > 64)
		n = 64;
	w = gmem_ptr(&v->vm->gmem, t.physical_address, (uint64_t)n * 8);
	if (!w)
		return;
	/* the guest picks RSP: its words need not be aligned */
	for (i = 0; i < n; i++) {
		memcpy(&word, w + (size_t)i * 8, sizeof(word));
		if (word >= 0xffffffff80000000ull && word < 0xffffffffc0000000ull)
			fprintf(v->vm->prof_fp, " %llx", (unsigned long long)word);
	}
}

/* LVMM_PROFILE: a "vcpu rip" line when the profiling thread asked for a new sample since the last
 * one; tools/profile-guest.sh turns them into symbols. */
void vcpu_profile_sample(struct vcpu *v)
{
	unsigned gen = __atomic_load_n(&v->vm->prof_gen, __ATOMIC_RELAXED);
	struct kvm_regs r;

	if (v->prof_seen == gen)
		return;
	v->prof_seen = gen;
	if (!v->vm->prof_fp || ioctl(v->fd, KVM_GET_REGS, &r))
		return;
	fprintf(v->vm->prof_fp, "%u %llx", v->id, (unsigned long long)r.rip);
	if (v->vm->prof_stack)
		vcpu_profile_stack(v, r.rsp);
	fputc('\n', v->vm->prof_fp);
}

int vcpu_start(struct vcpu *v, char *err, unsigned errlen)
{
	int ret;

	pthread_mutex_lock(&v->vm->lock);
	v->vm->nthreads++;
	pthread_mutex_unlock(&v->vm->lock);
	ret = pthread_create(&v->thread, NULL, vcpu_thread, v);
	if (ret) {
		pthread_mutex_lock(&v->vm->lock);
		v->vm->nthreads--;
		pthread_mutex_unlock(&v->vm->lock);
		snprintf(err, errlen, "vcpu %u: thread: %s", v->id, strerror(ret));
		return -ret;
	}
	v->thread_started = true;
	return 0;
}

void vcpu_destroy(struct vcpu *v)
{
	if (v->run)
		munmap(v->run, v->run_size);
	v->run = NULL;
	if (v->fd >= 0)
		close(v->fd);
	v->fd = -1;
}
