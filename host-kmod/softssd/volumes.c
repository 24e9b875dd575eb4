/* softssd's volume manager: the volume table of one backing in memory, attach/detach of volumes
 * by sessions, and the crash-safe write of every table change (see volumes.h for the rules). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "lightiov/voltable.h"
#include "softssd/backing_io.h"
#include "softssd/volumes.h"

#define VOLS_ALIGN     4096u	  /* buffers fit a backing opened with O_DIRECT */
#define VOLS_CHUNK     (1u << 20) /* copy and zero-fill unit */
#define VOLS_MAX_HOLDS 65536u	  /* attachments of all sessions together */

enum hold_mode { HOLD_READ, HOLD_WRITE, HOLD_ALL };

/* One session's hold on one volume (a volume held by several readers has several). */
struct vols_hold {
	char name[LIO_NAME_MAX];
	uint64_t owner;
	uint32_t vol_id;
	enum hold_mode mode;
};

struct ssd_volumes {
	pthread_mutex_t lock;
	struct ssd_dev dev;
	char ssd[LIO_NAME_MAX];
	struct lio_vt *vt;   /* the table as it is on the backing */
	struct lio_vt *next; /* scratch: the change being written */
	void *copy;	     /* one encoded copy, LIO_VT_COPY_BYTES */
	void *chunk;	     /* VOLS_CHUNK of copy buffer */
	struct vols_hold *holds;
	unsigned nr_holds, max_holds;
	uint32_t last_vol_id;
};

static uint64_t vols_lba_bytes(const struct ssd_volumes *v)
{
	return 1ULL << v->vt->lba_shift;
}

/* Starts a change: the scratch table becomes a copy of the current one. */
static void vols_begin(struct ssd_volumes *v)
{
	memcpy(v->next, v->vt, sizeof(*v->next));
}

/* Writes the scratch table to the slot the protocol names, flushes, and only then makes it the
 * table in memory. On failure the table in memory (and the newest copy on disk) is unchanged. */
static int vols_commit(struct ssd_volumes *v, char *err, unsigned errlen)
{
	struct lio_vt *t;
	unsigned slot;
	int r;

	slot = lio_vt_write_prep(v->next, v->copy);
	r = ssd_dev_pwrite(&v->dev, v->copy, LIO_VT_COPY_BYTES, LIO_VT_COPY_OFF(slot));
	if (!r)
		r = ssd_dev_flush(&v->dev);
	if (r) {
		snprintf(err, errlen,
			 "%s: writing volume table copy %c (generation %" PRIu64 ") failed: %s",
			 v->ssd, slot ? 'B' : 'A', v->next->generation, strerror(-r));
		return r;
	}
	t = v->vt;
	v->vt = v->next;
	v->next = t;
	return 0;
}

/* Makes [lba, lba + count) read as zeros, durably, before a table write exposes it. */
static int vols_zero(struct ssd_volumes *v, uint64_t lba, uint64_t count)
{
	return ssd_dev_zero(&v->dev, lba << v->vt->lba_shift, count << v->vt->lba_shift);
}

/* Copies count LBAs from src to dst, a zeroed extent, and flushes. */
static int vols_copy(struct ssd_volumes *v, uint64_t src, uint64_t dst, uint64_t count)
{
	uint32_t shift = v->vt->lba_shift;

	return ssd_dev_copy(&v->dev, src << shift, dst << shift, count << shift, v->chunk,
			    VOLS_CHUNK);
}

static unsigned vols_users(const struct ssd_volumes *v, const char *name)
{
	unsigned i, n = 0;

	for (i = 0; i < v->nr_holds; i++)
		n += !strcmp(v->holds[i].name, name);
	return n;
}

/* The owner a named volume made by who gets. */
static uint64_t vols_owner_of(const struct ssd_vol_who *who)
{
	return LIO_VT_OWNER_OF(who ? who->uid : 0);
}

/* who may attach, delete or resize named volume e. */
static bool vols_may(const struct ssd_vol_who *who, const struct lio_vt_entry *e)
{
	if (!who || who->admin)
		return true;
	return !(e->flags & LIO_VOL_ANON) && e->owner == LIO_VT_OWNER_OF(who->uid);
}

/* who may see e in a list: the volumes it may use, and its own session's anonymous ones. */
static bool vols_visible(const struct ssd_vol_who *who, const struct lio_vt_entry *e)
{
	if (vols_may(who, e))
		return true;
	return (e->flags & LIO_VOL_ANON) && who->session && e->owner == who->session;
}

