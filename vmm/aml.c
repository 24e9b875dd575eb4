/* AML encoder (aml.h): the builder, integer and name encodings, named objects, methods and
 * devices, and the resource descriptors of a _CRS (ACPI 6.4.3). */
#include <string.h>

#include "aml.h"

void aml_emit(struct aml *a, const void *p, size_t len)
{
	if (a->overflow || len > a->max - a->n) {
		a->overflow = 1;
		return;
	}
	memcpy(a->b + a->n, p, len);
	a->n += len;
}

void aml_byte(struct aml *a, uint8_t v)
{
	aml_emit(a, &v, 1);
}

static void aml_u16(struct aml *a, uint16_t v)
{
	aml_byte(a, (uint8_t)v);
	aml_byte(a, (uint8_t)(v >> 8));
}

static void aml_u32(struct aml *a, uint32_t v)
{
	aml_u16(a, (uint16_t)v);
	aml_u16(a, (uint16_t)(v >> 16));
}

static void aml_u64(struct aml *a, uint64_t v)
{
	aml_u32(a, (uint32_t)v);
	aml_u32(a, (uint32_t)(v >> 32));
}

/* PkgLength counts its own bytes plus the content: 1 byte below 64, else 2..4 bytes with the
 * low nibble in the lead byte. */
void aml_pkglen(struct aml *a, size_t content)
{
	size_t len;
	unsigned extra;

	if (content + 1 < 0x40) {
		aml_byte(a, (uint8_t)(content + 1));
		return;
	}
	for (extra = 1; extra <= 3; extra++) {
		len = content + 1 + extra;
		if (len < (1ULL << (4 + 8 * extra)))
			break;
	}
	aml_byte(a, (uint8_t)((extra << 6) | (len & 0xf)));
	for (unsigned i = 0; i < extra; i++)
		aml_byte(a, (uint8_t)(len >> (4 + 8 * i)));
}

void aml_integer(struct aml *a, uint64_t v)
{
	if (v == 0) {
		aml_byte(a, AML_ZERO);
	} else if (v <= 0xff) {
		aml_byte(a, AML_BYTE);
		aml_byte(a, (uint8_t)v);
	} else if (v <= 0xffff) {
		aml_byte(a, AML_WORD);
		aml_u16(a, (uint16_t)v);
	} else {
		aml_byte(a, AML_DWORD);
		aml_u32(a, (uint32_t)v);
	}
}

