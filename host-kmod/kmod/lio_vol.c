// SPDX-License-Identifier: GPL-2.0
/* Volumes of one controller: the on-disk volume table (host-kmod/common/voltable.c, the format
 * softssd writes) read at bind time and rewritten on every change, and the sessions' holds.
 */
#include <linux/dma-mapping.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/user_namespace.h>
#include <linux/vmalloc.h>

#include "lio.h"

#define LIO_VT_BUF_BYTES round_up(LIO_VT_COPY_BYTES, LIO_PAGE_SIZE)

/* One whole copy between ssd->vt_buf and the disk, in MDTS-sized commands. */
static int lio_vt_io(struct lio_ssd *ssd, u8 opcode, unsigned int slot)
{
	u64 lba = LIO_VT_COPY_OFF(slot) >> ssd->lba_shift;
	u32 done = 0, n;
	int r;

	while (done < LIO_VT_COPY_BYTES) {
		n = min_t(u32, LIO_VT_COPY_BYTES - done, ssd->mdts_bytes);
		r = lio_ctrl_io(ssd, opcode, lba + (done >> ssd->lba_shift), done, n);
		if (r)
			return r;
		done += n;
	}
	return 0;
}

/* Writes vt_next to the spare copy and flushes; only then does it become the table. */
static int lio_vt_commit(struct lio_ssd *ssd)
{
	struct lio_vt *t;
	unsigned int slot;
	int r;

	slot = lio_vt_write_prep(ssd->vt_next, ssd->vt_buf);
	r = lio_vt_io(ssd, NVME_CMD_WRITE, slot);
	if (!r)
		r = lio_ctrl_io(ssd, NVME_CMD_FLUSH, 0, 0, 0);
	if (r) {
		lio_err(ssd, "volume table: writing copy %u failed (%d); nothing changed", slot, r);
		return r;
	}
	t = ssd->vt;
	ssd->vt = ssd->vt_next;
	ssd->vt_next = t;
	memcpy(ssd->vt_next, ssd->vt, sizeof(*t));
	return 0;
}

int lio_vol_load(struct lio_ssd *ssd)
{
	struct device *dev = &ssd->pdev->dev;
	void *copy_a;
	int r;

	ssd->vt = vzalloc(sizeof(*ssd->vt));
	ssd->vt_next = vzalloc(sizeof(*ssd->vt_next));
	copy_a = vmalloc(LIO_VT_COPY_BYTES);
	ssd->vt_buf = dma_alloc_coherent(dev, LIO_VT_BUF_BYTES, &ssd->vt_dma, GFP_KERNEL);
	ssd->vt_prp = dma_alloc_coherent(dev, LIO_PAGE_SIZE, &ssd->vt_prp_dma, GFP_KERNEL);
	r = -ENOMEM;
	if (!ssd->vt || !ssd->vt_next || !copy_a || !ssd->vt_buf || !ssd->vt_prp)
		goto fail;
	r = lio_vt_io(ssd, NVME_CMD_READ, 0);
	if (r)
		goto fail;
	memcpy(copy_a, ssd->vt_buf, LIO_VT_COPY_BYTES);
	r = lio_vt_io(ssd, NVME_CMD_READ, 1);
	if (r)
		goto fail;
	r = lio_vt_load(copy_a, ssd->vt_buf, ssd->vt, NULL);
	if (r == -ENOENT) {
		if (!lio_format_blank) {
			dev_err(dev, "no volume table on namespace 1 (load with format_blank=1 to write one)\n");
			r = -ENODEV;
			goto fail;
		}
		lio_vt_init(ssd->vt_next, ssd->name, ssd->nsze, ssd->lba_shift);
		r = lio_vt_commit(ssd);
		if (r)
			goto fail;
		dev_info(dev, "%s: wrote an empty volume table\n", ssd->name);
	} else if (r) {
		dev_err(dev, "volume table: neither copy is valid (%d)\n", r);
		goto fail;
	} else if (ssd->vt->lba_shift != ssd->lba_shift || ssd->vt->capacity_lbas != ssd->nsze) {
		dev_err(dev, "volume table: geometry 2^%u x %llu does not match the namespace (2^%u x %llu)\n",
			ssd->vt->lba_shift, ssd->vt->capacity_lbas, ssd->lba_shift, ssd->nsze);
		r = -EINVAL;
		goto fail;
	}
	memcpy(ssd->vt_next, ssd->vt, sizeof(*ssd->vt));
	if (lio_name_valid(ssd->vt->ssd_name))
		strscpy(ssd->name, ssd->vt->ssd_name, sizeof(ssd->name));
	vfree(copy_a);
	return 0;
fail:
	vfree(copy_a);
	lio_vol_unload(ssd);
	return r;
}

