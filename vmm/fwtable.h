/* Helpers for firmware tables built byte by byte in a host buffer (ACPI, MP): little-endian
 * stores at an offset and the byte checksum that makes a table sum to zero. */
#ifndef LVMM_FWTABLE_H
#define LVMM_FWTABLE_H

#include <stddef.h>
#include <stdint.h>

static inline void fw_put8(uint8_t *b, size_t off, uint8_t v)
{
	b[off] = v;
}

static inline void fw_put16(uint8_t *b, size_t off, uint16_t v)
{
	b[off] = (uint8_t)v;
	b[off + 1] = (uint8_t)(v >> 8);
}

static inline void fw_put32(uint8_t *b, size_t off, uint32_t v)
{
	fw_put16(b, off, (uint16_t)v);
	fw_put16(b, off + 2, (uint16_t)(v >> 16));
}

static inline void fw_put64(uint8_t *b, size_t off, uint64_t v)
{
	fw_put32(b, off, (uint32_t)v);
	fw_put32(b, off + 4, (uint32_t)(v >> 32));
}

/* The value that, stored in the table's checksum byte (zero while summing), makes len bytes sum
 * to zero modulo 256. */
static inline uint8_t fw_checksum(const uint8_t *b, size_t len)
{
	uint8_t s = 0;

	for (size_t i = 0; i < len; i++)
		s = (uint8_t)(s + b[i]);
	return (uint8_t)(0 - s);
}

#endif