static int vols_refuse_owner(struct ssd_volumes *v, const struct ssd_vol_who *who,
			     const struct lio_vt_entry *e, const char *what, char *err,
			     unsigned errlen)
{
	if (vols_may(who, e))
		return 0;
	snprintf(err, errlen, "%s: volume %s belongs to another user (uid %u may not %s it)",
		 v->ssd, e->name, (unsigned)who->uid, what);
	return -EACCES;
}

/* At most n bytes of a client's string for a message: anything unprintable becomes '?', so a
 * name never writes escapes or line breaks into a terminal or the daemon's log. */
static void vols_printable(char *dst, size_t len, const char *src, size_t n)
{
	size_t i;

	for (i = 0; i + 1 < len && i < n && src[i]; i++)
		dst[i] = src[i] > 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[i] = 0;
}

int ssd_vol_name_check(const char *ssd, const char *in, char *out, char *err, unsigned errlen)
{
	size_t n = strnlen(in, LIO_NAME_MAX);
	char shown[LIO_NAME_MAX];

	vols_printable(shown, sizeof(shown), in, LIO_NAME_MAX - 1);
	if (n == LIO_NAME_MAX) {
		snprintf(err, errlen, "%s: invalid volume name '%s...' (longer than %d characters)",
			 ssd, shown, LIO_NAME_MAX - 1);
		return -EINVAL;
	}
	memcpy(out, in, n + 1);
	if (!lio_name_valid(out)) {
		snprintf(err, errlen,
			 "%s: invalid volume name '%s' (1-%d of A-Z a-z 0-9 . _ -, not . or ..)",
			 ssd, shown, LIO_NAME_MAX - 1);
		return -EINVAL;
	}
	return 0;
}

static int vols_req_name(struct ssd_volumes *v, const char *in, char *out, char *err,
			 unsigned errlen)
{
	return ssd_vol_name_check(v->ssd, in, out, err, errlen);
}

/* size_bytes of volume name in LBAs: > 0, a whole number of LBAs, within the largest free
 * extent. */
static int vols_req_size(struct ssd_volumes *v, const char *name, uint64_t size_bytes,
			 uint64_t *count, char *err, unsigned errlen)
{
	char want[24], have[24];
	uint64_t free_lbas;

	if (!size_bytes) {
		snprintf(err, errlen, "%s: volume %s size 0 (a volume needs at least one LBA)",
			 v->ssd, name);
		return -EINVAL;
	}
	if (size_bytes & (vols_lba_bytes(v) - 1)) {
		snprintf(err, errlen,
			 "%s: volume %s size %" PRIu64
			 " is not a multiple of the LBA size %" PRIu64,
			 v->ssd, name, size_bytes, vols_lba_bytes(v));
		return -EINVAL;
	}
	*count = size_bytes >> v->vt->lba_shift;
	free_lbas = lio_vt_free_lbas(v->vt);
	if (*count > free_lbas) {
		ssd_size_str(size_bytes, want, sizeof(want));
		ssd_size_str(free_lbas << v->vt->lba_shift, have, sizeof(have));
		snprintf(err, errlen, "%s: volume %s size %s exceeds free space %s", v->ssd, name,
			 want, have);
		return -ENOSPC;
	}
	return 0;
}

/* Adds a volume (zeroed) and writes the table; returns its index. */
static int vols_add(struct ssd_volumes *v, const char *name, uint64_t count, uint32_t flags,
		    uint64_t owner, char *err, unsigned errlen)
{
	struct lio_vt_entry *e;
	int i, r;

	vols_begin(v);
	i = lio_vt_alloc(v->next, name, count, flags, owner);
	if (i < 0) {
		if (i == -EEXIST)
			snprintf(err, errlen, "%s: volume %s exists", v->ssd, name);
		else if (i == -EMFILE)
			snprintf(err, errlen, "%s: volume %s: the table is full (%d volumes)",
				 v->ssd, name, LIO_MAX_VOLUMES);
		else
			snprintf(err, errlen,
				 "%s: volume %s of %" PRIu64 " LBAs cannot be placed (%s)", v->ssd,
				 name, count, strerror(-i));
		return i;
	}
	e = &v->next->e[i];
	e->ctime = (uint32_t)time(NULL);
	r = vols_zero(v, e->lba_start, e->lba_count);
	if (r) {
		snprintf(err, errlen,
			 "%s: volume %s: zeroing LBAs %" PRIu64 "+%" PRIu64 " failed: %s", v->ssd,
			 name, e->lba_start, e->lba_count, strerror(-r));
		return r;
	}
	r = vols_commit(v, err, errlen);
	return r ? r : i;
}

