// SPDX-License-Identifier: GPL-2.0
/* The misc device /dev/lightiov/NAME: one session per open file description, the operations of
 * include/lightiov/uapi.h as ioctls, and the teardown of everything a session held on release.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "lio.h"

union lio_ioc_arg {
	struct lio_identify id;
	struct lio_dma_window win;
	struct lio_qmem qm;
	struct lio_qp_create qp;
	struct lio_qp_ref ref;
	struct lio_qp_stats qst;
	struct lio_vol vol;
	struct lio_vol_list vl;
	struct lio_vol_attach va;
	struct lio_ssd_stats st;
	struct lio_session_list sl;
	struct lio_session_set set;
	struct lio_qp_state qs;
	struct lio_qp_restore qr;
};

static int lio_open(struct inode *inode, struct file *file)
{
	struct miscdevice *misc = file->private_data;
	struct lio_ssd *ssd = container_of(misc, struct lio_ssd, misc);
	char comm[TASK_COMM_LEN];
	struct lio_session *ss;

	ss = kzalloc(sizeof(*ss), GFP_KERNEL);
	if (!ss)
		return -ENOMEM;
	INIT_LIST_HEAD(&ss->qps);
	ss->mapping = file->f_mapping;
	ss->pid = task_tgid_nr(current);
	ss->uid = from_kuid_munged(current_user_ns(), current_uid());
	ss->kuid = current_uid();
	ss->admin = uid_eq(ss->kuid, GLOBAL_ROOT_UID) || capable(CAP_SYS_ADMIN);
	get_task_comm(comm, current);
	strscpy(ss->label, comm, sizeof(ss->label));
	mutex_lock(&ssd->lock);
	if (ssd->dead) {
		mutex_unlock(&ssd->lock);
		kfree(ss);
		return -ENODEV;
	}
	if (ssd->nsessions >= lio_max_sessions) {
		mutex_unlock(&ssd->lock);
		lio_err(ssd, "open: %u sessions, the limit per SSD (max_sessions)",
			ssd->nsessions);
		kfree(ss);
		return -EMFILE;
	}
	kref_get(&ssd->ref);
	ss->ssd = ssd;
	/* the tag of this session's anonymous volumes: never reused while the module is loaded */
	ss->owner = ++ssd->next_owner;
	list_add_tail(&ss->node, &ssd->sessions);
	ssd->nsessions++;
	mutex_unlock(&ssd->lock);
	file->private_data = ss;
	return 0;
}

/* The session as the ABI's rules see it (common/abi.c). */
struct lio_abi_session lio_abi_session(const struct lio_session *ss)
{
	return (struct lio_abi_session){ .regions = ss->win.cr,
					 .nr_regions = ss->win.n,
					 .qmem = !!ss->qm,
					 .nqps = ss->nqps };
}

static void lio_session_end(struct lio_session *ss)
{
	struct lio_ssd *ssd = ss->ssd;
	struct lio_qp *qp, *tmp;

	list_for_each_entry_safe(qp, tmp, &ss->qps, node)
		lio_qp_destroy(qp);
	lio_vol_release(ss);
	lio_win_drop(ssd, &ss->win);
	/* the client's mapping of the queue memory may outlive the session */
	lio_qmem_put(ss->qm);
	ss->qm = NULL;
}

static int lio_release(struct inode *inode, struct file *file)
{
	struct lio_session *ss = file->private_data;
	struct lio_ssd *ssd = ss->ssd;

	mutex_lock(&ssd->lock);
	lio_session_end(ss);
	lio_ctr_add(&ssd->retired, &ss->retired);
	list_del(&ss->node);
	ssd->nsessions--;
	mutex_unlock(&ssd->lock);
	kfree(ss);
	lio_ssd_put(ssd);
	return 0;
}

/* Called by remove(): queue pairs and pinned memory go now; the sessions stay until closed. */
void lio_ssd_kill_sessions(struct lio_ssd *ssd)
{
	struct lio_session *ss;

	list_for_each_entry(ss, &ssd->sessions, node) {
		struct lio_qp *qp, *tmp;

		list_for_each_entry_safe(qp, tmp, &ss->qps, node)
			lio_qp_destroy(qp);
		lio_win_drop(ssd, &ss->win);
	}
}

static void lio_session_ctr(const struct lio_session *ss, struct lio_ctr *t)
{
	const struct lio_qp *qp;

	*t = ss->retired;
	list_for_each_entry(qp, &ss->qps, node)
		lio_ctr_add(t, &qp->ctr);
}

