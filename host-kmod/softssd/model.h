/* softssd's device model: a fixed latency added to each command's completion and a token bucket
 * that caps IOPS, so that a fast backing behaves like a named SSD (--model). */
#ifndef SOFTSSD_MODEL_H
#define SOFTSSD_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct ssd_model {
	uint64_t latency_ns;  /* added to every command (0: none) */
	uint64_t iops;	      /* cap (0: none) */
	uint64_t interval_ns; /* 1e9 / iops */
	uint64_t burst_ns;    /* how far behind "now" the bucket may start: its depth in time */
	uint64_t next_ns;     /* the next free service slot */
	pthread_mutex_t lock; /* workers share one SSD's bucket */
	char desc[40];	      /* canonical text for identify ("none", "p4510", ...) */
};

/* "none", "p4510", or "latency=80us,iops=640k" (either key may be left out; units ns, us, ms,
 * s; k and m multipliers for iops). 0, or -EINVAL with err naming the bad part. */
int ssd_model_parse(struct ssd_model *m, const char *s, char *err, unsigned errlen);
bool ssd_model_active(const struct ssd_model *m);
/* When a command submitted at submit_ns whose backing I/O finished at done_ns may complete. */
uint64_t ssd_model_due(struct ssd_model *m, uint64_t submit_ns, uint64_t done_ns);
void ssd_model_destroy(struct ssd_model *m);

#endif
