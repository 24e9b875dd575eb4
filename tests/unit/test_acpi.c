/* Unit tests for the ACPI tables (vmm/acpi.c, aml.c, acpi_hotplug.c): a small table dumper finds
 * the RSDP the way Linux does, follows XSDT, verifies every checksum and field, and decodes the
 * DSDT's AML (and runs iasl if present); the PCI hotplug AML is run by ACPICA's acpiexec when it is
 * installed. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acpi.h"
#include "hotplug.h"
#include "layout.h"
#include "testutil.h"

#define RAM_SIZE (16ULL << 20)

static uint8_t *ram;
static struct guest_mem gm;
static char err[512];

static void setup(void)
{
	ram = testutil_guest_ram(&gm, RAM_SIZE);
}

static void teardown(void)
{
	free(ram);
}

/* A table at gpa: must lie in the BIOS area, carry its signature and sum to zero. */
static const uint8_t *table(uint64_t gpa, const char *sig)
{
	const uint8_t *t;
	uint32_t len;

	ck_assert_uint_ge(gpa, LAYOUT_BIOS_START);
	ck_assert_uint_lt(gpa, LAYOUT_HIGH_RAM);
	t = ram + gpa;
	ck_assert_msg(!memcmp(t, sig, 4), "table at 0x%llx is '%.4s', want %s",
		      (unsigned long long)gpa, (const char *)t, sig);
	len = testutil_le32(t + 4);
	ck_assert_uint_ge(len, 36);
	ck_assert_uint_le(gpa + len, LAYOUT_HIGH_RAM);
	ck_assert_msg(testutil_sum8(t, len) == 0, "%s checksum off by %u", sig,
		      testutil_sum8(t, len));
	ck_assert_int_eq(memcmp(t + 10, "LVMM  ", 6), 0);
	return t;
}

/* Linux's scan: 16-byte steps through 0xe0000..0xfffff for "RSD PTR ". */
static uint64_t find_rsdp(void)
{
	for (uint64_t a = LAYOUT_BIOS_START; a < LAYOUT_HIGH_RAM; a += 16)
		if (!memcmp(ram + a, "RSD PTR ", 8))
			return a;
	return 0;
}

/* XSDT entry with the given signature, 0 when absent. */
static uint64_t xsdt_find(const uint8_t *xsdt, const char *sig)
{
	uint32_t n = (testutil_le32(xsdt + 4) - 36) / 8;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = testutil_le64(xsdt + 36 + 8 * i);

		if (a >= LAYOUT_BIOS_START && a < LAYOUT_HIGH_RAM && !memcmp(ram + a, sig, 4))
			return a;
	}
	return 0;
}