void lio_vol_unload(struct lio_ssd *ssd)
{
	struct device *dev = &ssd->pdev->dev;

	if (ssd->vt_buf)
		dma_free_coherent(dev, LIO_VT_BUF_BYTES, ssd->vt_buf, ssd->vt_dma);
	if (ssd->vt_prp)
		dma_free_coherent(dev, LIO_PAGE_SIZE, ssd->vt_prp, ssd->vt_prp_dma);
	vfree(ssd->vt);
	vfree(ssd->vt_next);
	ssd->vt_buf = NULL;
	ssd->vt_prp = NULL;
	ssd->vt = NULL;
	ssd->vt_next = NULL;
}

/* The uid a named volume's entry records (LIO_VT_OWNER_UID | uid); 0, in tables written before
 * owners were recorded, is root's.
 */
static u64 lio_vol_owner_of(const struct lio_session *ss)
{
	return LIO_VT_OWNER_OF(from_kuid(&init_user_ns, ss->kuid));
}

/* Root (or CAP_SYS_ADMIN) may use every volume, another opener the named volumes it created
 * and the anonymous ones of its own session.
 */
static bool lio_vol_mine(const struct lio_session *ss, const struct lio_vt_entry *e)
{
	if (ss->admin)
		return true;
	if (e->flags & LIO_VOL_ANON)
		return e->owner == ss->owner;
	return (e->owner & LIO_VT_OWNER_UID) && e->owner == lio_vol_owner_of(ss);
}

/* Holds on volume name by every session: *writers counts read-write and exclusive ones. */
static unsigned int lio_vol_users(struct lio_ssd *ssd, const char *name, unsigned int *writers,
				  unsigned int *excl)
{
	struct lio_session *s;
	unsigned int i, n = 0;

	if (writers)
		*writers = 0;
	if (excl)
		*excl = 0;
	list_for_each_entry(s, &ssd->sessions, node) {
		for (i = 0; i < s->nvols; i++) {
			if (strcmp(s->vols[i].name, name))
				continue;
			n++;
			if (writers && !(s->vols[i].flags & LIO_ATTACH_READONLY))
				(*writers)++;
			if (excl && (s->vols[i].flags & LIO_ATTACH_EXCL_ALL))
				(*excl)++;
		}
	}
	return n;
}

static bool lio_vol_name_ok(struct lio_ssd *ssd, const char *op, const char *name)
{
	if (memchr(name, 0, LIO_NAME_MAX) && lio_name_valid(name))
		return true;
	lio_err(ssd, "%s: volume name '%.*s' is not 1..31 of [A-Za-z0-9._-]", op, LIO_NAME_MAX - 1,
		name);
	return false;
}

static int lio_vol_size(struct lio_ssd *ssd, const char *op, u64 bytes, u64 *count)
{
	if (!bytes || bytes & ((1ull << ssd->lba_shift) - 1)) {
		lio_err(ssd, "%s: size %llu is not a positive multiple of the LBA size %u", op,
			bytes, 1u << ssd->lba_shift);
		return -EINVAL;
	}
	*count = bytes >> ssd->lba_shift;
	return 0;
}

static const char *lio_vol_errname(int r)
{
	switch (r) {
	case -EEXIST:
		return "exists";
	case -EMFILE:
		return "table full";
	case -ENOSPC:
		return "no free extent large enough";
	case -ENOENT:
		return "no such volume";
	default:
		return "refused";
	}
}