/* EISA id "PNP0A08" compressed: three 5-bit letters, then four hex digits. */
static uint32_t aml_eisaid(const char *id)
{
	uint16_t mfg = (uint16_t)(((id[0] - 0x40) & 0x1f) << 10 | ((id[1] - 0x40) & 0x1f) << 5 |
				  ((id[2] - 0x40) & 0x1f));
	uint8_t b[4];
	unsigned h[4];

	for (int i = 0; i < 4; i++) {
		char c = id[3 + i];

		h[i] = (unsigned)(c >= 'A' ? c - 'A' + 10 : c - '0') & 0xf;
	}
	b[0] = (uint8_t)(mfg >> 8);
	b[1] = (uint8_t)mfg;
	b[2] = (uint8_t)(h[0] << 4 | h[1]);
	b[3] = (uint8_t)(h[2] << 4 | h[3]);
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

void aml_name_int(struct aml *a, const char *seg, uint64_t v)
{
	aml_byte(a, AML_NAME);
	aml_emit(a, seg, 4);
	aml_integer(a, v);
}

void aml_name_eisaid(struct aml *a, const char *seg, const char *id)
{
	aml_byte(a, AML_NAME);
	aml_emit(a, seg, 4);
	aml_byte(a, AML_DWORD);
	aml_u32(a, aml_eisaid(id));
}

/* Name(seg, Buffer() { bytes }) */
void aml_name_buffer(struct aml *a, const char *seg, const uint8_t *p, size_t len)
{
	struct aml size = {.b = (uint8_t[8]){0}, .max = 8};

	aml_integer(&size, len);
	aml_byte(a, AML_NAME);
	aml_emit(a, seg, 4);
	aml_byte(a, AML_BUFFER);
	aml_pkglen(a, size.n + len);
	aml_emit(a, size.b, size.n);
	aml_emit(a, p, len);
}

/* op [ext] PkgLength name body: Scope and Device share this shape. */
void aml_block(struct aml *a, int ext, uint8_t op, const char *name, const uint8_t *body,
	       size_t len)
{
	size_t nlen = strlen(name);

	if (ext)
		aml_byte(a, AML_EXT);
	aml_byte(a, op);
	aml_pkglen(a, nlen + len);
	aml_emit(a, name, nlen);
	aml_emit(a, body, len);
}

/* NameString from a dotted path: "\\_SB_.PHPR.PCEJ", "PCIU"; every segment 4 characters. */
void aml_namestring(struct aml *a, const char *path)
{
	const char *p = path;
	size_t len, nseg;

	if (*p == '\\')
		aml_byte(a, (uint8_t)*p++);
	len = strlen(p);
	nseg = (len + 1) / 5;
	if (len % 5 != 4) {
		a->overflow = 1; /* a malformed path is a bug here: fail the whole table */
		return;
	}
	if (nseg == 2)
		aml_byte(a, AML_DUAL_NAME);
	else if (nseg > 2) {
		aml_byte(a, AML_MULTI_NAME);
		aml_byte(a, (uint8_t)nseg);
	}
	for (size_t i = 0; i < nseg; i++)
		aml_emit(a, p + 5 * i, 4);
}

/* Appends what another builder holds (its overflow carries over). */
void aml_append(struct aml *a, const struct aml *b)
{
	if (b->overflow)
		a->overflow = 1;
	else
		aml_emit(a, b->b, b->n);
}

void aml_name_string(struct aml *a, const char *seg, const char *str)
{
	aml_byte(a, AML_NAME);
	aml_emit(a, seg, 4);
	aml_byte(a, AML_STRING);
	aml_emit(a, str, strlen(str) + 1);
}

/* Method(name, nargs, NotSerialized) { body } */
void aml_method(struct aml *a, const char *name, unsigned nargs, const struct aml *body)
{
	aml_byte(a, AML_METHOD);
	aml_pkglen(a, 4 + 1 + body->n);
	aml_emit(a, name, 4);
	aml_byte(a, (uint8_t)(nargs & 7));
	aml_append(a, body);
}

/* Device(name) { body }, body in a builder */
void aml_device(struct aml *a, const char *name, const struct aml *body)
{
	if (body->overflow)
		a->overflow = 1;
	else
		aml_block(a, 1, AML_DEVICE, name, body->b, body->n);
}

void aml_acquire(struct aml *a, const char *mutex)
{
	aml_byte(a, AML_EXT);
	aml_byte(a, AML_ACQUIRE);
	aml_emit(a, mutex, 4);
	aml_u16(a, 0xffff); /* wait forever */
}

void aml_release(struct aml *a, const char *mutex)
{
	aml_byte(a, AML_EXT);
	aml_byte(a, AML_RELEASE);
	aml_emit(a, mutex, 4);
}

/* ---- resource descriptors (ACPI 6.4.3) ---- */

#define RES_WORD_ADDR	    0x88
#define RES_DWORD_ADDR	    0x87
#define RES_QWORD_ADDR	    0x8a
#define RES_MEM32_FIXED	    0x86
#define RES_IO		    0x47
#define RES_END		    0x79
#define RES_MIN_MAX_FIXED   0x0c /* producer, positive decode, min and max fixed */
#define RES_MEM_RW	    0x01
#define RES_MEM_RW_PREFETCH 0x07
#define RES_EXT_IRQ	    0x89
#define RES_IRQ_CONSUMER    0x01
#define RES_IRQ_EDGE	    0x02

void res_word(struct aml *a, uint8_t type, uint8_t tflags, uint16_t min, uint16_t max)
{
	aml_byte(a, RES_WORD_ADDR);
	aml_u16(a, 13);
	aml_byte(a, type);
	aml_byte(a, RES_MIN_MAX_FIXED);
	aml_byte(a, tflags);
	aml_u16(a, 0); /* granularity */
	aml_u16(a, min);
	aml_u16(a, max);
	aml_u16(a, 0); /* translation */
	aml_u16(a, (uint16_t)(max - min + 1));
}

void res_dword_mem(struct aml *a, uint32_t base, uint32_t len)
{
	aml_byte(a, RES_DWORD_ADDR);
	aml_u16(a, 23);
	aml_byte(a, RES_TYPE_MEM);
	aml_byte(a, RES_MIN_MAX_FIXED);
	aml_byte(a, RES_MEM_RW);
	aml_u32(a, 0);
	aml_u32(a, base);
	aml_u32(a, base + len - 1);
	aml_u32(a, 0);
	aml_u32(a, len);
}

void res_qword_mem(struct aml *a, uint64_t base, uint64_t len)
{
	aml_byte(a, RES_QWORD_ADDR);
	aml_u16(a, 43);
	aml_byte(a, RES_TYPE_MEM);
	aml_byte(a, RES_MIN_MAX_FIXED);
	aml_byte(a, RES_MEM_RW_PREFETCH);
	aml_u64(a, 0);
	aml_u64(a, base);
	aml_u64(a, base + len - 1);
	aml_u64(a, 0);
	aml_u64(a, len);
}

void res_io(struct aml *a, uint16_t port, uint8_t len)
{
	aml_byte(a, RES_IO);
	aml_byte(a, 0x01); /* 16-bit decode */
	aml_u16(a, port);
	aml_u16(a, port);
	aml_byte(a, 1);
	aml_byte(a, len);
}

void res_mem32_fixed(struct aml *a, uint32_t base, uint32_t len)
{
	aml_byte(a, RES_MEM32_FIXED);
	aml_u16(a, 9);
	aml_byte(a, RES_MEM_RW);
	aml_u32(a, base);
	aml_u32(a, len);
}

/* Extended Interrupt descriptor: one GSI, consumer, edge, active high, exclusive. */
void res_irq_edge(struct aml *a, uint32_t gsi)
{
	aml_byte(a, RES_EXT_IRQ);
	aml_u16(a, 6);
	aml_byte(a, RES_IRQ_CONSUMER | RES_IRQ_EDGE);
	aml_byte(a, 1);
	aml_u32(a, gsi);
}

void res_end(struct aml *a)
{
	aml_byte(a, RES_END);
	aml_byte(a, 0); /* checksum 0: "treat as correct" */
}