static const uint8_t *build(unsigned cpus, unsigned max_cpus, uint64_t *rsdp)
{
	err[0] = 0;
	ck_assert_msg(acpi_build(&gm, cpus, max_cpus, rsdp, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(find_rsdp(), *rsdp);
	return ram + *rsdp;
}

START_TEST(rsdp_xsdt)
{
	uint64_t rsdp;
	const uint8_t *r = build(2, 2, &rsdp), *x;

	ck_assert_uint_eq(rsdp % 16, 0);
	ck_assert_uint_eq(testutil_sum8(r, 20), 0);
	ck_assert_uint_eq(r[15], 2);
	ck_assert_uint_eq(testutil_le32(r + 20), 36);
	ck_assert_uint_eq(testutil_sum8(r, 36), 0);
	x = table(testutil_le64(r + 24), "XSDT");
	ck_assert_uint_eq(testutil_le32(x + 4), 36 + 3 * 8);
	ck_assert_uint_ne(xsdt_find(x, "FACP"), 0);
	ck_assert_uint_ne(xsdt_find(x, "APIC"), 0);
	ck_assert_uint_ne(xsdt_find(x, "MCFG"), 0);
	/* every table lies inside the area the E820 map reserves, below the MP table's spill */
	for (unsigned i = 0; i < 3; i++)
		ck_assert_uint_lt(testutil_le64(x + 36 + 8 * i),
				  LAYOUT_BIOS_START + ACPI_AREA_SIZE);
}
END_TEST

START_TEST(fadt_fields)
{
	uint64_t rsdp;
	const uint8_t *x = table(testutil_le64(build(1, 1, &rsdp) + 24), "XSDT");
	const uint8_t *f = table(xsdt_find(x, "FACP"), "FACP"), *facs;

	ck_assert_uint_eq(testutil_le32(f + 4), 276);
	ck_assert_uint_ge(f[8], 5);
	ck_assert_uint_eq(testutil_le16(f + 46), LAYOUT_ACPI_SCI_IRQ);
	ck_assert_uint_eq(testutil_le32(f + 48), 0); /* no SMI_CMD: already in ACPI mode */
	ck_assert_uint_eq(testutil_le32(f + 56), LAYOUT_ACPI_PM1A_EVT);
	ck_assert_uint_eq(testutil_le32(f + 64), LAYOUT_ACPI_PM1A_CNT);
	ck_assert_uint_eq(testutil_le32(f + 76), 0); /* no PM timer */
	ck_assert_uint_eq(f[88], 4);
	ck_assert_uint_eq(f[89], 2);
	ck_assert_uint_eq(f[91], 0);
	ck_assert_uint_ne(testutil_le32(f + 112) & (1u << 10), 0); /* RESET_REG_SUP */
	ck_assert_uint_eq(testutil_le32(f + 112) & (1u << 20), 0); /* not hardware-reduced */
	ck_assert_uint_eq(f[116], 1);				   /* reset register in I/O space */
	ck_assert_uint_eq(f[117], 8);
	ck_assert_uint_eq(testutil_le64(f + 120), LAYOUT_RESET_PORT);
	ck_assert_uint_eq(f[128], 6);
	/* 32- and 64-bit pointers agree */
	ck_assert_uint_eq(testutil_le32(f + 40), testutil_le64(f + 140));
	ck_assert_uint_eq(testutil_le64(f + 132), 0); /* the FACS only through the 32-bit pointer */
	ck_assert_uint_eq(f[148], 1);
	ck_assert_uint_eq(testutil_le64(f + 152), LAYOUT_ACPI_PM1A_EVT);
	ck_assert_uint_eq(f[172], 1);
	ck_assert_uint_eq(f[173], 16);
	ck_assert_uint_eq(testutil_le64(f + 176), LAYOUT_ACPI_PM1A_CNT);
	facs = ram + testutil_le32(f + 36);
	ck_assert_uint_eq(testutil_le32(f + 36) % 64, 0);
	ck_assert_int_eq(memcmp(facs, "FACS", 4), 0);
	ck_assert_uint_eq(testutil_le32(facs + 4), 64);
	table(testutil_le64(f + 140), "DSDT");
}
END_TEST

static void check_madt(unsigned cpus, unsigned max_cpus)
{
	uint64_t rsdp;
	const uint8_t *x, *m;
	unsigned enabled = 0, disabled = 0, ioapics = 0, nmis = 0, off;
	int irq0 = 0, sci = 0;

	memset(ram, 0, RAM_SIZE);
	x = table(testutil_le64(build(cpus, max_cpus, &rsdp) + 24), "XSDT");
	m = table(xsdt_find(x, "APIC"), "APIC");
	ck_assert_uint_eq(testutil_le32(m + 36), LAYOUT_LAPIC);
	ck_assert_uint_eq(testutil_le32(m + 40) & 1, 1);
	for (off = 44; off < testutil_le32(m + 4);) {
		const uint8_t *e = m + off;

		ck_assert_uint_ge(e[1], 2);
		switch (e[0]) {
		case 0:
			ck_assert_uint_eq(e[1], 8);
			ck_assert_uint_eq(e[3], enabled + disabled); /* APIC ids 0..n-1 */
			if (testutil_le32(e + 4) & 1) {
				ck_assert_uint_eq(disabled, 0); /* enabled CPUs come first */
				enabled++;
			} else {
				ck_assert_uint_eq(testutil_le32(e + 4), 2); /* online-capable */
				disabled++;
			}
			break;
		case 1:
			ck_assert_uint_eq(e[1], 12);
			ck_assert_uint_eq(testutil_le32(e + 4), LAYOUT_IOAPIC);
			ck_assert_uint_eq(testutil_le32(e + 8), 0);
			ioapics++;
			break;
		case 2:
			ck_assert_uint_eq(e[1], 10);
			ck_assert_uint_eq(e[2], 0);
			if (e[3] == 0) {
				ck_assert_uint_eq(testutil_le32(e + 4), 2);
				irq0 = 1;
			} else if (e[3] == LAYOUT_ACPI_SCI_IRQ) {
				ck_assert_uint_eq(testutil_le32(e + 4), LAYOUT_ACPI_SCI_IRQ);
				ck_assert_uint_eq(testutil_le16(e + 8),
						  0xd); /* active high, level */
				sci = 1;
			}
			break;
		case 4:
			ck_assert_uint_eq(e[1], 6);
			ck_assert_uint_eq(e[5], 1);
			nmis++;
			break;
		default:
			ck_abort_msg("unexpected MADT entry type %u", e[0]);
		}
		off += e[1];
	}
	ck_assert_uint_eq(off, testutil_le32(m + 4));
	ck_assert_uint_eq(enabled, cpus);
	ck_assert_uint_eq(enabled + disabled, max_cpus > cpus ? max_cpus : cpus);
	ck_assert_uint_eq(ioapics, 1);
	ck_assert_uint_eq(nmis, 1);
	ck_assert(irq0 && sci);
}

START_TEST(madt_cpus)
{
	check_madt(1, 1);
	check_madt(2, 2);
	check_madt(4, 8);
	check_madt(3, 0); /* max_cpus unset: boot CPUs only */
	check_madt(255, 255);
}
END_TEST

START_TEST(madt_rejects)
{
	uint64_t rsdp = 0;

	ck_assert_int_eq(acpi_build(&gm, 0, 0, &rsdp, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(acpi_build(&gm, 2, 256, &rsdp, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "(max 256)"));
	ck_assert_uint_eq(rsdp, 0);
}
END_TEST

START_TEST(mcfg_values)
{
	uint64_t rsdp;
	const uint8_t *x = table(testutil_le64(build(1, 1, &rsdp) + 24), "XSDT");
	const uint8_t *m = table(xsdt_find(x, "MCFG"), "MCFG");

	ck_assert_uint_eq(testutil_le32(m + 4), 60);
	ck_assert_uint_eq(testutil_le64(m + 44), LAYOUT_ECAM_START);
	ck_assert_uint_eq(testutil_le16(m + 52), 0);
	ck_assert_uint_eq(m[54], 0);
	ck_assert_uint_eq(m[55], LAYOUT_ECAM_BUSES - 1);
}
END_TEST

START_TEST(no_ram_for_tables)
{
	struct guest_mem small;
	uint8_t buf[4096];
	uint64_t rsdp = 0;

	gmem_init_buffer(&small, buf, sizeof(buf));
	ck_assert_int_eq(acpi_build(&small, 1, 1, &rsdp, err, sizeof(err)), -EFAULT);
	ck_assert_ptr_nonnull(strstr(err, "not guest RAM"));
}
END_TEST

/* ---- AML decoding: just the subset the DSDT uses, strictly: anything else fails ---- */

struct aml_obj {
	char path[64];
	/* 'i' integer, 'p' package of integers, 'P' package of packages (npkg: count, buf: the
	 * elements), 'b' buffer, 's' string, 'm' method (ival: flags, buf: body),
	 * 'r' SystemIO region (ival: port, pkg[0]: length), 'f' field list (buf), 'x' mutex */
	int kind;
	uint64_t ival;
	uint64_t pkg[8];
	unsigned npkg;
	const uint8_t *buf;
	size_t blen;
};

#define MAX_OBJS 256
static struct aml_obj objs[MAX_OBJS];
static unsigned nobjs;

static size_t pkglen(const uint8_t *p, size_t avail, size_t *len)
{
	unsigned extra = p[0] >> 6;
	size_t l;

	ck_assert_uint_gt(avail, extra);
	if (!extra) {
		*len = p[0] & 0x3f;
		return 1;
	}
	l = p[0] & 0xf;
	for (unsigned i = 0; i < extra; i++)
		l |= (size_t)p[1 + i] << (4 + 8 * i);
	*len = l;
	return 1 + extra;
}

static size_t integer(const uint8_t *p, size_t avail, uint64_t *v)
{
	ck_assert_uint_ge(avail, 1);
	switch (p[0]) {
	case 0x00:
		*v = 0;
		return 1;
	case 0x01:
		*v = 1;
		return 1;
	case 0x0a:
		ck_assert_uint_ge(avail, 2);
		*v = p[1];
		return 2;
	case 0x0b:
		ck_assert_uint_ge(avail, 3);
		*v = testutil_le16(p + 1);
		return 3;
	case 0x0c:
		ck_assert_uint_ge(avail, 5);
		*v = testutil_le32(p + 1);
		return 5;
	case 0x0e:
		ck_assert_uint_ge(avail, 9);
		*v = testutil_le64(p + 1);
		return 9;
	}
	ck_abort_msg("AML: opcode 0x%02x is not an integer", p[0]);
	return 0;
}

/* NameString: optional root prefix, then a single NameSeg. */
static size_t namestring(const uint8_t *p, size_t avail, char *out)
{
	size_t n = 0;

	if (p[0] == '\\') {
		*out++ = '\\';
		n = 1;
	}
	ck_assert_uint_ge(avail, n + 4);
	for (int i = 0; i < 4; i++) {
		char c = (char)p[n + i];

		ck_assert_msg((c >= 'A' && c <= 'Z') || c == '_' || (i && c >= '0' && c <= '9'),
			      "AML: bad name character 0x%02x", (unsigned char)c);
		*out++ = c;
	}
	*out = 0;
	return n + 4;
}

static void decode_terms(const uint8_t *p, size_t len, const char *scope);

static size_t decode_name(const uint8_t *p, size_t avail, const char *scope)
{
	struct aml_obj *o = &objs[nobjs++];
	char name[8];
	size_t n = 1, l, body;

	ck_assert_uint_lt(nobjs, MAX_OBJS);
	n += namestring(p + n, avail - n, name);
	snprintf(o->path, sizeof(o->path), "%s%s%s", name[0] == '\\' ? "" : scope,
		 name[0] == '\\' || !*scope ? "" : ".", name);
	ck_assert_uint_lt(n, avail);
	if (p[n] == 0x12) { /* Package */
		size_t end;

		n++;
		body = pkglen(p + n, avail - n, &l);
		end = n + l;
		ck_assert_uint_le(end, avail);
		n += body;
		o->kind = 'p';
		o->npkg = p[n++];
		if (n < end && p[n] == 0x12) {
			o->kind = 'P';
			o->buf = p + n;
			o->blen = end - n;
			return end;
		}
		ck_assert_uint_le(o->npkg, 8);
		for (unsigned i = 0; i < o->npkg; i++)
			n += integer(p + n, end - n, &o->pkg[i]);
		ck_assert_uint_eq(n, end);
	} else if (p[n] == 0x11) { /* Buffer */
		uint64_t size;
		size_t end;

		n++;
		body = pkglen(p + n, avail - n, &l);
		end = n + l;
		ck_assert_uint_le(end, avail);
		n += body;
		n += integer(p + n, end - n, &size);
		ck_assert_uint_eq(size, end - n);
		o->kind = 'b';
		o->buf = p + n;
		o->blen = (size_t)size;
		n = end;
	} else if (p[n] == 0x0d) { /* String */
		const uint8_t *z = memchr(p + n + 1, 0, avail - n - 1);

		ck_assert_ptr_nonnull(z);
		o->kind = 's';
		o->buf = p + n + 1;
		o->blen = (size_t)(z - (p + n + 1));
		n = (size_t)(z - p) + 1;
	} else {
		o->kind = 'i';
		n += integer(p + n, avail - n, &o->ival);
	}
	return n;
}

static struct aml_obj *new_obj(const char *scope, const char *name)
{
	struct aml_obj *o = &objs[nobjs++];

	ck_assert_uint_lt(nobjs, MAX_OBJS);
	memset(o, 0, sizeof(*o));
	snprintf(o->path, sizeof(o->path), "%s%s%s", scope, *scope ? "." : "", name);
	return o;
}

/* Method, OperationRegion, Field, Mutex: recorded with their bytes, bodies not decoded here
 * (acpiexec runs them in dsdt_acpiexec). */
static size_t decode_method(const uint8_t *p, size_t avail, const char *scope)
{
	size_t n = 1, l, hdr;
	struct aml_obj *o;
	char name[8];

	hdr = pkglen(p + n, avail - n, &l);
	ck_assert_uint_le(1 + l, avail);
	n += hdr;
	n += namestring(p + n, avail - n, name);
	o = new_obj(scope, name);
	o->kind = 'm';
	o->ival = p[n++];
	o->buf = p + n;
	o->blen = 1 + l - n;
	return 1 + l;
}

static size_t decode_ext(const uint8_t *p, size_t avail, const char *scope)
{
	size_t n = 2, l, hdr;
	struct aml_obj *o;
	char name[8];

	ck_assert_uint_ge(avail, 2);
	switch (p[1]) {
	case 0x80: /* OperationRegion */
		n += namestring(p + n, avail - n, name);
		o = new_obj(scope, name);
		ck_assert_uint_eq(p[n++], 1); /* SystemIO */
		o->kind = 'r';
		n += integer(p + n, avail - n, &o->ival);
		n += integer(p + n, avail - n, &o->pkg[0]);
		return n;
	case 0x81: /* Field */
		hdr = pkglen(p + n, avail - n, &l);
		ck_assert_uint_le(2 + l, avail);
		n += hdr;
		n += namestring(p + n, avail - n, name);
		o = new_obj(scope, name);
		o->kind = 'f';
		o->ival = p[n++];
		o->buf = p + n;
		o->blen = 2 + l - n;
		return 2 + l;
	case 0x01: /* Mutex */
		n += namestring(p + n, avail - n, name);
		o = new_obj(scope, name);
		o->kind = 'x';
		o->ival = p[n++];
		return n;
	}
	ck_abort_msg("AML: unexpected extended opcode 0x5b 0x%02x", p[1]);
	return 0;
}

static size_t decode_block(const uint8_t *p, size_t avail, size_t oplen, const char *scope)
{
	char name[8], path[64];
	size_t n = oplen, l, hdr;

	hdr = pkglen(p + n, avail - n, &l);
	ck_assert_uint_le(n + l, avail);
	n += hdr;
	n += namestring(p + n, avail - n, name);
	snprintf(path, sizeof(path), "%s%s%s", name[0] == '\\' ? "" : scope,
		 name[0] == '\\' || !*scope ? "" : ".", name);
	decode_terms(p + n, oplen + l - n, path);
	return oplen + l;
}

static void decode_terms(const uint8_t *p, size_t len, const char *scope)
{
	size_t n = 0;

	while (n < len) {
		if (p[n] == 0x08)
			n += decode_name(p + n, len - n, scope);
		else if (p[n] == 0x10)
			n += decode_block(p + n, len - n, 1, scope);
		else if (p[n] == 0x5b && n + 1 < len && p[n + 1] == 0x82)
			n += decode_block(p + n, len - n, 2, scope);
		else if (p[n] == 0x5b)
			n += decode_ext(p + n, len - n, scope);
		else if (p[n] == 0x14)
			n += decode_method(p + n, len - n, scope);
		else
			ck_abort_msg("AML: unexpected opcode 0x%02x at %zu", p[n], n);
	}
	ck_assert_uint_eq(n, len);
}

static const struct aml_obj *obj(const char *path)
{
	for (unsigned i = 0; i < nobjs; i++)
		if (!strcmp(objs[i].path, path))
			return &objs[i];
	ck_abort_msg("AML: %s not found", path);
	return NULL;
}

/* Walks a resource template; checks the end tag and returns the count of descriptors. */
static unsigned crs_walk(const uint8_t *b, size_t len, const uint8_t **found, uint8_t want_tag)
{
	size_t n = 0;
	unsigned count = 0;

	*found = NULL;
	while (n < len) {
		uint8_t tag = b[n];
		size_t dlen;

		if (tag & 0x80) {
			dlen = 3 + testutil_le16(b + n + 1);
		} else {
			dlen = 1 + (tag & 7);
			tag &= 0x78;
		}
		ck_assert_uint_le(n + dlen, len);
		if (tag == want_tag && !*found)
			*found = b + n;
		count++;
		n += dlen;
		if (tag == 0x78) {
			ck_assert_uint_eq(n, len);
			return count;
		}
	}
	ck_abort_msg("resource template without an end tag");
	return 0;
}

START_TEST(dsdt_aml)
{
	uint64_t rsdp;
	const uint8_t *x = table(testutil_le64(build(1, 1, &rsdp) + 24), "XSDT");
	const uint8_t *f = table(xsdt_find(x, "FACP"), "FACP");
	const uint8_t *d = table(testutil_le64(f + 140), "DSDT"), *r;
	const struct aml_obj *o;
	unsigned nwordio = 0;

	ck_assert_uint_eq(d[8], 2); /* 64-bit integers */
	nobjs = 0;
	decode_terms(d + 36, testutil_le32(d + 4) - 36, "");

	o = obj("\\_S5_");
	ck_assert_int_eq(o->kind, 'p');
	ck_assert_uint_eq(o->npkg, 4);
	ck_assert_uint_eq(o->pkg[0], LAYOUT_ACPI_S5_TYP);
	ck_assert_uint_eq(o->pkg[1], LAYOUT_ACPI_S5_TYP);

	ck_assert_uint_eq(obj("\\_SB_.PCI0._HID")->ival, 0x080ad041); /* EisaId PNP0A08 */
	ck_assert_uint_eq(obj("\\_SB_.PCI0._CID")->ival, 0x030ad041); /* EisaId PNP0A03 */
	ck_assert_uint_eq(obj("\\_SB_.PCI0._SEG")->ival, 0);
	ck_assert_uint_eq(obj("\\_SB_.PCI0._BBN")->ival, 0);
	ck_assert_uint_eq(obj("\\_SB_.MRES._HID")->ival, 0x020cd041); /* EisaId PNP0C02 */

	o = obj("\\_SB_.PCI0._CRS");
	ck_assert_int_eq(o->kind, 'b');
	ck_assert_uint_eq(crs_walk(o->buf, o->blen, &r, 0x88), 7);
	/* first word descriptor: the bus range */
	ck_assert_uint_eq(r[3], 2);
	ck_assert_uint_eq(testutil_le16(r + 8), 0);
	ck_assert_uint_eq(testutil_le16(r + 10), LAYOUT_ECAM_BUSES - 1);
	ck_assert_uint_eq(testutil_le16(r + 14), LAYOUT_ECAM_BUSES);
	for (size_t n = 0; n < o->blen;
	     n += (o->buf[n] & 0x80) ? 3 + testutil_le16(o->buf + n + 1) : 1 + (o->buf[n] & 7)) {
		const uint8_t *e = o->buf + n;

		if (e[0] == 0x88 && e[3] == 1) {
			/* I/O windows leave the config ports to the bridge itself */
			ck_assert(testutil_le16(e + 10) < LAYOUT_PCI_CONF_ADDR ||
				  testutil_le16(e + 8) > LAYOUT_PCI_CONF_DATA + 3);
			ck_assert_uint_eq(testutil_le16(e + 14),
					  testutil_le16(e + 10) - testutil_le16(e + 8) + 1);
			nwordio++;
		}
	}
	ck_assert_uint_eq(nwordio, 2);
	crs_walk(o->buf, o->blen, &r, 0x40); /* small I/O port descriptor */
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(testutil_le16(r + 2), LAYOUT_PCI_CONF_ADDR);
	ck_assert_uint_eq(r[7], 8);
	crs_walk(o->buf, o->blen, &r, 0x87);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(testutil_le32(r + 10), LAYOUT_MMIO32_START);
	ck_assert_uint_eq(testutil_le32(r + 14), LAYOUT_MMIO32_START + LAYOUT_MMIO32_SIZE - 1);
	ck_assert_uint_eq(testutil_le32(r + 22), LAYOUT_MMIO32_SIZE);
	crs_walk(o->buf, o->blen, &r, 0x8a);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(testutil_le64(r + 14), LAYOUT_MMIO64_START);
	ck_assert_uint_eq(testutil_le64(r + 22), LAYOUT_MMIO64_START + LAYOUT_MMIO64_SIZE - 1);
	ck_assert_uint_eq(testutil_le64(r + 38), LAYOUT_MMIO64_SIZE);

	o = obj("\\_SB_.MRES._CRS");
	ck_assert_uint_eq(crs_walk(o->buf, o->blen, &r, 0x86), 2);
	ck_assert_uint_eq(testutil_le32(r + 4), LAYOUT_ECAM_START);
	ck_assert_uint_eq(testutil_le32(r + 8), LAYOUT_ECAM_SIZE);
}
END_TEST

/* The DSDT's AML from a fresh build (after the 36-byte header), decoded into objs. */
static const uint8_t *dsdt_decoded(void)
{
	uint64_t rsdp;
	const uint8_t *x = table(testutil_le64(build(1, 1, &rsdp) + 24), "XSDT");
	const uint8_t *f = table(xsdt_find(x, "FACP"), "FACP");
	const uint8_t *d = table(testutil_le64(f + 140), "DSDT");

	nobjs = 0;
	decode_terms(d + 36, testutil_le32(d + 4) - 36, "");
	return d;
}

/* acpiphp's view: every slot of bus 0 but the host bridge's is a device with _ADR, _SUN and an
 * _EJ0 that hands the slot number to PHPR.PCEJ. */
START_TEST(dsdt_hotplug_slots)
{
	static const uint8_t ej0[] = {'\\', 0x2f, 3,   '_', 'S', 'B', '_', 'P', 'H', 'P',
				      'R',  'P',  'C', 'E', 'J', '_', 'S', 'U', 'N'};
	char path[64];
	const struct aml_obj *o;

	dsdt_decoded();
	for (unsigned slot = 1; slot < 32; slot++) {
		snprintf(path, sizeof(path), "\\_SB_.PCI0.S%03u._ADR", slot);
		ck_assert_uint_eq(obj(path)->ival, (uint64_t)slot << 16);
		snprintf(path, sizeof(path), "\\_SB_.PCI0.S%03u._SUN", slot);
		ck_assert_uint_eq(obj(path)->ival, slot);
		snprintf(path, sizeof(path), "\\_SB_.PCI0.S%03u._EJ0", slot);
		o = obj(path);
		ck_assert_int_eq(o->kind, 'm');
		ck_assert_uint_eq(o->ival, 1); /* one argument, not serialized */
		ck_assert_uint_eq(o->blen, sizeof(ej0));
		ck_assert_int_eq(memcmp(o->buf, ej0, sizeof(ej0)), 0);
	}
	for (unsigned i = 0; i < nobjs; i++)
		ck_assert_msg(strcmp(objs[i].path, "\\_SB_.PCI0.S000._ADR"),
			      "the host bridge's slot must not be hot-pluggable");
	o = obj("\\_SB_.PCI0.DVNT");
	ck_assert_int_eq(o->kind, 'm');
	ck_assert_uint_eq(o->ival, 2);
}
END_TEST

/* PCI0._PRT: pins A-D of slots 1-31, each once, swizzled onto the IOAPIC pins for PCI
 * (16 + (slot + pin) % 4, pin A = 0), the source Zero (a GSI: level, active low). */
START_TEST(dsdt_pci_prt)
{
	const struct aml_obj *o;
	unsigned seen[32][4] = {{0}};
	size_t n = 0;

	dsdt_decoded();
	o = obj("\\_SB_.PCI0._PRT");
	ck_assert_int_eq(o->kind, 'P');
	ck_assert_uint_eq(o->npkg, 31 * 4);
	for (unsigned i = 0; i < o->npkg; i++) {
		uint64_t addr, pin, src, gsi;
		size_t l, end;

		ck_assert_uint_lt(n, o->blen);
		ck_assert_uint_eq(o->buf[n++], 0x12);
		end = n; /* PkgLength counts itself */
		n += pkglen(o->buf + n, o->blen - n, &l);
		end += l;
		ck_assert_uint_eq(o->buf[n++], 4);
		n += integer(o->buf + n, o->blen - n, &addr);
		n += integer(o->buf + n, o->blen - n, &pin);
		n += integer(o->buf + n, o->blen - n, &src);
		n += integer(o->buf + n, o->blen - n, &gsi);
		ck_assert_uint_eq(n, end);
		ck_assert_uint_eq(addr & 0xffff, 0xffff);
		ck_assert_uint_ge(addr >> 16, 1);
		ck_assert_uint_lt(addr >> 16, 32);
		ck_assert_uint_lt(pin, 4);
		ck_assert_uint_eq(src, 0);
		ck_assert_uint_eq(gsi, 16 + ((addr >> 16) + pin) % 4);
		seen[addr >> 16][pin]++;
	}
	ck_assert_uint_eq(n, o->blen);
	for (unsigned slot = 1; slot < 32; slot++)
		for (unsigned pin = 0; pin < 4; pin++)
			ck_assert_uint_eq(seen[slot][pin], 1);
}
END_TEST

/* PHPR: the controller's ports (hotplug.h's registers as fields) and the GED's edge interrupt. */
START_TEST(dsdt_hotplug_controller)
{
	static const uint8_t fields[] = {'P', 'C', 'I', 'U', 32,  'P', 'C', 'I',
					 'D', 32,  'B', '0', 'E', 'J', 32};
	const struct aml_obj *o;
	const uint8_t *r;

	dsdt_decoded();
	o = obj("\\_SB_.PHPR.PCST");
	ck_assert_int_eq(o->kind, 'r');
	ck_assert_uint_eq(o->ival, LAYOUT_HOTPLUG_PORT);
	ck_assert_uint_eq(o->pkg[0], LAYOUT_HOTPLUG_LEN);
	ck_assert_uint_eq(HOTPLUG_REG_PCIU, 0);
	ck_assert_uint_eq(HOTPLUG_REG_PCID, 4);
	ck_assert_uint_eq(HOTPLUG_REG_B0EJ, 8);
	o = obj("\\_SB_.PHPR.PCST"); /* the region, then its field list under the same name */
	for (unsigned i = 0; i < nobjs; i++) {
		if (strcmp(objs[i].path, "\\_SB_.PHPR.PCST") || objs[i].kind != 'f')
			continue;
		ck_assert_uint_eq(objs[i].ival, 0x43); /* DWordAcc, NoLock, WriteAsZeros */
		ck_assert_uint_eq(objs[i].blen, sizeof(fields));
		ck_assert_int_eq(memcmp(objs[i].buf, fields, sizeof(fields)), 0);
		o = NULL;
	}
	ck_assert_msg(o == NULL, "no field list on PCST");
	ck_assert_int_eq(obj("\\_SB_.PHPR.BLCK")->kind, 'x');
	ck_assert_uint_eq(obj("\\_SB_.PHPR.PCEJ")->ival, 1);
	ck_assert_uint_eq(obj("\\_SB_.PHPR.PCNT")->ival, 0);
	o = obj("\\_SB_.PHPR._CRS");
	crs_walk(o->buf, o->blen, &r, 0x40);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(testutil_le16(r + 2), LAYOUT_HOTPLUG_PORT);
	ck_assert_uint_eq(r[7], LAYOUT_HOTPLUG_LEN);

	o = obj("\\_SB_.GED_._HID");
	ck_assert_int_eq(o->kind, 's');
	ck_assert_uint_eq(o->blen, 8);
	ck_assert_int_eq(memcmp(o->buf, "ACPI0013", 8), 0);
	o = obj("\\_SB_.GED_._CRS");
	ck_assert_uint_eq(crs_walk(o->buf, o->blen, &r, 0x89), 2);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(testutil_le16(r + 1), 6);
	ck_assert_uint_eq(r[3], 0x03); /* consumer, edge, active high, exclusive */
	ck_assert_uint_eq(r[4], 1);
	ck_assert_uint_eq(testutil_le32(r + 5), LAYOUT_ACPI_GED_IRQ);
	o = obj("\\_SB_.GED_._EVT");
	ck_assert_int_eq(o->kind, 'm');
	ck_assert_uint_eq(o->ival, 1);
}
END_TEST

static void write_dsdt(const char *dir)
{
	char path[600];
	uint64_t rsdp;
	const uint8_t *x = table(testutil_le64(build(1, 1, &rsdp) + 24), "XSDT");
	const uint8_t *f = table(xsdt_find(x, "FACP"), "FACP");
	const uint8_t *d = table(testutil_le64(f + 140), "DSDT");
	FILE *fp;

	snprintf(path, sizeof(path), "%s/dsdt.aml", dir);
	fp = fopen(path, "wb");
	ck_assert_ptr_nonnull(fp);
	ck_assert_uint_eq(fwrite(d, 1, testutil_le32(d + 4), fp), testutil_le32(d + 4));
	fclose(fp);
}

/* Lines of file holding needle. */
static unsigned file_count(const char *file, const char *needle)
{
	char line[512];
	unsigned n = 0;
	FILE *fp = fopen(file, "r");

	ck_assert_msg(fp != NULL, "%s missing", file);
	while (fgets(line, sizeof(line), fp))
		n += strstr(line, needle) != NULL;
	fclose(fp);
	return n;
}

/* ACPICA's interpreter runs the hotplug methods: with every byte of the controller's ports
 * reading 0x08 (slots 3, 11, 19 and 27 in each register), the GED's _EVT notifies exactly those
 * slots with device check and eject request; DVNT(0x0a, 3) asks slots 1 and 3 only; each slot's
 * _EJ0 runs without an error. */
START_TEST(dsdt_acpiexec)
{
	char dir[] = "/tmp/lvmm-acpihp-XXXXXX", cmd[1024], log[600];
	static const unsigned evt_slots[] = {3, 11, 19, 27};
	char needle[96];

	if (system("command -v acpiexec >/dev/null 2>&1")) {
		testutil_skip("test_acpi: dsdt_acpiexec: acpiexec not installed (acpica-tools)");
		return;
	}
	ck_assert_ptr_nonnull(mkdtemp(dir));
	write_dsdt(dir);
	snprintf(log, sizeof(log), "%s/evt.log", dir);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && acpiexec -fv 0x08 -b '"
		 "execute \\_SB.GED_._EVT 5; execute \\_SB.PCI0.S003._EJ0 0; "
		 "execute \\_SB.PCI0.S031._EJ0 0' dsdt.aml >evt.log 2>&1",
		 dir);
	ck_assert_msg(system(cmd) == 0, "acpiexec failed, see %s", log);
	for (unsigned i = 0; i < 4; i++) {
		snprintf(needle, sizeof(needle), "Notify on [S%03u]", evt_slots[i]);
		ck_assert_msg(file_count(log, needle) == 2, "%s: want 2 of '%s'", log, needle);
	}
	ck_assert_uint_eq(file_count(log, "(Device Check)"), 4);
	ck_assert_uint_eq(file_count(log, "(Eject Request)"), 4);
	ck_assert_msg(file_count(log, "Error") == 0 && file_count(log, "AE_") == 0,
		      "acpiexec reported an error, see %s", log);

	snprintf(log, sizeof(log), "%s/dvnt.log", dir);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && acpiexec -b 'execute \\_SB.PCI0.DVNT 0xa 3' dsdt.aml >dvnt.log 2>&1",
		 dir);
	ck_assert_msg(system(cmd) == 0, "acpiexec failed, see %s", log);
	ck_assert_uint_eq(file_count(log, "Notify on [S001]"), 1);
	ck_assert_uint_eq(file_count(log, "Notify on [S003]"), 1);
	ck_assert_uint_eq(file_count(log, "(Eject Request)"), 2);
	ck_assert_uint_eq(file_count(log, "Notify on"), 2);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ACPICA's disassembler and compiler: the DSDT decompiles, and the source compiles back with no
 * error, hotplug methods included. */
START_TEST(dsdt_iasl_roundtrip)
{
	char dir[] = "/tmp/lvmm-acpirt-XXXXXX", cmd[1024], dsl[600];

	if (system("command -v iasl >/dev/null 2>&1")) {
		testutil_skip("test_acpi: dsdt_iasl_roundtrip: iasl not installed (acpica-tools)");
		return;
	}
	ck_assert_ptr_nonnull(mkdtemp(dir));
	write_dsdt(dir);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && iasl -d dsdt.aml >d.log 2>&1 && cp dsdt.dsl rt.dsl && iasl rt.dsl "
		 ">c.log 2>&1 && grep -q 'Compilation successful. 0 Errors' c.log",
		 dir);
	ck_assert_msg(system(cmd) == 0, "iasl round trip failed, see %s", dir);
	snprintf(dsl, sizeof(dsl), "%s/dsdt.dsl", dir);
	ck_assert_uint_eq(file_count(dsl, "\\_SB.PHPR.PCEJ (_SUN)"), 31);
	ck_assert_uint_eq(file_count(dsl, "Notify (S0"), 31);
	ck_assert_uint_eq(
	    file_count(dsl, "Interrupt (ResourceConsumer, Edge, ActiveHigh, Exclusive"), 1);
	ck_assert_uint_eq(file_count(dsl, "OperationRegion (PCST, SystemIO, 0xAE00, 0x10)"), 1);
	/* the _PRT: 124 routes, slot 1's pin A on GSI 17, slot 31's pin D on GSI 18 */
	ck_assert_uint_eq(file_count(dsl, "Name (_PRT, Package (0x7C)"), 1);
	ck_assert_uint_eq(file_count(dsl, "0x0001FFFF,"), 4);
	ck_assert_uint_eq(file_count(dsl, "0x001FFFFF,"), 4);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Independent cross-check: ACPICA's disassembler must accept the DSDT without errors. */
START_TEST(dsdt_iasl)
{
	char dir[] = "/tmp/lvmm-acpi-XXXXXX", cmd[512], path[600], line[512];
	uint64_t rsdp;
	const uint8_t *x, *f, *d;
	int found_hid = 0, found_s5 = 0, found_crs = 0;
	FILE *fp;

	if (system("command -v iasl >/dev/null 2>&1")) {
		testutil_skip("test_acpi: dsdt_iasl: iasl not installed (acpica-tools)");
		return;
	}
	x = table(testutil_le64(build(1, 1, &rsdp) + 24), "XSDT");
	f = table(xsdt_find(x, "FACP"), "FACP");
	d = table(testutil_le64(f + 140), "DSDT");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/dsdt.aml", dir);
	fp = fopen(path, "wb");
	ck_assert_ptr_nonnull(fp);
	ck_assert_uint_eq(fwrite(d, 1, testutil_le32(d + 4), fp), testutil_le32(d + 4));
	fclose(fp);
	snprintf(cmd, sizeof(cmd), "cd %s && iasl -d dsdt.aml >iasl.log 2>&1", dir);
	ck_assert_msg(system(cmd) == 0, "iasl -d failed, see %s/iasl.log", dir);
	snprintf(path, sizeof(path), "%s/dsdt.dsl", dir);
	fp = fopen(path, "r");
	ck_assert_ptr_nonnull(fp);
	while (fgets(line, sizeof(line), fp)) {
		found_hid |= strstr(line, "EisaId (\"PNP0A08\")") != NULL;
		found_s5 |= strstr(line, "_S5, Package (0x04)") != NULL;
		found_crs |= strstr(line, "QWordMemory") != NULL;
	}
	fclose(fp);
	ck_assert_msg(found_hid && found_s5 && found_crs, "iasl output lacks objects, see %s",
		      path);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(aml_buffer_too_small)
{
	uint8_t buf[16];

	ck_assert_uint_eq(acpi_dsdt_aml(buf, sizeof(buf)), 0);
}
END_TEST

static Suite *acpi_suite(void)
{
	Suite *s = suite_create("acpi");
	TCase *tc = tcase_create("tables");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, rsdp_xsdt);
	tcase_add_test(tc, fadt_fields);
	tcase_add_test(tc, madt_cpus);
	tcase_add_test(tc, madt_rejects);
	tcase_add_test(tc, mcfg_values);
	tcase_add_test(tc, no_ram_for_tables);
	tcase_add_test(tc, dsdt_aml);
	tcase_add_test(tc, dsdt_iasl);
	tcase_add_test(tc, dsdt_pci_prt);
	tcase_add_test(tc, dsdt_hotplug_slots);
	tcase_add_test(tc, dsdt_hotplug_controller);
	tcase_add_test(tc, dsdt_acpiexec);
	tcase_add_test(tc, dsdt_iasl_roundtrip);
	tcase_add_test(tc, aml_buffer_too_small);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(acpi_suite());
}