static int lio_vol_add(struct lio_ssd *ssd, const char *op, const char *name, u64 count,
		       u32 flags, u64 owner)
{
	int i = lio_vt_alloc(ssd->vt_next, name, count, flags, owner);
	int r;

	if (i < 0) {
		lio_err(ssd, "%s: volume %s of %llu LBAs: %s (%d)", op, name, count,
			lio_vol_errname(i), i);
		memcpy(ssd->vt_next, ssd->vt, sizeof(*ssd->vt));
		return i;
	}
	ssd->vt_next->e[i].ctime = (u32)ktime_get_real_seconds();
	r = lio_vt_commit(ssd);
	if (r) {
		memcpy(ssd->vt_next, ssd->vt, sizeof(*ssd->vt));
		return r;
	}
	return lio_vt_find(ssd->vt, name);
}

static int lio_vol_remove(struct lio_ssd *ssd, const char *name)
{
	int r = lio_vt_remove(ssd->vt_next, name);

	if (!r)
		r = lio_vt_commit(ssd);
	if (r)
		memcpy(ssd->vt_next, ssd->vt, sizeof(*ssd->vt));
	return r;
}

/* count LBAs from src to dst (dst == U64_MAX: zeros at src), through vt_buf in MDTS pieces on
 * the internal queue. vt_buf is scratch here: every table write encodes it afresh.
 */
static int lio_vol_copy(struct lio_ssd *ssd, u64 src, u64 dst, u64 count)
{
	u32 chunk = min_t(u32, ssd->mdts_bytes, LIO_VT_BUF_BYTES) >> ssd->lba_shift;
	u32 n;
	int r;

	if (dst == U64_MAX)
		memset(ssd->vt_buf, 0, (size_t)chunk << ssd->lba_shift);
	while (count) {
		n = min_t(u64, count, chunk);
		if (dst == U64_MAX) {
			r = lio_ctrl_io(ssd, NVME_CMD_WRITE, src, 0, n << ssd->lba_shift);
		} else {
			r = lio_ctrl_io(ssd, NVME_CMD_READ, src, 0, n << ssd->lba_shift);
			if (!r)
				r = lio_ctrl_io(ssd, NVME_CMD_WRITE, dst, 0, n << ssd->lba_shift);
			dst += n;
		}
		if (r)
			return r;
		src += n;
		count -= n;
	}
	return 0;
}

/* Grows volume i of vt_next to count LBAs: in place when the LBAs after it are free, else at
 * the first free extent that holds it (its data copied there, as softssd moves a volume). The
 * added LBAs read as zeros before the table says they are the volume's; the old extent keeps
 * its bytes (free space, as after a delete).
 */
static int lio_vol_grow(struct lio_ssd *ssd, const char *name, u64 count)
{
	int i = lio_vt_find(ssd->vt_next, name);
	struct lio_vt_entry *e = &ssd->vt_next->e[i];
	u64 old = e->lba_count, start;
	int r;

	r = lio_vt_grow(ssd->vt_next, name, count);
	if (!r)
		return lio_vol_copy(ssd, e->lba_start + old, U64_MAX, count - old);
	if (r != -ENOSPC)
		return r;
	r = lio_vt_find_free(ssd->vt_next, count, &start);
	if (r) {
		lio_err(ssd, "vol-resize: volume %s to %llu LBAs: no free extent that large (largest %llu), and it cannot grow in place",
			name, count, lio_vt_free_lbas(ssd->vt_next));
		return -ENOSPC;
	}
	r = lio_vol_copy(ssd, start + old, U64_MAX, count - old);
	if (!r)
		r = lio_vol_copy(ssd, e->lba_start, start, old);
	if (r) {
		lio_err(ssd, "vol-resize: volume %s: moving it to LBA %llu failed (%d)", name,
			start, r);
		return r;
	}
	e->lba_start = start;
	e->lba_count = count;
	return 0;
}

