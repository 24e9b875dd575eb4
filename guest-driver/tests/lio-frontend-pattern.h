/* The data pattern of the frontend test: written by the guest through lightiov_nvme.ko, checked
 * by the guest through nvme and by the host in the exported volume. Byte i of the volume. */
#ifndef LIO_FRONTEND_PATTERN_H
#define LIO_FRONTEND_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#define LIO_PATTERN_OFF (1024 * 1024)

static inline uint8_t lio_pattern_byte(uint64_t i)
{
	uint64_t x = (i / 8 + 1) * 0x9e3779b97f4a7c15ULL;

	return (uint8_t)(x >> (8 * (i % 8)));
}

static inline void lio_pattern_fill(uint8_t *buf, uint64_t off, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = lio_pattern_byte(off + i);
}

/* 0 when buf holds the pattern of [off, off + len). */
static inline int lio_pattern_check(const uint8_t *buf, uint64_t off, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != lio_pattern_byte(off + i))
			return -1;
	return 0;
}

#endif
