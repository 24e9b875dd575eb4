// SPDX-License-Identifier: GPL-2.0
/* lightiov.ko: the LightIOV host module. A PCI driver for NVMe functions that binds only through
 * driver_override, module parameters, the per-controller misc device and its sysfs counters.
 */
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/ratelimit.h>
#include <linux/slab.h>

#include "lio.h"

unsigned int lio_max_qpairs = 64;
module_param_named(max_qpairs, lio_max_qpairs, uint, 0444);
MODULE_PARM_DESC(max_qpairs, "queue pairs served per controller, all sessions (1..1024)");

unsigned int lio_max_window_mb = 4096;
module_param_named(max_window_mb, lio_max_window_mb, uint, 0644);
MODULE_PARM_DESC(max_window_mb, "largest DMA window one session may pin, in MiB");

bool lio_format_blank;
module_param_named(format_blank, lio_format_blank, bool, 0644);
MODULE_PARM_DESC(format_blank, "write an empty volume table to a controller that has none");

bool lio_direct_noiommu;
module_param_named(direct_noiommu, lio_direct_noiommu, bool, 0644);
MODULE_PARM_DESC(direct_noiommu,
		 "allow DB_DIRECT queue pairs without an IOMMU (the client is trusted with host memory)");

bool lio_allow_db_direct;
module_param_named(allow_db_direct, lio_allow_db_direct, bool, 0644);
MODULE_PARM_DESC(allow_db_direct,
		 "allow DB_DIRECT queue pairs: the client gets the controller's doorbells and reaches every LBA of the SSD");

unsigned int lio_max_sessions = 64;
module_param_named(max_sessions, lio_max_sessions, uint, 0644);
MODULE_PARM_DESC(max_sessions, "open sessions per controller (opens beyond fail with EMFILE)");

unsigned int lio_max_session_qpairs = 32;
module_param_named(max_session_qpairs, lio_max_session_qpairs, uint, 0644);
MODULE_PARM_DESC(max_session_qpairs, "queue pairs per session (creates beyond fail with ENOSPC)");

struct workqueue_struct *lio_wq;

static DEFINE_MUTEX(lio_list_lock); /* lio_ssds, lio_next_index */
static LIST_HEAD(lio_ssds);
static unsigned int lio_next_index;

/* Requests come from user space at any rate: one shared limit for all their messages. */
static DEFINE_RATELIMIT_STATE(lio_err_rs, 5 * HZ, 20);

void lio_err(struct lio_ssd *ssd, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	if (!__ratelimit(&lio_err_rs))
		return;
	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	dev_info(&ssd->pdev->dev, "%s: %pV\n", ssd->name, &vaf);
	va_end(args);
}

/* A refusal of the ABI's rules (common/abi.c), logged as lio_err logs; returns r. */
int lio_abi_refuse(struct lio_ssd *ssd, const char *op, int r, const struct lio_abi_err *e)
{
	char msg[LIO_ERR_MAX];

	lio_abi_msg(msg, sizeof(msg), op, e);
	lio_err(ssd, "%s", msg);
	return r;
}

static void lio_ssd_release(struct kref *ref)
{
	struct lio_ssd *ssd = container_of(ref, struct lio_ssd, ref);

	pci_dev_put(ssd->pdev);
	kfree(ssd);
}

void lio_ssd_put(struct lio_ssd *ssd)
{
	kref_put(&ssd->ref, lio_ssd_release);
}

/* ---- sysfs: counters of the whole controller, on the misc device ---- */

static struct lio_ssd *lio_dev_ssd(struct device *dev)
{
	struct miscdevice *misc = dev_get_drvdata(dev);

	return container_of(misc, struct lio_ssd, misc);
}

/* "NAME VALUE" per counter a queue pair keeps (lightiov/counters.h), then sessions, qpairs. */
#define LIO_COUNTER_T struct lio_ctr
static const struct {
	const char *name;
	size_t off;
} lio_ctr_names[] = { LIO_COUNTERS_KEPT(LIO_COUNTER_NAME) };
#undef LIO_COUNTER_T