int lio_vol_op(struct lio_session *ss, unsigned int op, struct lio_vol *v)
{
	struct lio_ssd *ssd = ss->ssd;
	const char *opname = op == LIO_OP_VOL_CREATE ? "vol-create" :
			     op == LIO_OP_VOL_DELETE ? "vol-delete" : "vol-resize";
	u64 count = 0;
	int i, r;

	if (!lio_vol_name_ok(ssd, opname, v->name))
		return -EINVAL;
	if (op != LIO_OP_VOL_DELETE) {
		r = lio_vol_size(ssd, opname, v->size_bytes, &count);
		if (r)
			return r;
	}
	if (op == LIO_OP_VOL_CREATE) {
		i = lio_vol_add(ssd, opname, v->name, count, 0, lio_vol_owner_of(ss));
		return i < 0 ? i : 0;
	}
	i = lio_vt_find(ssd->vt, v->name);
	if (i < 0) {
		lio_err(ssd, "%s: no volume %s", opname, v->name);
		return -ENOENT;
	}
	if (!lio_vol_mine(ss, &ssd->vt->e[i])) {
		lio_err(ssd, "%s: volume %s is not uid %u's", opname, v->name, ss->uid);
		return -EACCES;
	}
	if (lio_vol_users(ssd, v->name, NULL, NULL)) {
		lio_err(ssd, "%s: volume %s is attached to %u session(s)", opname, v->name,
			lio_vol_users(ssd, v->name, NULL, NULL));
		return -EBUSY;
	}
	if (op == LIO_OP_VOL_DELETE)
		return lio_vol_remove(ssd, v->name);
	if (count < ssd->vt->e[i].lba_count) {
		lio_err(ssd, "%s: volume %s cannot shrink from %llu to %llu LBAs (grow only)",
			opname, v->name, ssd->vt->e[i].lba_count, count);
		return -EINVAL;
	}
	if (count == ssd->vt->e[i].lba_count)
		return 0;
	r = lio_vol_grow(ssd, v->name, count);
	if (!r)
		r = lio_vt_commit(ssd);
	if (r) {
		if (r != -ENOSPC)
			lio_err(ssd, "%s: volume %s to %llu LBAs: %s (%d)", opname, v->name, count,
				lio_vol_errname(r), r);
		memcpy(ssd->vt_next, ssd->vt, sizeof(*ssd->vt));
	}
	return r;
}

/* Another uid's volumes (names, LBA ranges) are not a client's business: each opener lists the
 * volumes it may attach.
 */
int lio_vol_list(struct lio_session *ss, struct lio_vol_list *l)
{
	struct lio_ssd *ssd = ss->ssd;
	unsigned int i, seen = 0;

	l->total = 0;
	l->count = 0;
	for (i = 0; i < ssd->vt->n; i++) {
		const struct lio_vt_entry *e = &ssd->vt->e[i];
		struct lio_vol_info *o;

		if (!lio_vol_mine(ss, e))
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
		o->users = lio_vol_users(ssd, e->name, NULL, NULL);
	}
	return 0;
}

