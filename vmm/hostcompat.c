/* kvm_pvm host detection and the pure helpers behind lvmm's emulation-failure handling:
 * decoding the few instructions lvmm completes itself, and reading code through guest paging. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostcompat.h"

#define CR0_PG	 (1ULL << 31)
#define CR4_PSE	 (1ULL << 4)
#define CR4_PAE	 (1ULL << 5)
#define CR4_LA57 (1ULL << 12)
#define EFER_LMA (1ULL << 10)
#define PTE_P	 1ULL
#define PTE_PS	 (1ULL << 7)
#define PTE_ADDR 0x000ffffffffff000ULL

bool hostcompat_decide(const char *env, bool pvm_module_present)
{
	if (env && !strcmp(env, "on"))
		return true;
	if (env && !strcmp(env, "off"))
		return false;
	return pvm_module_present;
}

bool hostcompat_active(void)
{
	/* decided once: a jail has no /sys (lvmm run asks before it enters one) */
	static int active = -1;

	if (active < 0)
		active = hostcompat_decide(getenv("LVMM_HOSTCOMPAT"),
					   access("/sys/module/kvm_pvm", F_OK) == 0);
	return active;
}

int hostcompat_cmdline(const char *base, bool active, char *out, size_t outlen)
{
	int n;

	if (active)
		n = snprintf(out, outlen, "%s%s%s", base, *base ? " " : "", HOSTCOMPAT_PVM_CMDLINE);
	else
		n = snprintf(out, outlen, "%s", base);
	if (n < 0 || (size_t)n >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

enum hostcompat_insn hostcompat_decode(const uint8_t *b, unsigned n, unsigned *len)
{
	if (n >= 1 && b[0] == 0xcc) {
		*len = 1;
		return HC_INSN_INT3;
	}
	if (n >= 1 && b[0] == 0x9b) {
		*len = 1;
		return HC_INSN_FWAIT;
	}
	if (n >= 3 && b[0] == 0x0f && b[1] == 0x01 && (b[2] == 0xca || b[2] == 0xcb)) {
		*len = 3;
		return b[2] == 0xca ? HC_INSN_CLAC : HC_INSN_STAC;
	}
	return HC_INSN_UNKNOWN;
}

const char *hostcompat_insn_name(enum hostcompat_insn i)
{
	switch (i) {
	case HC_INSN_INT3:
		return "int3";
	case HC_INSN_FWAIT:
		return "fwait";
	case HC_INSN_CLAC:
		return "clac";
	case HC_INSN_STAC:
		return "stac";
	default:
		return "unknown";
	}
}

static int read_entry(const struct guest_mem *gm, uint64_t gpa, unsigned size, uint64_t *e)
{
	uint32_t e32;

	if (size == 4) {
		if (gmem_read(gm, gpa, &e32, 4))
			return -EFAULT;
		*e = e32;
		return 0;
	}
	return gmem_read(gm, gpa, e, 8) ? -EFAULT : 0;
}

int hostcompat_translate(const struct guest_mem *gm, const struct hostcompat_paging *pg,
			 uint64_t linear, uint64_t *gpa)
{
	uint64_t table, e;
	int level, shift;

	if (!(pg->cr0 & CR0_PG)) {
		*gpa = linear;
		return 0;
	}
	if (!(pg->cr4 & CR4_PAE)) {
		/* 32-bit paging: two levels of 4-byte entries, optional 4 MiB pages. */
		linear &= 0xffffffffULL;
		if (read_entry(gm, (pg->cr3 & 0xfffff000ULL) + ((linear >> 22) & 0x3ff) * 4, 4, &e))
			return -EFAULT;
		if (!(e & PTE_P))
			return -EFAULT;
		if ((e & PTE_PS) && (pg->cr4 & CR4_PSE)) {
			*gpa = (e & 0xffc00000ULL) + (linear & 0x3fffff);
			return 0;
		}
		if (read_entry(gm, (e & 0xfffff000ULL) + ((linear >> 12) & 0x3ff) * 4, 4, &e))
			return -EFAULT;
		if (!(e & PTE_P))
			return -EFAULT;
		*gpa = (e & 0xfffff000ULL) + (linear & 0xfff);
		return 0;
	}
	if (pg->efer & EFER_LMA) {
		level = (pg->cr4 & CR4_LA57) ? 5 : 4;
		table = pg->cr3 & PTE_ADDR;
	} else {
		/* PAE: the 4 PDPTEs sit at CR3 bits 31:5. */
		linear &= 0xffffffffULL;
		if (read_entry(gm, (pg->cr3 & 0xffffffe0ULL) + ((linear >> 30) & 3) * 8, 8, &e))
			return -EFAULT;
		if (!(e & PTE_P))
			return -EFAULT;
		level = 2;
		table = e & PTE_ADDR;
	}
	for (; level >= 1; level--) {
		shift = 12 + 9 * (level - 1);
		if (read_entry(gm, table + ((linear >> shift) & 0x1ff) * 8, 8, &e))
			return -EFAULT;
		if (!(e & PTE_P))
			return -EFAULT;
		if (level <= 3 && level >= 2 && (e & PTE_PS)) {
			uint64_t mask = (1ULL << shift) - 1;

			*gpa = (e & PTE_ADDR & ~mask) + (linear & mask);
			return 0;
		}
		table = e & PTE_ADDR;
	}
	*gpa = table + (linear & 0xfff);
	return 0;
}

unsigned hostcompat_fetch(const struct guest_mem *gm, const struct hostcompat_paging *pg,
			  uint64_t rip, uint8_t *buf, unsigned max)
{
	unsigned got = 0;

	/* Byte by byte so an instruction crossing into an unmapped page still shows its head. */
	while (got < max) {
		uint64_t gpa;

		if (hostcompat_translate(gm, pg, rip + got, &gpa) ||
		    gmem_read(gm, gpa, &buf[got], 1))
			break;
		got++;
	}
	return got;
}

void hostcompat_format_bytes(const uint8_t *b, unsigned n, char *out, size_t outlen)
{
	size_t pos = 0;
	unsigned i;

	if (!outlen)
		return;
	out[0] = 0;
	if (!n) {
		snprintf(out, outlen, "(unreadable)");
		return;
	}
	for (i = 0; i < n && pos + 4 <= outlen; i++)
		pos += (size_t)snprintf(out + pos, outlen - pos, "%s%02x", i ? " " : "", b[i]);
}
