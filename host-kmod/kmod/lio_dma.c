// SPDX-License-Identifier: GPL-2.0
/* A session's DMA window: the memfd pages of each region pinned (a page reference held until
 * release) and mapped for the controller through the DMA API, plus CPU access by GPA.
 */
#include <linux/capability.h>
#include <linux/dma-mapping.h>
#include <linux/file.h>
#include <linux/highmem.h>
#include <linux/memfd.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/shmem_fs.h>
#include <linux/slab.h>

#include "lio.h"

static void lio_region_drop(struct device *dev, struct lio_region *r)
{
	unsigned long i;

	for (i = 0; i < r->npages && r->pages; i++) {
		if (!r->pages[i])
			break;
		if (r->dma && !dma_mapping_error(dev, r->dma[i]))
			dma_unmap_page(dev, r->dma[i], PAGE_SIZE, DMA_BIDIRECTIONAL);
		/* the controller wrote behind the page cache's back */
		set_page_dirty_lock(r->pages[i]);
		put_page(r->pages[i]);
	}
	kvfree(r->pages);
	kvfree(r->dma);
	memset(r, 0, sizeof(*r));
}

/* Pinned pages count against the registering process's RLIMIT_MEMLOCK, as RDMA and io_uring
 * count theirs: mm->pinned_vm, unless it has CAP_IPC_LOCK. The mm stays charged (mmgrab) until
 * the window is dropped, from whatever context that happens in.
 */
static int lio_win_charge(struct lio_ssd *ssd, struct lio_window *win, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct mm_struct *mm = current->mm;
	s64 pinned;

	if (!mm)
		return -EPERM;
	pinned = atomic64_add_return(npages, &mm->pinned_vm);
	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		lio_err(ssd, "dma-register: %lu pages would make %lld pinned, over RLIMIT_MEMLOCK (%lu pages)",
			npages, pinned, limit);
		return -ENOMEM;
	}
	mmgrab(mm);
	win->mm = mm;
	win->pinned = npages;
	return 0;
}

void lio_win_drop(struct lio_ssd *ssd, struct lio_window *win)
{
	unsigned int i;

	for (i = 0; i < win->n; i++)
		lio_region_drop(&ssd->pdev->dev, &win->r[i]);
	if (win->mm) {
		atomic64_sub(win->pinned, &win->mm->pinned_vm);
		mmdrop(win->mm);
	}
	memset(win, 0, sizeof(*win));
}

/* The fd must be a memfd the client cannot shrink (softssd asks the same), long enough. */
static struct file *lio_region_file(struct lio_ssd *ssd, unsigned int i,
				    const struct lio_dma_region *d)
{
	struct file *f = fget(d->fd);

	if (!f) {
		lio_err(ssd, "dma-register: region %u: fd %d is not open", i, d->fd);
		return ERR_PTR(-EBADF);
	}
	if (!shmem_file(f)) {
		lio_err(ssd, "dma-register: region %u: fd %d is not a memfd", i, d->fd);
		fput(f);
		return ERR_PTR(-EBADF);
	}
	if (!(SHMEM_I(file_inode(f))->seals & F_SEAL_SHRINK)) {
		lio_err(ssd, "dma-register: region %u: memfd not sealed with F_SEAL_SHRINK", i);
		fput(f);
		return ERR_PTR(-EPERM);
	}
	if (i_size_read(file_inode(f)) < d->fd_offset + d->size) {
		lio_err(ssd, "dma-register: region %u: memfd of %lld bytes, region ends at %llu", i,
			i_size_read(file_inode(f)), d->fd_offset + d->size);
		fput(f);
		return ERR_PTR(-EINVAL);
	}
	return f;
}

static int lio_region_pin(struct lio_ssd *ssd, unsigned int i, const struct lio_dma_region *d,
			  struct lio_region *r)
{
	struct device *dev = &ssd->pdev->dev;
	pgoff_t first = d->fd_offset >> PAGE_SHIFT;
	struct file *f;
	unsigned long p;
	int ret = 0;