static void lio_identify(struct lio_ssd *ssd, struct lio_identify *id)
{
	memset(id, 0, sizeof(*id));
	id->abi_version = LIO_ABI_VERSION;
	id->lba_shift = ssd->lba_shift;
	id->capacity_lbas = ssd->vt->capacity_lbas - ssd->vt->data_start_lba;
	id->free_lbas = lio_vt_free_lbas(ssd->vt);
	id->max_qpairs = min_t(u32, lio_max_qpairs, ssd->nr_ioq - 1);
	id->qpairs_in_use = ssd->nqpairs;
	id->max_qdepth = LIO_MAX_QDEPTH;
	id->nr_volumes = ssd->vt->n;
	id->flags = LIO_ID_DB_POLL | LIO_ID_DB_EVENTFD | LIO_ID_KERNEL | LIO_ID_QP_STATE;
	strscpy(id->name, ssd->name, sizeof(id->name));
	strscpy(id->model, ssd->model, sizeof(id->model));
}

/* Another uid's sessions and queue pairs (pids, labels, traffic) are not a client's business:
 * root (or CAP_SYS_ADMIN) sees every one (`lvmm ssd stats`), any other opener those of its uid.
 */
static bool lio_session_visible(const struct lio_session *ss, const struct lio_session *s)
{
	return ss->admin || uid_eq(s->kuid, ss->kuid);
}

static int lio_qp_stats(struct lio_session *ss, struct lio_qp_stats *st)
{
	/* counters of a queue pair the opener may see: numbers, never addresses */
	struct lio_ssd *ssd = ss->ssd;
	struct lio_qp *qp = lio_qp_find(ssd, st->qp_id);
	const struct lio_ctr *lio_from;
	struct lio_qp_stats *lio_to = st;

	if (qp && !lio_session_visible(ss, qp->ss))
		qp = NULL;
	if (!qp) {
		lio_err(ssd, "qp-stats: no queue pair %u on this SSD", st->qp_id);
		return -ENOENT;
	}
	lio_from = &qp->ctr;
	memset(st, 0, sizeof(*st));
	st->qp_id = qp->id;
	st->mode = qp->mode;
	LIO_COUNTERS(LIO_COUNTER_COPY_ONCE)
	return 0;
}

void lio_ssd_ctr(struct lio_ssd *ssd, struct lio_ctr *t)
{
	struct lio_session *s;
	struct lio_ctr c;

	*t = ssd->retired;
	list_for_each_entry(s, &ssd->sessions, node) {
		lio_session_ctr(s, &c);
		lio_ctr_add(t, &c);
	}
}

static void lio_ssd_stats(struct lio_ssd *ssd, struct lio_ssd_stats *st)
{
	const struct lio_ctr *lio_from;
	struct lio_ssd_stats *lio_to = st;
	struct lio_ctr t;

	lio_ssd_ctr(ssd, &t);
	lio_from = &t;
	memset(st, 0, sizeof(*st));
	LIO_COUNTERS(LIO_COUNTER_COPY)
	st->sessions = ssd->nsessions;
	st->qpairs = ssd->nqpairs;
	st->uptime_ns = ktime_get_ns() - ssd->start_ns;
}

static void lio_session_list(struct lio_session *ss, struct lio_session_list *l)
{
	struct lio_session *s;
	unsigned int i = 0;

	l->total = 0;
	l->count = 0;
	list_for_each_entry(s, &ss->ssd->sessions, node) {
		const struct lio_ctr *lio_from;
		struct lio_session_info *lio_to;
		struct lio_ctr t;

		if (!lio_session_visible(ss, s))
			continue;
		l->total++;
		if (i++ < l->first || l->count >= LIO_SESSION_LIST_MAX)
			continue;
		lio_to = &l->s[l->count++];
		lio_session_ctr(s, &t);
		lio_from = &t;
		memset(lio_to, 0, sizeof(*lio_to));
		lio_to->pid = s->pid;
		lio_to->uid = s->uid;
		lio_to->qpairs = s->nqps;
		lio_to->volumes = s->nvols;
		LIO_COUNTERS_SESSION(LIO_COUNTER_COPY)
		strscpy(lio_to->label, s->label, sizeof(lio_to->label));
	}
}

/* LIO_OP_SESSION_SET: write-through (the VM's volatile write cache off) reaches every queue
 * pair of the session at its next command; DB_DIRECT ones never pass the module and are not
 * covered (their client sets FUA itself).
 */
static int lio_session_set(struct lio_session *ss, struct lio_session_set *st)
{
	struct lio_abi_err e;
	struct lio_ctr t;
	int r;

	r = lio_abi_session_set(st, &e);
	if (r)
		return lio_abi_refuse(ss->ssd, "session-set", r, &e);
	WRITE_ONCE(ss->flags, (ss->flags & ~st->mask) | (st->flags & st->mask));
	lio_session_ctr(ss, &t);
	st->flags = ss->flags;
	st->syncs = t.syncs;
	return 0;
}

