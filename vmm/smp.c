/* Application processors on kvm_pvm hosts, where INIT/SIPI through the in-kernel LAPIC never
 * starts an AP: when Linux arms the warm-reset vector for the next CPU, lvmm finds the kernel's
 * real-mode trampoline header and starts that vCPU directly in 64-bit mode at the trampoline's
 * long-mode target (secondary_startup_64), with the trampoline's own page table, EFER and CR4. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>

#include "smp.h"
#include "vm_internal.h"

#define WARM_RESET_VECTOR     0x467ULL /* 40:67, offset then segment */
#define CMOS_SHUTDOWN_JMP467  0x0a
#define LOW_MEM_END	      0x100000ULL
#define TRAMPOLINE_SCAN_PAGES 32
#define LIDT_RIPREL	      "\x0f\x01\x1d" /* first bytes of trampoline_start64 */

#define CR0_LINUX 0x80050033ULL /* PE MP ET NE WP AM PG, Linux's CR0_STATE */
#define EFER_LME  0x100ULL
#define EFER_LMA  0x400ULL

static bool smp_debug(void)
{
	return getenv("LVMM_DEBUG_SMP") != NULL;
}

static void smp_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static bool smp_stopping(struct vm *vm)
{
	bool s;

	pthread_mutex_lock(&vm->lock);
	s = vm->stop_req;
	pthread_mutex_unlock(&vm->lock);
	return s;
}