	f = lio_region_file(ssd, i, d);
	if (IS_ERR(f))
		return PTR_ERR(f);
	r->gpa = d->gpa;
	r->size = d->size;
	r->npages = d->size >> PAGE_SHIFT;
	r->pages = kvcalloc(r->npages, sizeof(*r->pages), GFP_KERNEL);
	r->dma = kvcalloc(r->npages, sizeof(*r->dma), GFP_KERNEL);
	if (!r->pages || !r->dma) {
		ret = -ENOMEM;
		goto out;
	}
	for (p = 0; p < r->npages; p++) {
		struct page *pg = shmem_read_mapping_page(f->f_mapping, first + p);

		if (IS_ERR(pg)) {
			ret = PTR_ERR(pg);
			lio_err(ssd, "dma-register: region %u: page %lu: error %d", i, p, ret);
			goto out;
		}
		r->pages[p] = pg;
		r->dma[p] = dma_map_page(dev, pg, 0, PAGE_SIZE, DMA_BIDIRECTIONAL);
		if (dma_mapping_error(dev, r->dma[p])) {
			lio_err(ssd, "dma-register: region %u: page %lu: DMA mapping failed", i, p);
			ret = -ENOMEM;
			goto out;
		}
		cond_resched();
	}
out:
	fput(f);
	if (ret)
		lio_region_drop(dev, r);
	return ret;
}

int lio_win_register(struct lio_session *ss, const struct lio_dma_window *w)
{
	struct lio_abi_session as = lio_abi_session(ss);
	struct lio_ssd *ssd = ss->ssd;
	struct lio_window nw = {};
	struct lio_abi_err e;
	u64 total = 0;
	unsigned int i;
	int r;

	r = lio_abi_dma_window(w, &as, (u64)lio_max_window_mb << 20, &e);
	if (r)
		return lio_abi_refuse(ssd, "dma-register", r, &e);
	for (i = 0; i < w->nr_regions; i++)
		total += w->r[i].size;
	r = lio_win_charge(ssd, &nw, total >> PAGE_SHIFT);
	if (r)
		return r;
	for (i = 0; i < w->nr_regions; i++) {
		r = lio_region_pin(ssd, i, &w->r[i], &nw.r[i]);
		if (r) {
			nw.n = i;
			lio_win_drop(ssd, &nw);
			return r;
		}
		nw.cr[i].gpa = w->r[i].gpa;
		nw.cr[i].size = w->r[i].size;
	}
	nw.n = w->nr_regions;
	nw.bytes = total;
	lio_win_drop(ssd, &ss->win);
	ss->win = nw;
	return 0;
}

static const struct lio_region *lio_win_find(const struct lio_window *win, u64 gpa)
{
	unsigned int i;

	for (i = 0; i < win->n; i++)
		if (gpa >= win->r[i].gpa && gpa - win->r[i].gpa < win->r[i].size)
			return &win->r[i];
	return NULL;
}

/* Copies len bytes between buf and guest memory at gpa; -EFAULT when any byte is outside. */
int lio_win_copy(const struct lio_window *win, u64 gpa, void *buf, u32 len, bool to_guest)
{
	while (len) {
		const struct lio_region *r = lio_win_find(win, gpa);
		u64 off;
		u32 n;
		void *p;

		if (!r)
			return -EFAULT;
		off = gpa - r->gpa;
		n = min_t(u64, len, PAGE_SIZE - (off & ~PAGE_MASK));
		p = kmap_local_page(r->pages[off >> PAGE_SHIFT]);
		if (to_guest)
			memcpy(p + (off & ~PAGE_MASK), buf, n);
		else
			memcpy(buf, p + (off & ~PAGE_MASK), n);
		kunmap_local(p);
		gpa += n;
		buf += n;
		len -= n;
	}
	return 0;
}

/* One aligned 32-bit word, read or written once (doorbell slots the guest changes at will). */
int lio_win_read32(const struct lio_window *win, u64 gpa, u32 *val)
{
	const struct lio_region *r = lio_win_find(win, gpa);
	u64 off;
	u32 *p;

	if (!r || gpa % 4)
		return -EFAULT;
	off = gpa - r->gpa;
	p = kmap_local_page(r->pages[off >> PAGE_SHIFT]);
	*val = le32_to_cpu(READ_ONCE(p[(off & ~PAGE_MASK) / 4]));
	kunmap_local(p);
	return 0;
}

int lio_win_write32(const struct lio_window *win, u64 gpa, u32 val)
{
	const struct lio_region *r = lio_win_find(win, gpa);
	u64 off;
	u32 *p;

	if (!r || gpa % 4)
		return -EFAULT;
	off = gpa - r->gpa;
	p = kmap_local_page(r->pages[off >> PAGE_SHIFT]);
	WRITE_ONCE(p[(off & ~PAGE_MASK) / 4], cpu_to_le32(val));
	kunmap_local(p);
	return 0;
}

/* The controller's address of gpa (inside one page of the window). */
int lio_win_dma(const struct lio_window *win, u64 gpa, dma_addr_t *dma)
{
	const struct lio_region *r = lio_win_find(win, gpa);
	u64 off;

	if (!r)
		return -EFAULT;
	off = gpa - r->gpa;
	*dma = r->dma[off >> PAGE_SHIFT] + (off & ~PAGE_MASK);
	return 0;
}
