/* The snapshot state file (snapshot_fmt.h): building it in memory, and checking every byte of
 * one read back before a single field is used. A snapshot file is untrusted input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot_fmt.h"

#define SNAP_ALIGN(n) (((n) + 7) & ~(uint64_t)7)

uint64_t snap_hash(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

bool snap_all_zero(const void *p, size_t n)
{
	static const uint8_t zero[4096];
	const uint8_t *b = p;

	for (size_t off = 0; off < n; off += sizeof(zero)) {
		size_t k = n - off < sizeof(zero) ? n - off : sizeof(zero);

		if (memcmp(b + off, zero, k))
			return false;
	}
	return true;
}

const char *snap_type_name(uint32_t type)
{
	switch (type) {
	case SNAP_VM_CLOCK:
		return "clock";
	case SNAP_VM_PIC_MASTER:
		return "pic-master";
	case SNAP_VM_PIC_SLAVE:
		return "pic-slave";
	case SNAP_VM_IOAPIC_KVM:
		return "ioapic";
	case SNAP_VM_PIT:
		return "pit";
	case SNAP_VM_IOAPIC_USER:
		return "ioapic-user";
	case SNAP_VM_SERIAL:
		return "serial";
	case SNAP_VM_LEGACY:
		return "legacy";
	case SNAP_VM_TSC:
		return "tsc";
	case SNAP_VCPU_REGS:
		return "regs";
	case SNAP_VCPU_SREGS:
		return "sregs";
	case SNAP_VCPU_FPU:
		return "fpu";
	case SNAP_VCPU_XSAVE:
		return "xsave";
	case SNAP_VCPU_LAPIC:
		return "lapic";
	case SNAP_VCPU_MSRS:
		return "msrs";
	case SNAP_VCPU_MP_STATE:
		return "mp-state";
	case SNAP_VCPU_EVENTS:
		return "vcpu-events";
	case SNAP_VCPU_XCRS:
		return "xcrs";
	case SNAP_VCPU_DEBUGREGS:
		return "debugregs";
	case SNAP_DEVICE:
		return "device";
	default:
		return "unknown";
	}
}

uint64_t snap_type_len(uint32_t type)
{
	switch (type) {
	case SNAP_VM_CLOCK:
		return SNAP_LEN_CLOCK;
	case SNAP_VM_PIC_MASTER:
	case SNAP_VM_PIC_SLAVE:
	case SNAP_VM_IOAPIC_KVM:
		return SNAP_LEN_IRQCHIP;
	case SNAP_VM_PIT:
		return SNAP_LEN_PIT;
	case SNAP_VM_IOAPIC_USER:
		return SNAP_LEN_IOAPIC;
	case SNAP_VM_SERIAL:
		return SNAP_LEN_SERIAL;
	case SNAP_VM_LEGACY:
		return SNAP_LEN_LEGACY;
	case SNAP_VM_TSC:
		return SNAP_LEN_TSC;
	case SNAP_VCPU_REGS:
		return SNAP_LEN_REGS;
	case SNAP_VCPU_SREGS:
		return SNAP_LEN_SREGS;
	case SNAP_VCPU_FPU:
		return SNAP_LEN_FPU;
	case SNAP_VCPU_XSAVE:
		return SNAP_LEN_XSAVE;
	case SNAP_VCPU_LAPIC:
		return SNAP_LEN_LAPIC;
	case SNAP_VCPU_MP_STATE:
		return SNAP_LEN_MP_STATE;
	case SNAP_VCPU_EVENTS:
		return SNAP_LEN_EVENTS;
	case SNAP_VCPU_XCRS:
		return SNAP_LEN_XCRS;
	case SNAP_VCPU_DEBUGREGS:
		return SNAP_LEN_DEBUGREGS;
	default:
		return 0; /* MSRs, devices */
	}
}

void snap_mem_trailer_make(struct snap_mem_trailer *t, uint64_t memory,
			   const uint8_t id[SNAP_ID_LEN])
{
	memset(t, 0, sizeof(*t));
	memcpy(t->magic, SNAP_MEM_MAGIC, sizeof(t->magic));
	t->memory = memory;
	memcpy(t->id, id, SNAP_ID_LEN);
}

int snap_mem_trailer_check(const struct snap_mem_trailer *t, const struct snap_header *h, char *err,
			   unsigned errlen)
{
	static const uint64_t zero[4];

	if (memcmp(t->magic, SNAP_MEM_MAGIC, sizeof(t->magic)) ||
	    memcmp(t->reserved, zero, sizeof(zero))) {
		snprintf(err, errlen,
			 "memory.bin: no snapshot trailer after the RAM (not a memory "
			 "file of this format)");
		return -EINVAL;
	}
	if (t->memory != h->memory) {
		snprintf(err, errlen,
			 "memory.bin: its trailer says %llu bytes of RAM, the state "
			 "file %llu",
			 (unsigned long long)t->memory, (unsigned long long)h->memory);
		return -EINVAL;
	}
	if (memcmp(t->id, h->id, SNAP_ID_LEN)) {
		snprintf(err, errlen,
			 "memory.bin belongs to another snapshot (its snapshot id is "
			 "not the state file's)");
		return -EINVAL;
	}
	return 0;
}