int lio_vol_attach(struct lio_session *ss, struct lio_vol_attach *a)
{
	const u32 known = LIO_ATTACH_CREATE | LIO_ATTACH_ANON | LIO_ATTACH_READONLY |
			  LIO_ATTACH_EXCL_ALL;
	struct lio_ssd *ssd = ss->ssd;
	unsigned int users, writers, excl;
	const struct lio_vt_entry *e;
	struct lio_attached *at;
	u64 count;
	int i, r;

	if (ss->nvols >= LIO_MAX_ATTACHED) {
		lio_err(ssd, "vol-attach: %u volumes attached, the limit per session", ss->nvols);
		return -EMFILE;
	}
	if (a->flags & ~known) {
		lio_err(ssd, "vol-attach: flags 0x%x has unknown bits 0x%x", a->flags,
			a->flags & ~known);
		return -EINVAL;
	}
	if ((a->flags & LIO_ATTACH_ANON) && (a->flags & ~LIO_ATTACH_ANON)) {
		lio_err(ssd, "vol-attach: flags 0x%x: an anonymous volume takes no other flag",
			a->flags);
		return -EINVAL;
	}
	if (a->flags & LIO_ATTACH_ANON) {
		static unsigned int seq;

		r = lio_vol_size(ssd, "vol-attach", a->size_bytes, &count);
		if (r)
			return r;
		snprintf(a->name, sizeof(a->name), "anon-%llx-%u", ss->owner, seq++);
		i = lio_vol_add(ssd, "vol-attach", a->name, count, LIO_VOL_ANON, ss->owner);
		if (i < 0)
			return i;
	} else {
		if (!lio_vol_name_ok(ssd, "vol-attach", a->name))
			return -EINVAL;
		i = lio_vt_find(ssd->vt, a->name);
		if (i < 0 && (a->flags & LIO_ATTACH_CREATE)) {
			r = lio_vol_size(ssd, "vol-attach", a->size_bytes, &count);
			if (r)
				return r;
			i = lio_vol_add(ssd, "vol-attach", a->name, count, 0,
					lio_vol_owner_of(ss));
			if (i < 0)
				return i;
		} else if (i < 0) {
			lio_err(ssd, "vol-attach: no volume %s", a->name);
			return -ENOENT;
		}
		if (ssd->vt->e[i].flags & LIO_VOL_ANON) {
			lio_err(ssd, "vol-attach: volume %s is anonymous (only its own session uses it)",
				a->name);
			return -EBUSY;
		}
		if (!lio_vol_mine(ss, &ssd->vt->e[i])) {
			lio_err(ssd, "vol-attach: volume %s is not uid %u's", a->name, ss->uid);
			return -EACCES;
		}
		users = lio_vol_users(ssd, a->name, &writers, &excl);
		if (excl || ((a->flags & LIO_ATTACH_EXCL_ALL) && users) ||
		    (!(a->flags & LIO_ATTACH_READONLY) && users) ||
		    ((a->flags & LIO_ATTACH_READONLY) && writers)) {
			lio_err(ssd, "vol-attach: volume %s is in use by %u session(s)", a->name,
				users);
			return -EBUSY;
		}
	}
	e = &ssd->vt->e[i];
	at = &ss->vols[ss->nvols++];
	memset(at, 0, sizeof(*at));
	if (!++ssd->next_vol_id)
		++ssd->next_vol_id;
	at->vol_id = ssd->next_vol_id;
	at->flags = a->flags;
	at->lba_start = e->lba_start;
	at->lba_count = e->lba_count;
	memcpy(at->name, e->name, sizeof(at->name));
	a->vol_id = at->vol_id;
	a->lba_start = e->lba_start;
	a->lba_count = e->lba_count;
	a->size_bytes = e->lba_count << ssd->lba_shift;
	return 0;
}

/* Anonymous volumes die with their attachment: nothing else may ever use them. */
static void lio_vol_drop(struct lio_session *ss, unsigned int idx)
{
	struct lio_attached at = ss->vols[idx];

	ss->vols[idx] = ss->vols[--ss->nvols];
	if ((at.flags & LIO_ATTACH_ANON) && !ss->ssd->dead)
		lio_vol_remove(ss->ssd, at.name);
}

int lio_vol_detach(struct lio_session *ss, u32 vol_id)
{
	struct lio_qp *qp;
	unsigned int i;

	for (i = 0; i < ss->nvols; i++)
		if (ss->vols[i].vol_id == vol_id)
			break;
	if (i == ss->nvols) {
		lio_err(ss->ssd, "vol-detach: volume %u is not attached to this session", vol_id);
		return -ENOENT;
	}
	list_for_each_entry(qp, &ss->qps, node) {
		if (qp->vol_id == vol_id) {
			lio_err(ss->ssd, "vol-detach: volume %u serves queue pair %u", vol_id,
				qp->id);
			return -EBUSY;
		}
	}
	lio_vol_drop(ss, i);
	return 0;
}

void lio_vol_release(struct lio_session *ss)
{
	while (ss->nvols)
		lio_vol_drop(ss, ss->nvols - 1);
}