void smp_warm_reset_write(struct vm *vm, uint8_t status)
{
	if (!vm->ap_manual || status != CMOS_SHUTDOWN_JMP467)
		return;
	pthread_mutex_lock(&vm->lock);
	vm->ap_requests++;
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

/* Finds struct real_mode_header (text_start, ro_end, trampoline_start, trampoline_header,
 * [sev_es_trampoline_start], trampoline_start64, trampoline_pgd) below start_ip. */
int smp_find_target(const struct guest_mem *gm, uint64_t start_ip, struct smp_target *t)
{
	uint64_t page = start_ip & ~0xfffULL, hdr = 0;
	uint32_t w[7];
	unsigned i, k;
	uint8_t code[3];

	for (i = 0; i < TRAMPOLINE_SCAN_PAGES && page < LOW_MEM_END; i++, page -= 0x1000) {
		if (gmem_read(gm, page, w, sizeof(w)))
			return -EFAULT;
		if (w[2] == start_ip && w[0] <= start_ip && w[1] > start_ip && w[3] < LOW_MEM_END) {
			hdr = page;
			break;
		}
		if (!page)
			break;
	}
	if (!hdr)
		return -ENOENT;
	/* trampoline_start64 is w[4], or w[5] when the kernel has SEV support. */
	for (k = 4; k <= 5; k++)
		if (w[k] < LOW_MEM_END && !gmem_read(gm, w[k], code, 3) &&
		    !memcmp(code, LIDT_RIPREL, 3))
			break;
	if (k > 5)
		return -ENOEXEC;
	t->cr3 = w[k + 1];
	/* struct trampoline_header: u64 start, u64 efer, u32 cr4, ... */
	if (gmem_read(gm, w[3], &t->rip, 8) || gmem_read(gm, w[3] + 8, &t->efer, 8) ||
	    gmem_read(gm, w[3] + 16, &w[0], 4))
		return -EFAULT;
	t->cr4 = w[0];
	if (smp_debug())
		fprintf(stderr,
			"lvmm: smp: header 0x%llx start 0x%llx pgd 0x%llx efer 0x%llx "
			"cr4 0x%llx\n",
			(unsigned long long)hdr, (unsigned long long)t->rip,
			(unsigned long long)t->cr3, (unsigned long long)t->efer,
			(unsigned long long)t->cr4);
	return t->rip && t->cr3 ? 0 : -ENOEXEC;
}

/* Lets Linux's INIT and SIPIs land first, so they cannot reset the AP once it runs. */
static void smp_let_ipis_pass(struct vcpu *v)
{
	struct kvm_mp_state mp;
	unsigned ms;

	for (ms = 0; ms < 200; ms++) {
		if (ioctl(v->fd, KVM_GET_MP_STATE, &mp))
			return;
		if (mp.mp_state == KVM_MP_STATE_RUNNABLE ||
		    mp.mp_state == KVM_MP_STATE_SIPI_RECEIVED)
			break;
		smp_sleep_ms(1);
	}
	if (smp_debug())
		fprintf(stderr, "lvmm: smp: vcpu %u mp_state %u after %u ms\n", v->id, mp.mp_state,
			ms);
	smp_sleep_ms(5); /* the second SIPI, ignored outside wait-for-SIPI */
}

static int smp_start(struct vcpu *v, const struct smp_target *t)
{
	struct kvm_mp_state mp = {.mp_state = KVM_MP_STATE_RUNNABLE};
	struct kvm_sregs s;
	struct kvm_regs r;

	if (ioctl(v->fd, KVM_GET_SREGS, &s))
		return -errno;
	/* Same flat long-mode segments as the boot CPU (the boot GDT is still in place). */
	memset(&s.cs, 0, sizeof(s.cs));
	s.cs.selector = 0x10;
	s.cs.limit = 0xffffffff;
	s.cs.type = 0xb;
	s.cs.present = s.cs.s = s.cs.g = s.cs.l = 1;
	memset(&s.ds, 0, sizeof(s.ds));
	s.ds.selector = 0x18;
	s.ds.limit = 0xffffffff;
	s.ds.type = 0x3;
	s.ds.present = s.ds.s = s.ds.g = s.ds.db = 1;
	s.es = s.fs = s.gs = s.ss = s.ds;
	memset(&s.tr, 0, sizeof(s.tr));
	s.tr.selector = 0x20;
	s.tr.limit = 0x67;
	s.tr.type = 0xb;
	s.tr.present = 1;
	s.gdt.base = VM_BOOT_GDT;
	s.gdt.limit = 6 * 8 - 1;
	s.idt.base = 0;
	s.idt.limit = 0;
	s.cr0 = CR0_LINUX;
	s.cr3 = t->cr3;
	s.cr4 = t->cr4;
	s.efer = t->efer | EFER_LME | EFER_LMA;
	if (ioctl(v->fd, KVM_SET_SREGS, &s))
		return -errno;
	memset(&r, 0, sizeof(r));
	r.rip = t->rip;
	/* secondary_startup_64 calls verify_cpu before it loads its own stack: any identity-
	 * mapped low page does (the trampoline page table maps low memory 1:1). */
	r.rsp = VM_BOOT_STACK;
	r.rflags = 0x2;
	if (ioctl(v->fd, KVM_SET_REGS, &r))
		return -errno;
	return ioctl(v->fd, KVM_SET_MP_STATE, &mp) ? -errno : 0;
}

bool smp_ap_wait(struct vcpu *v)
{
	struct vm *vm = v->vm;
	struct smp_target t;
	uint16_t vec[2] = {0, 0};
	uint64_t start_ip;
	unsigned ms;
	int ret;

	/* A waiting AP counts as parked: vm_pause() need not wake it, and it stays put while
	 * the VM is paused. */
	pthread_mutex_lock(&vm->lock);
	v->parked = true;
	vm->nparked++;
	pthread_cond_broadcast(&vm->cond);
	while (!vm->stop_req && (vm->ap_requests < v->id || vm->pause_req))
		pthread_cond_wait(&vm->cond, &vm->lock);
	v->parked = false;
	vm->nparked--;
	pthread_mutex_unlock(&vm->lock);
	/* Linux writes 40:67 right after the CMOS byte; plain memory, so poll for it. */
	for (ms = 0; ms < 2000 && !smp_stopping(vm); ms++) {
		if (!gmem_read(&vm->gmem, WARM_RESET_VECTOR, vec, sizeof(vec)) &&
		    (vec[0] || vec[1]))
			break;
		smp_sleep_ms(1);
	}
	if (smp_stopping(vm))
		return false;
	start_ip = ((uint64_t)vec[1] << 4) + vec[0];
	smp_let_ipis_pass(v);
	ret = smp_find_target(&vm->gmem, start_ip, &t);
	if (!ret)
		ret = smp_start(v, &t);
	if (ret) {
		fprintf(stderr, "lvmm: vcpu %u: cannot start the AP at trampoline 0x%llx: %s\n",
			v->id, (unsigned long long)start_ip, strerror(-ret));
		pthread_mutex_lock(&vm->lock);
		v->parked = true;
		vm->nparked++;
		pthread_cond_broadcast(&vm->cond);
		while (!vm->stop_req)
			pthread_cond_wait(&vm->cond, &vm->lock);
		v->parked = false;
		vm->nparked--;
		pthread_mutex_unlock(&vm->lock);
		return false;
	}
	return true;
}