static int lio_dispatch(struct lio_session *ss, unsigned int cmd, union lio_ioc_arg *a)
{
	struct lio_ssd *ssd = ss->ssd;
	struct lio_qp *qp;

	switch (cmd) {
	case LIO_IOC_IDENTIFY:
		lio_identify(ssd, &a->id);
		return 0;
	case LIO_IOC_DMA_REGISTER:
		return lio_win_register(ss, &a->win);
	case LIO_IOC_QMEM_ALLOC:
		return lio_qmem_alloc(ss, &a->qm);
	case LIO_IOC_QP_CREATE:
		return lio_qp_create(ss, &a->qp);
	case LIO_IOC_QP_DESTROY:
		list_for_each_entry(qp, &ss->qps, node) {
			if (qp->id == a->ref.qp_id) {
				lio_qp_destroy(qp);
				return 0;
			}
		}
		lio_err(ssd, "qp-destroy: queue pair %u is not one of this session's",
			a->ref.qp_id);
		return -ENOENT;
	case LIO_IOC_QP_STATS:
		return lio_qp_stats(ss, &a->qst);
	case LIO_IOC_VOL_CREATE:
		return lio_vol_op(ss, LIO_OP_VOL_CREATE, &a->vol);
	case LIO_IOC_VOL_DELETE:
		return lio_vol_op(ss, LIO_OP_VOL_DELETE, &a->vol);
	case LIO_IOC_VOL_RESIZE:
		return lio_vol_op(ss, LIO_OP_VOL_RESIZE, &a->vol);
	case LIO_IOC_VOL_LIST:
		return lio_vol_list(ss, &a->vl);
	case LIO_IOC_VOL_ATTACH:
		return lio_vol_attach(ss, &a->va);
	case LIO_IOC_VOL_DETACH:
		return lio_vol_detach(ss, a->va.vol_id);
	case LIO_IOC_SSD_STATS:
		lio_ssd_stats(ssd, &a->st);
		return 0;
	case LIO_IOC_SESSION_LIST:
		lio_session_list(ss, &a->sl);
		return 0;
	case LIO_IOC_SESSION_SET:
		return lio_session_set(ss, &a->set);
	case LIO_IOC_QP_QUIESCE:
		return lio_qp_quiesce(ss, &a->qs);
	case LIO_IOC_QP_RESUME:
		return lio_qp_resume(ss, a->ref.qp_id);
	case LIO_IOC_QP_RESTORE:
		return lio_qp_restore(ss, &a->qr);
	}
	return -ENOTTY;
}

static bool lio_ioc_known(unsigned int cmd)
{
	switch (cmd) {
	case LIO_IOC_IDENTIFY:
	case LIO_IOC_DMA_REGISTER:
	case LIO_IOC_QMEM_ALLOC:
	case LIO_IOC_QP_CREATE:
	case LIO_IOC_QP_DESTROY:
	case LIO_IOC_QP_STATS:
	case LIO_IOC_VOL_CREATE:
	case LIO_IOC_VOL_DELETE:
	case LIO_IOC_VOL_RESIZE:
	case LIO_IOC_VOL_LIST:
	case LIO_IOC_VOL_ATTACH:
	case LIO_IOC_VOL_DETACH:
	case LIO_IOC_SSD_STATS:
	case LIO_IOC_SESSION_LIST:
	case LIO_IOC_SESSION_SET:
	case LIO_IOC_QP_QUIESCE:
	case LIO_IOC_QP_RESUME:
	case LIO_IOC_QP_RESTORE:
		return true;
	}
	return false;
}

/* The size and direction of the argument are in the command number itself: a struct of any
 * other size is a different, unknown command.
 */
static long lio_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct lio_session *ss = file->private_data;
	struct lio_ssd *ssd = ss->ssd;
	void __user *uarg = (void __user *)arg;
	unsigned int size = _IOC_SIZE(cmd);
	union lio_ioc_arg *a;
	long r;

	if (!lio_ioc_known(cmd))
		return -ENOTTY;
	a = kzalloc(sizeof(*a), GFP_KERNEL);
	if (!a)
		return -ENOMEM;
	if ((_IOC_DIR(cmd) & _IOC_WRITE) && copy_from_user(a, uarg, size)) {
		r = -EFAULT;
		goto out;
	}
	mutex_lock(&ssd->lock);
	r = ssd->dead ? -ENODEV : lio_dispatch(ss, cmd, a);
	mutex_unlock(&ssd->lock);
	if (!r && (_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(uarg, a, size))
		r = -EFAULT;
out:
	kfree(a);
	return r;
}

static int lio_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct lio_session *ss = file->private_data;
	struct lio_ssd *ssd = ss->ssd;
	int r;

	mutex_lock(&ssd->lock);
	r = ssd->dead ? -ENODEV : lio_qp_mmap(ss, vma);
	mutex_unlock(&ssd->lock);
	return r;
}

const struct file_operations lio_fops = {
	.owner = THIS_MODULE,
	.open = lio_open,
	.release = lio_release,
	.unlocked_ioctl = lio_ioctl,
	.mmap = lio_mmap,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};