/* The volume name must exist: its index, or -ENOENT with a message. */
static int vols_lookup(struct ssd_volumes *v, const char *name, char *err, unsigned errlen)
{
	int i = lio_vt_find(v->vt, name);

	if (i < 0)
		snprintf(err, errlen, "%s: no volume named %s", v->ssd, name);
	return i;
}

static int vols_refuse_busy(struct ssd_volumes *v, const char *name, const char *what, char *err,
			    unsigned errlen)
{
	unsigned n = vols_users(v, name);

	if (!n)
		return 0;
	snprintf(err, errlen, "%s: volume %s is in use by %u session%s (%s refused)", v->ssd, name,
		 n, n == 1 ? "" : "s", what);
	return -EBUSY;
}

static int vols_load(struct ssd_volumes *v, uint64_t capacity_bytes, uint32_t lba_shift,
		     bool format_if_blank, char *err, unsigned errlen)
{
	char *area;
	int r, which;

	if (posix_memalign((void **)&area, VOLS_ALIGN, LIO_VT_RESERVED_BYTES))
		return -ENOMEM;
	r = ssd_dev_pread(&v->dev, area, LIO_VT_RESERVED_BYTES, 0);
	if (r) {
		snprintf(err, errlen, "%s: reading the volume table failed: %s", v->ssd,
			 strerror(-r));
		goto out;
	}
	r = lio_vt_load(area + LIO_VT_COPY_OFF(0), area + LIO_VT_COPY_OFF(1), v->vt, &which);
	if (r == -ENOENT) {
		if (!ssd_all_zero(area, LIO_VT_RESERVED_BYTES)) {
			snprintf(err, errlen,
				 "%s: the backing holds data but no volume table "
				 "(not formatting it)",
				 v->ssd);
			r = -EINVAL;
		} else if (!format_if_blank) {
			snprintf(err, errlen, "%s: the backing is blank (no volume table yet)",
				 v->ssd);
		} else {
			if (!lba_shift)
				lba_shift = SSD_VOLUMES_DEFAULT_LBA_SHIFT;
			lio_vt_init(v->next, v->ssd, capacity_bytes >> lba_shift, lba_shift);
			r = vols_commit(v, err, errlen);
		}
		goto out;
	}
	if (r) {
		snprintf(err, errlen,
			 "%s: the volume table is corrupt (no valid copy; not formatting it)",
			 v->ssd);
		goto out;
	}
	r = -EINVAL;
	if (strcmp(v->vt->ssd_name, v->ssd)) {
		snprintf(err, errlen, "%s: the backing holds the volume table of SSD %s", v->ssd,
			 v->vt->ssd_name);
	} else if (lba_shift && v->vt->lba_shift != lba_shift) {
		snprintf(err, errlen, "%s: the volume table uses %u-byte LBAs, not %u", v->ssd,
			 1u << v->vt->lba_shift, 1u << lba_shift);
	} else if (v->vt->capacity_lbas > capacity_bytes >> v->vt->lba_shift) {
		char have[24], want[24];

		ssd_size_str(capacity_bytes, have, sizeof(have));
		ssd_size_str(v->vt->capacity_lbas << v->vt->lba_shift, want, sizeof(want));
		snprintf(err, errlen,
			 "%s: backing size %s is smaller than the %s its volume table describes",
			 v->ssd, have, want);
	} else {
		/* A backing that grew (serve --size) lends its new LBAs to volumes; the next
		 * table write records them. */
		v->vt->capacity_lbas = capacity_bytes >> v->vt->lba_shift;
		r = 0;
	}
out:
	free(area);
	return r;
}

int ssd_volumes_open(struct ssd_volumes **out, int backing_fd, const char *ssd_name,
		     uint64_t capacity_bytes, uint32_t lba_shift, bool format_if_blank, char *err,
		     unsigned errlen)
{
	const struct ssd_dev dev = {.fd = backing_fd};

	return ssd_volumes_open_dev(out, &dev, ssd_name, capacity_bytes, lba_shift, format_if_blank,
				    err, errlen);
}

