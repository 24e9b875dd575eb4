/* AML encoder for the DSDT (ACPI 6.x): a builder over a fixed buffer, the opcodes lvmm emits, named
 * objects, methods and devices, and the resource descriptors of a _CRS (ACPI 6.4.3). A few AML
 * opcodes are enough: Name, Scope, Device, Package, Buffer and integer constants. Nested objects
 * are built inside-out so each PkgLength is known when it is emitted. */
#ifndef LVMM_AML_H
#define LVMM_AML_H

#include <stddef.h>
#include <stdint.h>

#define AML_ZERO	     0x00
#define AML_ONE		     0x01
#define AML_NAME	     0x08
#define AML_BYTE	     0x0a
#define AML_WORD	     0x0b
#define AML_DWORD	     0x0c
#define AML_STRING	     0x0d
#define AML_SCOPE	     0x10
#define AML_BUFFER	     0x11
#define AML_PACKAGE	     0x12
#define AML_METHOD	     0x14
#define AML_DUAL_NAME	     0x2e
#define AML_MULTI_NAME	     0x2f
#define AML_EXT		     0x5b
#define AML_MUTEX	     0x01 /* after AML_EXT */
#define AML_ACQUIRE	     0x23 /* after AML_EXT */
#define AML_RELEASE	     0x27 /* after AML_EXT */
#define AML_OPREGION	     0x80 /* after AML_EXT */
#define AML_FIELD	     0x81 /* after AML_EXT */
#define AML_DEVICE	     0x82 /* after AML_EXT */
#define AML_ARG0	     0x68
#define AML_ARG1	     0x69
#define AML_STORE	     0x70
#define AML_SHIFT_LEFT	     0x79
#define AML_AND		     0x7b
#define AML_NOTIFY	     0x86
#define AML_IF		     0xa0
#define AML_ROOT	     '\\'
#define AML_REGION_SYSTEM_IO 0x01
/* Field flags: DWordAcc, NoLock, WriteAsZeros */
#define AML_FIELD_DWORD_WZ 0x43

/* Address space descriptors: resource types and the I/O range flag (res_word) */
#define RES_TYPE_MEM	    0
#define RES_TYPE_IO	    1
#define RES_TYPE_BUS	    2
#define RES_IO_ENTIRE_RANGE 0x03

/* b[0..n) written of max; once something does not fit, overflow is set and nothing more is
 * written. */
struct aml {
	uint8_t *b;
	size_t n, max;
	int overflow;
};

void aml_emit(struct aml *a, const void *p, size_t len);
void aml_byte(struct aml *a, uint8_t v);
void aml_pkglen(struct aml *a, size_t content);
void aml_integer(struct aml *a, uint64_t v);
void aml_namestring(struct aml *a, const char *path);
void aml_append(struct aml *a, const struct aml *b);
void aml_name_int(struct aml *a, const char *seg, uint64_t v);
void aml_name_eisaid(struct aml *a, const char *seg, const char *id);
void aml_name_buffer(struct aml *a, const char *seg, const uint8_t *p, size_t len);
void aml_name_string(struct aml *a, const char *seg, const char *str);
void aml_block(struct aml *a, int ext, uint8_t op, const char *name, const uint8_t *body,
	       size_t len);
void aml_method(struct aml *a, const char *name, unsigned nargs, const struct aml *body);
void aml_device(struct aml *a, const char *name, const struct aml *body);
void aml_acquire(struct aml *a, const char *mutex);
void aml_release(struct aml *a, const char *mutex);

/* Resource descriptors, appended to a _CRS buffer that res_end() closes. */
void res_word(struct aml *a, uint8_t type, uint8_t tflags, uint16_t min, uint16_t max);
void res_dword_mem(struct aml *a, uint32_t base, uint32_t len);
void res_qword_mem(struct aml *a, uint64_t base, uint64_t len);
void res_io(struct aml *a, uint16_t port, uint8_t len);
void res_mem32_fixed(struct aml *a, uint32_t base, uint32_t len);
void res_irq_edge(struct aml *a, uint32_t gsi);
void res_end(struct aml *a);

#endif
