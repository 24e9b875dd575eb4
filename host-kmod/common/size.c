/* The size and count parser (include/lightiov/size.h). By hand and without libc: strtoull would
 * take leading blanks and a minus sign (wrapping it), and softssd and lvmm must read a size the
 * same way. */
#include "lightiov/size.h"

/* Multiplier shift for a binary suffix letter; -1 when the letter is not one. */
static int size_suffix_shift(char c)
{
	switch (c) {
	case 'k':
	case 'K':
		return 10;
	case 'm':
	case 'M':
		return 20;
	case 'g':
	case 'G':
		return 30;
	case 't':
	case 'T':
		return 40;
	default:
		return -1;
	}
}

/* The leading digits of *p as a number, *p moved past them. */
static int size_digits(const char **p, uint64_t *out)
{
	uint64_t v = 0;

	if (**p < '0' || **p > '9')
		return -LIO_SIZE_NOT_DIGITS;
	for (; **p >= '0' && **p <= '9'; (*p)++) {
		unsigned int d = (unsigned int)(**p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -LIO_SIZE_TOO_LARGE;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

int lio_size_parse(const char *s, uint64_t *out)
{
	const char *p = s;
	uint64_t v;
	int shift = 0, r;

	if (!s || !*s)
		return -LIO_SIZE_EMPTY;
	r = size_digits(&p, &v);
	if (r)
		return r;
	if (*p) {
		shift = size_suffix_shift(*p);
		if (shift < 0)
			return -LIO_SIZE_SUFFIX;
		p++;
		/* "4KiB" and "4KB" read as binary units too, as people write them. */
		if (*p == 'i' && p[1] == 'B')
			p += 2;
		else if (*p == 'B' || *p == 'b')
			p++;
		if (*p)
			return -LIO_SIZE_TRAILING;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -LIO_SIZE_TOO_LARGE;
	*out = v << shift;
	return 0;
}

const char *lio_size_why(int err)
{
	switch (err < 0 ? -err : err) {
	case LIO_SIZE_OK:
		return "is a size";
	case LIO_SIZE_EMPTY:
		return "is empty";
	case LIO_SIZE_NOT_DIGITS:
		return "is not a size (expected digits, then K, M, G or T)";
	case LIO_SIZE_SUFFIX:
		return "has an unknown suffix (use K, M, G or T)";
	case LIO_SIZE_TRAILING:
		return "has trailing characters after the size";
	default:
		return "is too large";
	}
}

int lio_count_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	const char *p = s;
	uint64_t v;
	int r;

	if (!s || !*s)
		return -LIO_SIZE_EMPTY;
	r = size_digits(&p, &v);
	if (r)
		return r;
	if (*p)
		return -LIO_SIZE_TRAILING;
	if (v < min || v > max)
		return -LIO_SIZE_TOO_LARGE;
	*out = v;
	return 0;
}
