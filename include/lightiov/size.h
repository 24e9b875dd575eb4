/* Sizes and counts as people type them ("512M", "2G", "4KiB", "1048576"): the one parser lvmm's
 * configuration and softssd's command line share (host-kmod/common/size.c, no libc). */
#ifndef LIGHTIOV_SIZE_H
#define LIGHTIOV_SIZE_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

/* Why a string is not a size; lio_size_parse returns one of these negated. */
enum lio_size_error {
	LIO_SIZE_OK,
	LIO_SIZE_EMPTY,	     /* nothing */
	LIO_SIZE_NOT_DIGITS, /* does not start with a digit (no blanks, no sign) */
	LIO_SIZE_TOO_LARGE,  /* more than 2^64 - 1 bytes */
	LIO_SIZE_SUFFIX,     /* a letter other than K, M, G, T (either case) */
	LIO_SIZE_TRAILING,   /* something after the suffix ("B" and "iB" are taken) */
};

/* Digits, then at most one binary suffix (K = 1024) optionally followed by "B" or "iB".
 * 0 with *out set, or -enum lio_size_error. */
int lio_size_parse(const char *s, uint64_t *out);

/* What an error of lio_size_parse says after the quoted input ("is too large"). */
const char *lio_size_why(int err);

/* A decimal count in min..max, digits only (no sign, no blanks): 0, or -LIO_SIZE_* . */
int lio_count_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