static int snap_is_vcpu(uint32_t type)
{
	return type >= SNAP_VCPU_REGS && type <= SNAP_VCPU_LAST;
}

void snap_writer_init(struct snap_writer *w)
{
	memset(w, 0, sizeof(*w));
	w->len = sizeof(struct snap_header);
}

static void snap_reserve(struct snap_writer *w, size_t more)
{
	size_t cap = w->cap ? w->cap : 64 * 1024;
	uint8_t *b;

	if (w->err)
		return;
	if (w->len + more > SNAP_MAX_FILE) {
		w->err = -E2BIG;
		return;
	}
	while (cap < w->len + more)
		cap *= 2;
	if (cap == w->cap && w->buf)
		return;
	b = realloc(w->buf, cap);
	if (!b) {
		w->err = -ENOMEM;
		return;
	}
	if (!w->buf)
		memset(b, 0, sizeof(struct snap_header));
	w->buf = b;
	w->cap = cap;
}

static void snap_put2(struct snap_writer *w, uint32_t type, uint32_t index, const void *a,
		      size_t alen, const void *b, size_t blen)
{
	struct snap_section s = {.type = type, .index = index, .len = alen + blen};
	size_t pad = (size_t)(SNAP_ALIGN(s.len) - s.len);

	if (s.len > SNAP_MAX_SECTION || w->nsections >= SNAP_MAX_SECTIONS) {
		if (!w->err)
			w->err = -E2BIG;
		return;
	}
	snap_reserve(w, sizeof(s) + s.len + pad);
	if (w->err)
		return;
	memcpy(w->buf + w->len, &s, sizeof(s));
	w->len += sizeof(s);
	if (alen)
		memcpy(w->buf + w->len, a, alen);
	w->len += alen;
	if (blen)
		memcpy(w->buf + w->len, b, blen);
	w->len += blen;
	memset(w->buf + w->len, 0, pad);
	w->len += pad;
	w->nsections++;
}

void snap_put(struct snap_writer *w, uint32_t type, uint32_t index, const void *data, size_t len)
{
	snap_put2(w, type, index, data, len, NULL, 0);
}

void snap_put_device(struct snap_writer *w, uint32_t index, const char *id, const char *model,
		     uint32_t slot, const void *data, size_t len)
{
	struct snap_dev_head h;

	memset(&h, 0, sizeof(h));
	h.slot = slot;
	snprintf(h.id, sizeof(h.id), "%s", id);
	snprintf(h.model, sizeof(h.model), "%s", model);
	snap_put2(w, SNAP_DEVICE, index, &h, sizeof(h), data, len);
}

int snap_finish(struct snap_writer *w, uint32_t ncpus, uint64_t memory, uint64_t config_hash)
{
	struct snap_header h;

	snap_reserve(w, 0);
	if (w->err)
		return w->err;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SNAP_MAGIC, sizeof(h.magic));
	h.version = SNAP_VERSION;
	h.ncpus = ncpus;
	h.memory = memory;
	h.config_hash = config_hash;
	h.nsections = w->nsections;
	h.payload_len = w->len - sizeof(h);
	h.payload_hash = snap_hash(w->buf + sizeof(h), w->len - sizeof(h));
	memcpy(h.id, w->id, SNAP_ID_LEN);
	memcpy(w->buf, &h, sizeof(h));
	return 0;
}