int ssd_volumes_open_dev(struct ssd_volumes **out, const struct ssd_dev *dev, const char *ssd_name,
			 uint64_t capacity_bytes, uint32_t lba_shift, bool format_if_blank,
			 char *err, unsigned errlen)
{
	int backing_fd = dev->fd;
	struct ssd_volumes *v;
	int r;

	*out = NULL;
	if (!ssd_name || !lio_name_valid(ssd_name)) {
		char shown[LIO_NAME_MAX];

		vols_printable(shown, sizeof(shown), ssd_name ? ssd_name : "", LIO_NAME_MAX - 1);
		snprintf(err, errlen, "invalid SSD name '%s'", shown);
		return -EINVAL;
	}
	if (lba_shift && lba_shift != 9 && lba_shift != 12) {
		snprintf(err, errlen, "%s: LBA shift %u (expected 9 or 12)", ssd_name, lba_shift);
		return -EINVAL;
	}
	if (capacity_bytes < LIO_VT_RESERVED_BYTES + (1u << 12)) {
		snprintf(err, errlen,
			 "%s: backing size %" PRIu64 " leaves no room for volumes "
			 "(the first 1 MiB holds the volume table)",
			 ssd_name, capacity_bytes);
		return -EINVAL;
	}
	/* a controller through VFIO needs no lock: its device fd opens once */
	if (!dev->nvme && flock(backing_fd, LOCK_EX | LOCK_NB)) {
		r = -errno;
		if (r == -EWOULDBLOCK)
			snprintf(err, errlen,
				 "%s: the backing is locked by another process "
				 "(a running `lvmm ssd serve %s`?)",
				 ssd_name, ssd_name);
		else
			snprintf(err, errlen, "%s: locking the backing failed: %s", ssd_name,
				 strerror(-r));
		return r == -EWOULDBLOCK ? -EBUSY : r;
	}
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	pthread_mutex_init(&v->lock, NULL);
	v->dev = *dev;
	snprintf(v->ssd, sizeof(v->ssd), "%s", ssd_name);
	v->vt = calloc(1, sizeof(*v->vt));
	v->next = calloc(1, sizeof(*v->next));
	if (!v->vt || !v->next || posix_memalign(&v->copy, VOLS_ALIGN, LIO_VT_COPY_BYTES) ||
	    posix_memalign(&v->chunk, VOLS_ALIGN, VOLS_CHUNK)) {
		snprintf(err, errlen, "%s: out of memory for the volume table", ssd_name);
		r = -ENOMEM;
		goto fail;
	}
	r = vols_load(v, capacity_bytes, lba_shift, format_if_blank, err, errlen);
	if (r)
		goto fail;
	*out = v;
	return 0;
fail:
	ssd_volumes_close(v);
	return r;
}

void ssd_volumes_close(struct ssd_volumes *v)
{
	if (!v)
		return;
	pthread_mutex_destroy(&v->lock);
	free(v->holds);
	free(v->chunk);
	free(v->copy);
	free(v->next);
	free(v->vt);
	free(v);
}

uint32_t ssd_volumes_lba_shift(struct ssd_volumes *v)
{
	return v->vt->lba_shift;
}

/* The id holders of name share, or a fresh one. */
static uint32_t vols_id_for(struct ssd_volumes *v, const char *name)
{
	unsigned i;
	bool used;

	for (i = 0; i < v->nr_holds; i++)
		if (!strcmp(v->holds[i].name, name))
			return v->holds[i].vol_id;
	do {
		if (!++v->last_vol_id)
			v->last_vol_id = 1;
		used = false;
		for (i = 0; i < v->nr_holds; i++)
			used |= v->holds[i].vol_id == v->last_vol_id;
	} while (used);
	return v->last_vol_id;
}

static bool vols_conflict(const struct ssd_volumes *v, const char *name, enum hold_mode mode)
{
	unsigned i;

	for (i = 0; i < v->nr_holds; i++) {
		const struct vols_hold *h = &v->holds[i];

		if (strcmp(h->name, name))
			continue;
		if (mode == HOLD_ALL || h->mode == HOLD_ALL)
			return true;
		if (mode == HOLD_WRITE && h->mode == HOLD_WRITE)
			return true;
	}
	return false;
}

static int vols_add_hold(struct ssd_volumes *v, const char *name, uint64_t owner,
			 enum hold_mode mode, uint32_t *vol_id)
{
	uint32_t id = vols_id_for(v, name);
	struct vols_hold *h;

	if (v->nr_holds == v->max_holds) {
		unsigned n = v->max_holds ? v->max_holds * 2 : 16;

		if (n > VOLS_MAX_HOLDS)
			return -EMFILE;
		h = realloc(v->holds, n * sizeof(*h));
		if (!h)
			return -ENOMEM;
		v->holds = h;
		v->max_holds = n;
	}
	h = &v->holds[v->nr_holds++];
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", name);
	h->owner = owner;
	h->mode = mode;
	h->vol_id = *vol_id = id;
	return 0;
}

