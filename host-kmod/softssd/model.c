/* The device model of softssd: parse --model, then decide each command's completion time from a
 * fixed latency and an IOPS token bucket kept as virtual time (one slot per command). */
#include "softssd/model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Intel DC P4510 (2 TB) data sheet: 4 KiB random read 640K IOPS, read latency ~77 us. */
#define SSD_MODEL_P4510		 "latency=80us,iops=640k"
#define SSD_MODEL_MAX_LATENCY_NS (1000000000ull) /* 1 s: beyond that it is a typo, not a device */
#define SSD_MODEL_MAX_IOPS	 (100000000ull)
#define SSD_MODEL_BURST		 32 /* slots the bucket holds: a queue-depth-32 burst is not throttled */

static int ssd_model_num(const char *v, size_t n, uint64_t *out, const char **unit)
{
	char buf[32], *end;
	double d;

	if (!n || n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, v, n);
	buf[n] = 0;
	if (buf[0] < '0' || buf[0] > '9')
		return -EINVAL;
	d = strtod(buf, &end);
	*unit = v + (end - buf);
	if (d < 0 || d > 1e12)
		return -EINVAL;
	*out = (uint64_t)(d * 1000.0); /* kept in thousandths until the unit is known */
	return 0;
}

static int ssd_model_kv(struct ssd_model *m, const char *kv, size_t n, char *err, unsigned errlen)
{
	const char *eq = memchr(kv, '=', n), *unit, *vend = kv + n;
	uint64_t milli, mul;
	size_t klen;

	if (!eq)
		goto bad;
	klen = (size_t)(eq - kv);
	if (ssd_model_num(eq + 1, (size_t)(vend - eq - 1), &milli, &unit))
		goto bad;
	if (klen == 7 && !strncmp(kv, "latency", 7)) {
		size_t ul = (size_t)(vend - unit);

		if (ul == 2 && !strncmp(unit, "ns", 2))
			mul = 1;
		else if (ul == 2 && !strncmp(unit, "us", 2))
			mul = 1000;
		else if (ul == 2 && !strncmp(unit, "ms", 2))
			mul = 1000000;
		else if (ul == 1 && *unit == 's')
			mul = 1000000000;
		else
			goto bad;
		m->latency_ns = milli * mul / 1000;
		if (m->latency_ns > SSD_MODEL_MAX_LATENCY_NS)
			goto bad;
		return 0;
	}
	if (klen == 4 && !strncmp(kv, "iops", 4)) {
		size_t ul = (size_t)(vend - unit);

		if (!ul)
			mul = 1;
		else if (ul == 1 && (*unit == 'k' || *unit == 'K'))
			mul = 1000;
		else if (ul == 1 && (*unit == 'm' || *unit == 'M'))
			mul = 1000000;
		else
			goto bad;
		m->iops = milli * mul / 1000;
		if (!m->iops || m->iops > SSD_MODEL_MAX_IOPS)
			goto bad;
		return 0;
	}
bad:
	snprintf(err, errlen,
		 "--model: '%.*s' is not latency=N(ns|us|ms|s) or iops=N[k|m] "
		 "(latency up to 1s, iops 1..100m)",
		 (int)n, kv);
	return -EINVAL;
}

int ssd_model_parse(struct ssd_model *m, const char *s, char *err, unsigned errlen)
{
	const char *p;

	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	if (!s || !*s || !strcmp(s, "none")) {
		snprintf(m->desc, sizeof(m->desc), "none");
		return 0;
	}
	if (!strcmp(s, "p4510")) {
		int r = ssd_model_parse(m, SSD_MODEL_P4510, err, errlen);

		snprintf(m->desc, sizeof(m->desc), "p4510");
		return r;
	}
	if (strlen(s) >= sizeof(m->desc)) {
		snprintf(err, errlen, "--model: '%s' is too long", s);
		return -EINVAL;
	}
	for (p = s; *p;) {
		const char *c = strchr(p, ',');
		size_t n = c ? (size_t)(c - p) : strlen(p);
		int r = ssd_model_kv(m, p, n, err, errlen);

		if (r)
			return r;
		if (c && !c[1]) { /* "latency=80us," */
			snprintf(err, errlen, "--model: '%s' ends with a comma", s);
			return -EINVAL;
		}
		p += n + (c != NULL);
	}
	if (m->iops)
		m->interval_ns = 1000000000ull / m->iops;
	m->burst_ns = m->interval_ns * SSD_MODEL_BURST;
	snprintf(m->desc, sizeof(m->desc), "%s", s);
	return 0;
}

bool ssd_model_active(const struct ssd_model *m)
{
	return m->latency_ns || m->iops;
}

uint64_t ssd_model_due(struct ssd_model *m, uint64_t submit_ns, uint64_t done_ns)
{
	uint64_t start = submit_ns, due;

	if (m->iops) {
		pthread_mutex_lock(&m->lock);
		/* an idle device banks at most burst_ns of slots */
		if (m->next_ns + m->burst_ns < submit_ns)
			m->next_ns = submit_ns - m->burst_ns;
		if (m->next_ns > start)
			start = m->next_ns;
		m->next_ns += m->interval_ns;
		pthread_mutex_unlock(&m->lock);
	}
	due = start + m->latency_ns;
	return due > done_ns ? due : done_ns;
}

void ssd_model_destroy(struct ssd_model *m)
{
	pthread_mutex_destroy(&m->lock);
}