static ssize_t counters_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct lio_ssd *ssd = lio_dev_ssd(dev);
	unsigned int sessions, qpairs, i;
	struct lio_ctr t;
	int n = 0;

	mutex_lock(&ssd->lock);
	lio_ssd_ctr(ssd, &t);
	sessions = ssd->nsessions;
	qpairs = ssd->nqpairs;
	mutex_unlock(&ssd->lock);
	for (i = 0; i < ARRAY_SIZE(lio_ctr_names); i++)
		n += sysfs_emit_at(buf, n, "%s %llu\n", lio_ctr_names[i].name,
				   *(u64 *)((char *)&t + lio_ctr_names[i].off));
	return n + sysfs_emit_at(buf, n, "sessions %u\nqpairs %u\n", sessions, qpairs);
}
static DEVICE_ATTR_RO(counters);

static ssize_t volumes_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct lio_ssd *ssd = lio_dev_ssd(dev);
	ssize_t n = 0;
	unsigned int i;

	mutex_lock(&ssd->lock);
	/* one page at most: the first volumes of a long table */
	for (i = 0; ssd->vt && i < ssd->vt->n && n < PAGE_SIZE - 96; i++)
		n += sysfs_emit_at(buf, n, "%s %llu %llu%s\n", ssd->vt->e[i].name,
				   ssd->vt->e[i].lba_start, ssd->vt->e[i].lba_count,
				   ssd->vt->e[i].flags & LIO_VOL_ANON ? " anon" : "");
	mutex_unlock(&ssd->lock);
	return n;
}
static DEVICE_ATTR_RO(volumes);

static ssize_t geometry_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	struct lio_ssd *ssd = lio_dev_ssd(dev);

	return sysfs_emit(buf, "lba_shift %u\nlbas %llu\nmdts %u\nqueues %u\nvectors %d\n",
			  ssd->lba_shift, ssd->nsze, ssd->mdts_bytes, ssd->nr_ioq, ssd->nvec);
}
static DEVICE_ATTR_RO(geometry);

static struct attribute *lio_attrs[] = {
	&dev_attr_counters.attr,
	&dev_attr_volumes.attr,
	&dev_attr_geometry.attr,
	NULL,
};
ATTRIBUTE_GROUPS(lio);

/* ---- PCI driver ---- */

static int lio_ssd_name(struct lio_ssd *ssd)
{
	struct lio_ssd *o;
	int r = 0;

	mutex_lock(&lio_list_lock);
	list_for_each_entry(o, &lio_ssds, gnode) {
		if (!strcmp(o->name, ssd->name)) {
			dev_err(&ssd->pdev->dev, "an SSD named %s is bound already (%s)\n",
				ssd->name, pci_name(o->pdev));
			r = -EEXIST;
		}
	}
	if (!r)
		list_add(&ssd->gnode, &lio_ssds);
	mutex_unlock(&lio_list_lock);
	return r;
}