/* A new anonymous volume for owner: its index. */
static int vols_add_anon(struct ssd_volumes *v, struct lio_vol_attach *a, uint64_t owner, char *err,
			 unsigned errlen)
{
	char name[LIO_NAME_MAX];
	uint64_t count;
	unsigned n;
	int r;

	for (n = 0; n < LIO_MAX_VOLUMES; n++) {
		snprintf(name, sizeof(name), "anon-%" PRIx64 "-%u", owner, n);
		if (lio_vt_find(v->vt, name) < 0)
			break;
	}
	r = vols_req_size(v, name, a->size_bytes, &count, err, errlen);
	if (r)
		return r;
	r = vols_add(v, name, count, LIO_VOL_ANON, owner, err, errlen);
	if (r >= 0)
		snprintf(a->name, sizeof(a->name), "%s", name);
	return r;
}

int ssd_volumes_attach(struct ssd_volumes *v, struct lio_vol_attach *a, uint64_t owner, char *err,
		       unsigned errlen)
{
	return ssd_volumes_attach_by(v, a, owner, NULL, err, errlen);
}

int ssd_volumes_attach_by(struct ssd_volumes *v, struct lio_vol_attach *a, uint64_t owner,
			  const struct ssd_vol_who *who, char *err, unsigned errlen)
{
	const uint32_t known =
	    LIO_ATTACH_CREATE | LIO_ATTACH_ANON | LIO_ATTACH_READONLY | LIO_ATTACH_EXCL_ALL;
	char name[LIO_NAME_MAX];
	const struct lio_vt_entry *e;
	enum hold_mode mode;
	uint64_t count;
	int i, r;

	if (a->flags & ~known) {
		snprintf(err, errlen, "%s: attach flags 0x%x has unknown bits 0x%x", v->ssd,
			 a->flags, a->flags & ~known);
		return -EINVAL;
	}
	if ((a->flags & LIO_ATTACH_ANON) && (a->flags & ~LIO_ATTACH_ANON)) {
		snprintf(err, errlen,
			 "%s: attach flags 0x%x: an anonymous volume takes no other flag", v->ssd,
			 a->flags);
		return -EINVAL;
	}
	if (!owner) {
		snprintf(err, errlen, "%s: attach with owner 0", v->ssd);
		return -EINVAL;
	}
	if (a->flags & LIO_ATTACH_EXCL_ALL)
		mode = HOLD_ALL;
	else
		mode = a->flags & LIO_ATTACH_READONLY ? HOLD_READ : HOLD_WRITE;

	pthread_mutex_lock(&v->lock);
	if (a->flags & LIO_ATTACH_ANON) {
		i = vols_add_anon(v, a, owner, err, errlen);
		if (i < 0) {
			r = i;
			goto out;
		}
	} else {
		r = vols_req_name(v, a->name, name, err, errlen);
		if (r)
			goto out;
		i = lio_vt_find(v->vt, name);
		if (i < 0 && (a->flags & LIO_ATTACH_CREATE)) {
			r = vols_req_size(v, name, a->size_bytes, &count, err, errlen);
			if (r)
				goto out;
			i = vols_add(v, name, count, 0, vols_owner_of(who), err, errlen);
			if (i < 0) {
				r = i;
				goto out;
			}
		} else if (i < 0) {
			r = vols_lookup(v, name, err, errlen);
			goto out;
		}
		r = vols_refuse_owner(v, who, &v->vt->e[i], "attach", err, errlen);
		if (r)
			goto out;
		if (v->vt->e[i].flags & LIO_VOL_ANON) {
			/* It belongs to the session that made it (or to a dead daemon's). */
			snprintf(err, errlen,
				 "%s: volume %s is anonymous (only its own session uses it)",
				 v->ssd, name);
			r = -EBUSY;
			goto out;
		}
		if (vols_conflict(v, name, mode)) {
			snprintf(err, errlen,
				 "%s: volume %s is in use by %u session%s (%s attach refused)",
				 v->ssd, name, vols_users(v, name),
				 vols_users(v, name) == 1 ? "" : "s",
				 mode == HOLD_ALL    ? "exclusive"
				 : mode == HOLD_READ ? "read-only"
						     : "read-write");
			r = -EBUSY;
			goto out;
		}
	}
	e = &v->vt->e[i];
	r = vols_add_hold(v, e->name, owner, mode, &a->vol_id);
	if (r) {
		snprintf(err, errlen, "%s: volume %s: too many attachments (%u)", v->ssd, e->name,
			 v->nr_holds);
		if (e->flags & LIO_VOL_ANON) {
			char ignored[LIO_ERR_MAX];

			/* Nobody holds the anonymous volume just made: take it back (a failed write
			 * leaves it to ssd_volumes_reclaim). */
			memcpy(name, e->name, sizeof(name));
			vols_begin(v);
			lio_vt_remove(v->next, name);
			vols_commit(v, ignored, sizeof(ignored));
		}
		goto out;
	}
	snprintf(a->name, sizeof(a->name), "%s", e->name);
	a->lba_start = e->lba_start;
	a->lba_count = e->lba_count;
	a->size_bytes = e->lba_count << v->vt->lba_shift;
out:
	pthread_mutex_unlock(&v->lock);
	return r;
}

