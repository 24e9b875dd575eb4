// SPDX-License-Identifier: GPL-2.0
/* Queue memory (LIO_OP_QMEM_ALLOC): DMA-coherent chunks one session owns, handed to the client as
 * a file it maps (lvmm maps it as the vNVMe CMB), and the page allocator rings and doorbells use.
 */
#include <linux/anon_inodes.h>
#include <linux/dma-mapping.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "lio.h"

static void lio_qmem_free(struct kref *ref)
{
	struct lio_qmem_area *qm = container_of(ref, struct lio_qmem_area, ref);
	struct device *dev = &qm->ssd->pdev->dev;
	unsigned int i;
	u64 len;

	for (i = 0; qm->cpu && qm->dma && i < qm->nchunks; i++) {
		len = min_t(u64, LIO_QMEM_CHUNK, qm->size - (u64)i * LIO_QMEM_CHUNK);
		if (qm->cpu[i])
			dma_free_coherent(dev, len, qm->cpu[i], qm->dma[i]);
	}
	kfree(qm->cpu);
	kfree(qm->dma);
	bitmap_free(qm->used);
	lio_ssd_put(qm->ssd);
	kfree(qm);
}

void lio_qmem_put(struct lio_qmem_area *qm)
{
	if (qm)
		kref_put(&qm->ref, lio_qmem_free);
}

void *lio_qmem_ptr(const struct lio_qmem_area *qm, u64 off)
{
	return qm->cpu[off / LIO_QMEM_CHUNK] + off % LIO_QMEM_CHUNK;
}

dma_addr_t lio_qmem_dma(const struct lio_qmem_area *qm, u64 off)
{
	return qm->dma[off / LIO_QMEM_CHUNK] + off % LIO_QMEM_CHUNK;
}

/* bytes (whole pages, zeroed) inside one chunk: the offset, or -ENOSPC. */
s64 lio_qmem_carve(struct lio_qmem_area *qm, u64 bytes)
{
	unsigned long pages = DIV_ROUND_UP(bytes, PAGE_SIZE), per = LIO_QMEM_CHUNK / PAGE_SIZE;
	unsigned long total = qm->size / PAGE_SIZE, start, end, i;

	if (!pages || pages > per)
		return -ENOSPC;
	for (start = 0; start < total; start += per) {
		end = min(start + per, total);
		i = bitmap_find_next_zero_area(qm->used, end, start, pages, 0);
		if (i + pages <= end) {
			bitmap_set(qm->used, i, pages);
			memset(lio_qmem_ptr(qm, (u64)i * PAGE_SIZE), 0, pages * PAGE_SIZE);
			return (s64)i * PAGE_SIZE;
		}
	}
	return -ENOSPC;
}

void lio_qmem_release(struct lio_qmem_area *qm, s64 off, u64 bytes)
{
	if (qm && off >= 0)
		bitmap_clear(qm->used, off / PAGE_SIZE, DIV_ROUND_UP(bytes, PAGE_SIZE));
}

/* Page by page: a chunk from an IOMMU-backed allocator may be a vmap of scattered pages. */
static int lio_qmem_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct lio_qmem_area *qm = file->private_data;
	u64 off = (u64)vma->vm_pgoff << PAGE_SHIFT, len = vma->vm_end - vma->vm_start, i;
	struct page *pg;
	void *p;
	int r;

	if (off > qm->size || len > qm->size - off)
		return -EINVAL;
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP;
	for (i = 0; i < len; i += PAGE_SIZE) {
		p = lio_qmem_ptr(qm, off + i);
		pg = is_vmalloc_addr(p) ? vmalloc_to_page(p) : virt_to_page(p);
		r = remap_pfn_range(vma, vma->vm_start + i, page_to_pfn(pg), PAGE_SIZE,
				    vma->vm_page_prot);
		if (r)
			return r;
	}
	return 0;
}

static int lio_qmem_file_release(struct inode *inode, struct file *file)
{
	lio_qmem_put(file->private_data);
	return 0;
}

static const struct file_operations lio_qmem_fops = {
	.owner = THIS_MODULE,
	.mmap = lio_qmem_mmap,
	.release = lio_qmem_file_release,
	.llseek = noop_llseek,
};

int lio_qmem_alloc(struct lio_session *ss, struct lio_qmem *q)
{
	struct lio_abi_session as = lio_abi_session(ss);
	struct lio_ssd *ssd = ss->ssd;
	struct lio_qmem_area *qm;
	struct lio_abi_err e;
	unsigned int i;
	u64 len;
	int fd, r;

	r = lio_abi_qmem(q, &as, &e);
	if (r)
		return lio_abi_refuse(ssd, "qmem-alloc", r, &e);
	qm = kzalloc(sizeof(*qm), GFP_KERNEL);
	if (!qm)
		return -ENOMEM;
	kref_init(&qm->ref);
	kref_get(&ssd->ref);
	qm->ssd = ssd;
	qm->size = q->size;
	qm->nchunks = DIV_ROUND_UP(q->size, LIO_QMEM_CHUNK);
	qm->cpu = kcalloc(qm->nchunks, sizeof(*qm->cpu), GFP_KERNEL);
	qm->dma = kcalloc(qm->nchunks, sizeof(*qm->dma), GFP_KERNEL);
	qm->used = bitmap_zalloc(q->size / PAGE_SIZE, GFP_KERNEL);
	if (!qm->cpu || !qm->dma || !qm->used)
		goto nomem;
	for (i = 0; i < qm->nchunks; i++) {
		len = min_t(u64, LIO_QMEM_CHUNK, q->size - (u64)i * LIO_QMEM_CHUNK);
		qm->cpu[i] = dma_alloc_coherent(&ssd->pdev->dev, len, &qm->dma[i], GFP_KERNEL);
		if (!qm->cpu[i])
			goto nomem;
	}
	/* the file's reference; the session's is the one kref_init made */
	kref_get(&qm->ref);
	fd = anon_inode_getfd("[lightiov-qmem]", &lio_qmem_fops, qm, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		kref_put(&qm->ref, lio_qmem_free);
		lio_qmem_put(qm);
		return fd;
	}
	ss->qm = qm;
	q->fd = fd;
	return 0;
nomem:
	lio_err(ssd, "qmem-alloc: no coherent memory for %llu bytes", q->size);
	lio_qmem_put(qm);
	return -ENOMEM;
}