static int lio_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct lio_ssd *ssd;
	int r;

	/* driver_override names us (the id table is empty); and it must be an NVMe function */
	if (!pdev->driver_override || strcmp(pdev->driver_override, "lightiov"))
		return -ENODEV;
	if (pdev->class != PCI_CLASS_STORAGE_EXPRESS) {
		dev_err(&pdev->dev, "class 0x%06x is not an NVMe controller\n", pdev->class);
		return -ENODEV;
	}
	ssd = kzalloc(sizeof(*ssd), GFP_KERNEL);
	if (!ssd)
		return -ENOMEM;
	kref_init(&ssd->ref);
	mutex_init(&ssd->lock);
	INIT_LIST_HEAD(&ssd->sessions);
	INIT_LIST_HEAD(&ssd->gnode);
	ssd->pdev = pci_dev_get(pdev);
	ssd->start_ns = ktime_get_ns();
	mutex_lock(&lio_list_lock);
	snprintf(ssd->name, sizeof(ssd->name), "lio%u", lio_next_index++);
	mutex_unlock(&lio_list_lock);

	r = pcim_enable_device(pdev);
	if (r)
		goto fail_put;
	r = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (r)
		goto fail_put;
	r = pcim_iomap_regions(pdev, BIT(0), "lightiov");
	if (r)
		goto fail_put;
	ssd->bar = pcim_iomap_table(pdev)[0];
	pci_set_master(pdev);
	pci_set_drvdata(pdev, ssd);

	mutex_lock(&ssd->lock);
	r = lio_ctrl_enable(ssd);
	if (!r) {
		r = lio_vol_load(ssd);
		if (r)
			lio_ctrl_disable(ssd);
	}
	mutex_unlock(&ssd->lock);
	if (r)
		goto fail_put;
	r = lio_ssd_name(ssd);
	if (r)
		goto fail_ctrl;
	snprintf(ssd->misc_name, sizeof(ssd->misc_name), "lightiov-%s", ssd->name);
	snprintf(ssd->node_name, sizeof(ssd->node_name), "lightiov/%s", ssd->name);
	ssd->misc.minor = MISC_DYNAMIC_MINOR;
	ssd->misc.name = ssd->misc_name;
	ssd->misc.nodename = ssd->node_name;
	ssd->misc.fops = &lio_fops;
	ssd->misc.groups = lio_groups;
	ssd->misc.mode = 0600;
	ssd->misc.parent = &pdev->dev;
	r = misc_register(&ssd->misc);
	if (r)
		goto fail_list;
	ssd->misc_up = true;
	dev_info(&pdev->dev, "%s: /dev/%s, %llu LBAs of %u bytes, %u volumes, %u queues, %d vectors\n",
		 ssd->name, ssd->node_name, ssd->nsze, 1u << ssd->lba_shift, ssd->vt->n,
		 ssd->nr_ioq, ssd->nvec);
	return 0;

fail_list:
	mutex_lock(&lio_list_lock);
	list_del(&ssd->gnode);
	mutex_unlock(&lio_list_lock);
fail_ctrl:
	mutex_lock(&ssd->lock);
	lio_vol_unload(ssd);
	lio_ctrl_disable(ssd);
	mutex_unlock(&ssd->lock);
fail_put:
	pci_set_drvdata(pdev, NULL);
	lio_ssd_put(ssd);
	return r;
}

/* Unbind: the device node goes first (no new session), then every queue pair and pinned page of
 * the sessions still open; those sessions get -ENODEV until they close.
 */
static void lio_remove(struct pci_dev *pdev)
{
	struct lio_ssd *ssd = pci_get_drvdata(pdev);

	if (ssd->misc_up)
		misc_deregister(&ssd->misc);
	mutex_lock(&lio_list_lock);
	list_del(&ssd->gnode);
	mutex_unlock(&lio_list_lock);
	mutex_lock(&ssd->lock);
	lio_ssd_kill_sessions(ssd);
	ssd->dead = true;
	lio_ctrl_disable(ssd);
	lio_vol_unload(ssd);
	mutex_unlock(&ssd->lock);
	pci_set_drvdata(pdev, NULL);
	lio_ssd_put(ssd);
}

/* Empty on purpose: driver_override alone binds, and udev never loads the module for a disk. */
static const struct pci_device_id lio_ids[] = {
	{ }
};

static struct pci_driver lio_driver = {
	.name = "lightiov",
	.id_table = lio_ids,
	.probe = lio_probe,
	.remove = lio_remove,
};

static int __init lio_init(void)
{
	int r;

	if (lio_max_qpairs < 1 || lio_max_qpairs > 1024) {
		pr_err("lightiov: max_qpairs %u outside 1..1024\n", lio_max_qpairs);
		return -EINVAL;
	}
	lio_wq = alloc_workqueue("lightiov", WQ_HIGHPRI | WQ_MEM_RECLAIM, 0);
	if (!lio_wq)
		return -ENOMEM;
	r = pci_register_driver(&lio_driver);
	if (r)
		destroy_workqueue(lio_wq);
	return r;
}

static void __exit lio_exit(void)
{
	pci_unregister_driver(&lio_driver);
	destroy_workqueue(lio_wq);
}

module_init(lio_init);
module_exit(lio_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("LightIOV: NVMe queue pairs of one SSD served to many VMs");