int ssd_volumes_hold_name(struct ssd_volumes *v, uint32_t vol_id, uint64_t owner,
			  char name[LIO_NAME_MAX])
{
	unsigned i;
	int r = -ENOENT;

	pthread_mutex_lock(&v->lock);
	for (i = 0; i < v->nr_holds && r; i++) {
		if (v->holds[i].vol_id == vol_id && v->holds[i].owner == owner) {
			memcpy(name, v->holds[i].name, LIO_NAME_MAX);
			r = 0;
		}
	}
	pthread_mutex_unlock(&v->lock);
	return r;
}

int ssd_volumes_adopt(struct ssd_volumes *v, const struct lio_vol_attach *a, uint64_t owner,
		      char *err, unsigned errlen)
{
	enum hold_mode mode = a->flags & LIO_ATTACH_EXCL_ALL   ? HOLD_ALL
			      : a->flags & LIO_ATTACH_READONLY ? HOLD_READ
							       : HOLD_WRITE;
	const struct lio_vt_entry *e;
	struct vols_hold *h;
	unsigned i;
	int idx, r = -EINVAL;

	pthread_mutex_lock(&v->lock);
	idx = memchr(a->name, 0, LIO_NAME_MAX) ? lio_vt_find(v->vt, a->name) : -1;
	if (idx < 0 || !owner || !a->vol_id) {
		snprintf(err, errlen, "%s: hand-over: volume '%.*s' (id %u) is not in the table",
			 v->ssd, LIO_NAME_MAX - 1, a->name, a->vol_id);
		r = -ENOENT;
		goto out;
	}
	e = &v->vt->e[idx];
	if (((e->flags & LIO_VOL_ANON) != 0) != ((a->flags & LIO_ATTACH_ANON) != 0) ||
	    ((e->flags & LIO_VOL_ANON) && e->owner != owner) || e->lba_start != a->lba_start ||
	    e->lba_count != a->lba_count) {
		snprintf(err, errlen,
			 "%s: hand-over: volume %s: attach flags 0x%x or LBAs %" PRIu64 "+%" PRIu64
			 " differ from the table's",
			 v->ssd, e->name, a->flags, a->lba_start, a->lba_count);
		goto out;
	}
	for (i = 0; i < v->nr_holds; i++) {
		if (!strcmp(v->holds[i].name, e->name) != (v->holds[i].vol_id == a->vol_id)) {
			snprintf(err, errlen, "%s: hand-over: volume %s: id %u given twice", v->ssd,
				 e->name, a->vol_id);
			goto out;
		}
	}
	if (vols_conflict(v, e->name, mode)) {
		snprintf(err, errlen, "%s: hand-over: volume %s held twice against its rules",
			 v->ssd, e->name);
		r = -EBUSY;
		goto out;
	}
	r = vols_add_hold(v, e->name, owner, mode, &(uint32_t){0});
	if (r) {
		snprintf(err, errlen, "%s: hand-over: volume %s: too many attachments", v->ssd,
			 e->name);
		goto out;
	}
	h = &v->holds[v->nr_holds - 1];
	h->vol_id = a->vol_id;
	if (a->vol_id > v->last_vol_id)
		v->last_vol_id = a->vol_id;
out:
	pthread_mutex_unlock(&v->lock);
	return r;
}

int ssd_volumes_detach(struct ssd_volumes *v, uint32_t vol_id, uint64_t owner)
{
	char name[LIO_NAME_MAX], err[LIO_ERR_MAX];
	unsigned i;
	int r = -ENOENT, idx;

	pthread_mutex_lock(&v->lock);
	for (i = 0; i < v->nr_holds; i++) {
		if (v->holds[i].vol_id != vol_id || v->holds[i].owner != owner)
			continue;
		memcpy(name, v->holds[i].name, sizeof(name));
		v->holds[i] = v->holds[--v->nr_holds];
		r = 0;
		break;
	}
	if (r)
		goto out;
	idx = lio_vt_find(v->vt, name);
	if (idx >= 0 && (v->vt->e[idx].flags & LIO_VOL_ANON) && !vols_users(v, name)) {
		vols_begin(v);
		lio_vt_remove(v->next, name);
		/* A failed write leaves the volume for ssd_volumes_reclaim at the next start. */
		r = vols_commit(v, err, sizeof(err));
	}
out:
	pthread_mutex_unlock(&v->lock);
	return r;
}