void snap_writer_free(struct snap_writer *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

int snap_parse(const void *buf, size_t len, struct snap_reader *r, char *err, unsigned errlen)
{
	const uint8_t *p = buf;
	uint64_t off;
	unsigned i, k;

	memset(r, 0, sizeof(*r));
	if (len < sizeof(r->h)) {
		snprintf(err, errlen, "state file: %zu bytes, shorter than its %zu-byte header",
			 len, sizeof(r->h));
		return -EINVAL;
	}
	memcpy(&r->h, p, sizeof(r->h));
	if (memcmp(r->h.magic, SNAP_MAGIC, sizeof(r->h.magic))) {
		snprintf(err, errlen, "state file: not an lvmm snapshot (bad magic)");
		return -EINVAL;
	}
	if (r->h.version != SNAP_VERSION) {
		/* version 1's header is shorter: nothing past the version is read */
		snprintf(err, errlen,
			 "state file: format version %u%s, this lvmm reads version %u only",
			 r->h.version, r->h.version < SNAP_VERSION ? " (an older lvmm's)" : "",
			 SNAP_VERSION);
		return -EINVAL;
	}
	if (r->h.flags) {
		snprintf(err, errlen, "state file: unknown flags 0x%x", r->h.flags);
		return -EINVAL;
	}
	if (r->h.payload_len != len - sizeof(r->h)) {
		snprintf(err, errlen,
			 "state file: %zu bytes after the header, the header says %llu (truncated "
			 "or extended)",
			 len - sizeof(r->h), (unsigned long long)r->h.payload_len);
		return -EINVAL;
	}
	if (snap_hash(p + sizeof(r->h), len - sizeof(r->h)) != r->h.payload_hash) {
		snprintf(err, errlen, "state file: checksum mismatch (the file is corrupt)");
		return -EINVAL;
	}
	if (!r->h.ncpus || r->h.ncpus > SNAP_MAX_CPUS) {
		snprintf(err, errlen, "state file: %u vCPUs is outside 1..%u", r->h.ncpus,
			 SNAP_MAX_CPUS);
		return -EINVAL;
	}
	if (r->h.nsections > SNAP_MAX_SECTIONS) {
		snprintf(err, errlen, "state file: %u sections, at most %u", r->h.nsections,
			 SNAP_MAX_SECTIONS);
		return -EINVAL;
	}
	r->sect = calloc(r->h.nsections ? r->h.nsections : 1, sizeof(*r->sect));
	if (!r->sect) {
		snprintf(err, errlen, "state file: out of memory");
		return -ENOMEM;
	}
	off = sizeof(r->h);
	for (i = 0; i < r->h.nsections; i++) {
		struct snap_section s;

		if (len - off < sizeof(s)) {
			snprintf(err, errlen, "state file: section %u of %u lies past the end", i,
				 r->h.nsections);
			goto bad;
		}
		memcpy(&s, p + off, sizeof(s));
		off += sizeof(s);
		if (s.len > SNAP_MAX_SECTION || SNAP_ALIGN(s.len) > len - off) {
			snprintf(err, errlen,
				 "state file: section %u (%s %u): length %llu overruns the file", i,
				 snap_type_name(s.type), s.index, (unsigned long long)s.len);
			goto bad;
		}
		if (!strcmp(snap_type_name(s.type), "unknown")) {
			/* a new kind of state comes with a new format version */
			snprintf(err, errlen, "state file: section %u has unknown type %u", i,
				 s.type);
			goto bad;
		}
		if (snap_type_len(s.type) && s.len != snap_type_len(s.type)) {
			snprintf(
			    err, errlen,
			    "state file: section %u (%s %u): %llu bytes, the format's are %llu", i,
			    snap_type_name(s.type), s.index, (unsigned long long)s.len,
			    (unsigned long long)snap_type_len(s.type));
			goto bad;
		}
		if (s.type == SNAP_VCPU_MSRS &&
		    (s.len % SNAP_LEN_MSR || s.len / SNAP_LEN_MSR > SNAP_MAX_MSRS)) {
			snprintf(
			    err, errlen,
			    "state file: section %u (msrs %u): %llu bytes, not a list of at most "
			    "%u MSRs",
			    i, s.index, (unsigned long long)s.len, SNAP_MAX_MSRS);
			goto bad;
		}
		if (s.type == SNAP_DEVICE && s.len < sizeof(struct snap_dev_head)) {
			snprintf(err, errlen,
				 "state file: section %u (device %u): %llu bytes, shorter than its "
				 "head",
				 i, s.index, (unsigned long long)s.len);
			goto bad;
		}
		if (snap_is_vcpu(s.type) && s.index >= r->h.ncpus) {
			snprintf(err, errlen,
				 "state file: %s of vCPU %u, but the snapshot has %u vCPUs",
				 snap_type_name(s.type), s.index, r->h.ncpus);
			goto bad;
		}
		for (k = 0; k < i; k++)
			if (r->sect[k].type == s.type && r->sect[k].index == s.index) {
				snprintf(err, errlen, "state file: section %s %u appears twice",
					 snap_type_name(s.type), s.index);
				goto bad;
			}
		r->sect[i] = (struct snap_ref){
		    .type = s.type, .index = s.index, .data = p + off, .len = s.len};
		off += SNAP_ALIGN(s.len);
	}
	if (off != len) {
		snprintf(err, errlen, "state file: %llu stray bytes after the last section",
			 (unsigned long long)(len - off));
		goto bad;
	}
	r->n = r->h.nsections;
	return 0;
bad:
	snap_reader_free(r);
	return -EINVAL;
}

void snap_reader_free(struct snap_reader *r)
{
	free(r->sect);
	r->sect = NULL;
	r->n = 0;
}

const struct snap_ref *snap_find(const struct snap_reader *r, uint32_t type, uint32_t index)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->sect[i].type == type && r->sect[i].index == index)
			return &r->sect[i];
	return NULL;
}

int snap_get(const struct snap_reader *r, uint32_t type, uint32_t index, void *dst, size_t size,
	     char *err, unsigned errlen)
{
	const struct snap_ref *s = snap_find(r, type, index);

	if (!s) {
		snprintf(err, errlen, "state file: no %s section %u", snap_type_name(type), index);
		return -ENOENT;
	}
	if (s->len != size) {
		snprintf(err, errlen, "state file: %s section %u has %llu bytes, expected %zu",
			 snap_type_name(type), index, (unsigned long long)s->len, size);
		return -EINVAL;
	}
	memcpy(dst, s->data, size);
	return 0;
}