int ssd_volumes_create(struct ssd_volumes *v, const struct lio_vol *req, char *err, unsigned errlen)
{
	return ssd_volumes_create_by(v, req, NULL, err, errlen);
}

int ssd_volumes_create_by(struct ssd_volumes *v, const struct lio_vol *req,
			  const struct ssd_vol_who *who, char *err, unsigned errlen)
{
	char name[LIO_NAME_MAX];
	uint64_t count;
	int r;

	pthread_mutex_lock(&v->lock);
	r = vols_req_name(v, req->name, name, err, errlen);
	if (r)
		goto out;
	if (lio_vt_find(v->vt, name) >= 0) {
		snprintf(err, errlen, "%s: volume %s exists", v->ssd, name);
		r = -EEXIST;
		goto out;
	}
	r = vols_req_size(v, name, req->size_bytes, &count, err, errlen);
	if (r)
		goto out;
	r = vols_add(v, name, count, 0, vols_owner_of(who), err, errlen);
	if (r > 0)
		r = 0;
out:
	pthread_mutex_unlock(&v->lock);
	return r;
}

int ssd_volumes_delete(struct ssd_volumes *v, const struct lio_vol *req, char *err, unsigned errlen)
{
	return ssd_volumes_delete_by(v, req, NULL, err, errlen);
}

int ssd_volumes_delete_by(struct ssd_volumes *v, const struct lio_vol *req,
			  const struct ssd_vol_who *who, char *err, unsigned errlen)
{
	char name[LIO_NAME_MAX];
	int r;

	pthread_mutex_lock(&v->lock);
	r = vols_req_name(v, req->name, name, err, errlen);
	if (!r)
		r = vols_lookup(v, name, err, errlen);
	if (r < 0)
		goto out;
	r = vols_refuse_owner(v, who, &v->vt->e[r], "delete", err, errlen);
	if (!r)
		r = vols_refuse_busy(v, name, "delete", err, errlen);
	if (r)
		goto out;
	vols_begin(v);
	lio_vt_remove(v->next, name);
	r = vols_commit(v, err, errlen);
out:
	pthread_mutex_unlock(&v->lock);
	return r;
}

/* Grows volume i of the scratch table to count LBAs at a new extent: zero it, copy the data,
 * then the caller's one table write switches the entry over. */
static int vols_move(struct ssd_volumes *v, int i, uint64_t count, char *err, unsigned errlen)
{
	struct lio_vt_entry *e = &v->next->e[i];
	char want[24], have[24];
	uint64_t start;
	int r;

	r = lio_vt_find_free(v->next, count, &start);
	if (r) {
		ssd_size_str(count << v->vt->lba_shift, want, sizeof(want));
		ssd_size_str(lio_vt_free_lbas(v->vt) << v->vt->lba_shift, have, sizeof(have));
		snprintf(err, errlen,
			 "%s: volume %s size %s exceeds free space %s (it cannot grow in place)",
			 v->ssd, e->name, want, have);
		return -ENOSPC;
	}
	r = vols_zero(v, start, count);
	if (!r)
		r = vols_copy(v, e->lba_start, start, e->lba_count);
	if (r) {
		snprintf(err, errlen, "%s: volume %s: moving it to LBA %" PRIu64 " failed: %s",
			 v->ssd, e->name, start, strerror(-r));
		return r;
	}
	e->lba_start = start;
	e->lba_count = count;
	return 0;
}

int ssd_volumes_resize(struct ssd_volumes *v, const struct lio_vol *req, char *err, unsigned errlen)
{
	return ssd_volumes_resize_by(v, req, NULL, err, errlen);
}

int ssd_volumes_resize_by(struct ssd_volumes *v, const struct lio_vol *req,
			  const struct ssd_vol_who *who, char *err, unsigned errlen)
{
	char name[LIO_NAME_MAX], want[24], have[24];
	struct lio_vt_entry *e;
	uint64_t count, old;
	int i = -1, r;

	pthread_mutex_lock(&v->lock);
	r = vols_req_name(v, req->name, name, err, errlen);
	if (!r)
		r = i = vols_lookup(v, name, err, errlen);
	if (r < 0 || i < 0)
		goto out;
	r = vols_refuse_owner(v, who, &v->vt->e[i], "resize", err, errlen);
	if (!r)
		r = vols_refuse_busy(v, name, "resize", err, errlen);
	if (r)
		goto out;
	e = &v->vt->e[i];
	old = e->lba_count;
	if (!req->size_bytes || (req->size_bytes & (vols_lba_bytes(v) - 1))) {
		snprintf(err, errlen,
			 "%s: volume %s size %" PRIu64 " is not a positive multiple "
			 "of the LBA size %" PRIu64,
			 v->ssd, name, req->size_bytes, vols_lba_bytes(v));
		r = -EINVAL;
		goto out;
	}
	count = req->size_bytes >> v->vt->lba_shift;
	if (count < old) {
		ssd_size_str(req->size_bytes, want, sizeof(want));
		ssd_size_str(old << v->vt->lba_shift, have, sizeof(have));
		snprintf(err, errlen, "%s: volume %s cannot shrink from %s to %s (grow only)",
			 v->ssd, name, have, want);
		r = -EINVAL;
		goto out;
	}
	if (count == old)
		goto out;
	vols_begin(v);
	r = lio_vt_grow(v->next, name, count);
	if (!r) {
		/* In place: the added LBAs must read as zeros before the table says they are
		 * the volume's. */
		r = vols_zero(v, e->lba_start + old, count - old);
		if (r)
			snprintf(err, errlen, "%s: volume %s: zeroing its new LBAs failed: %s",
				 v->ssd, name, strerror(-r));
	} else if (r == -ENOSPC) {
		r = vols_move(v, i, count, err, errlen);
	} else {
		snprintf(err, errlen, "%s: volume %s cannot grow to %" PRIu64 " LBAs: %s", v->ssd,
			 name, count, strerror(-r));
	}
	if (!r)
		r = vols_commit(v, err, errlen);
out:
	pthread_mutex_unlock(&v->lock);
	return r;
}

int ssd_volumes_list(struct ssd_volumes *v, struct lio_vol_list *l)
{
	return ssd_volumes_list_by(v, l, NULL);
}

int ssd_volumes_list_by(struct ssd_volumes *v, struct lio_vol_list *l,
			const struct ssd_vol_who *who)
{
	unsigned i, seen = 0;

	pthread_mutex_lock(&v->lock);
	l->total = 0;
	l->count = 0;
	for (i = 0; i < v->vt->n; i++) {
		const struct lio_vt_entry *e = &v->vt->e[i];
		struct lio_vol_info *o;

		if (!vols_visible(who, e))
			continue;
		l->total++;
		if (seen++ < l->first || l->count >= LIO_VOL_LIST_MAX)
			continue;
		o = &l->v[l->count++];

		memset(o, 0, sizeof(*o));
		memcpy(o->name, e->name, sizeof(o->name));
		o->lba_start = e->lba_start;
		o->lba_count = e->lba_count;
		o->flags = e->flags;
		o->users = vols_users(v, e->name);
	}
	pthread_mutex_unlock(&v->lock);
	return 0;
}

int ssd_volumes_reclaim(struct ssd_volumes *v)
{
	char err[LIO_ERR_MAX];
	int i, freed = 0, r = 0;

	pthread_mutex_lock(&v->lock);
	vols_begin(v);
	/* From the end: a remove moves the last entry into the freed index. */
	for (i = (int)v->next->n - 1; i >= 0; i--) {
		const struct lio_vt_entry *e = &v->next->e[i];
		char name[LIO_NAME_MAX];

		if ((e->flags & LIO_VOL_ANON) && !vols_users(v, e->name)) {
			/* A copy: the remove overwrites e with the last entry. */
			memcpy(name, e->name, sizeof(name));
			lio_vt_remove(v->next, name);
			freed++;
		}
	}
	if (freed)
		r = vols_commit(v, err, sizeof(err));
	pthread_mutex_unlock(&v->lock);
	return r ? r : freed;
}

void ssd_volumes_identify(struct ssd_volumes *v, struct lio_identify *id)
{
	pthread_mutex_lock(&v->lock);
	id->lba_shift = v->vt->lba_shift;
	id->capacity_lbas = v->vt->capacity_lbas - v->vt->data_start_lba;
	id->free_lbas = lio_vt_free_lbas(v->vt);
	id->nr_volumes = v->vt->n;
	pthread_mutex_unlock(&v->lock);
}

int ssd_volumes_window(struct ssd_volumes *v, uint32_t vol_id, uint64_t *lba_start,
		       uint64_t *lba_count)
{
	unsigned i;
	int r = -ENOENT, idx;

	pthread_mutex_lock(&v->lock);
	for (i = 0; i < v->nr_holds; i++) {
		if (v->holds[i].vol_id != vol_id)
			continue;
		idx = lio_vt_find(v->vt, v->holds[i].name);
		if (idx >= 0) {
			*lba_start = v->vt->e[idx].lba_start;
			*lba_count = v->vt->e[idx].lba_count;
			r = 0;
		}
		break;
	}
	pthread_mutex_unlock(&v->lock);
	return r;
}
