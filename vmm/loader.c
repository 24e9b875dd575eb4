/* Kernel image loaders: ELF64 vmlinux and bzImage, reading through a loader_src into guest RAM.
 * The image is hostile input: every offset, size and address is checked before use. */
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout.h"
#include "loader.h"

#define LOADER_MAX_PHDRS       128
#define LOADER_MAX_NOTES       4096 /* bytes of one PT_NOTE segment searched for lvmm's note */
#define BZ_SECTOR	       512
#define BZ_DEFAULT_SETUP_SECTS 4
#define BZ_ENTRY64_OFFSET      0x200

static int loader_buf_read(void *opaque, uint64_t off, void *dst, uint64_t len)
{
	struct loader_buf *b = opaque;

	memcpy(dst, b->data + off, len);
	return 0;
}

void loader_src_buffer(struct loader_src *src, struct loader_buf *b, const void *data, uint64_t len)
{
	b->data = data;
	src->read = loader_buf_read;
	src->opaque = b;
	src->size = len;
}

static int loader_fd_read(void *opaque, uint64_t off, void *dst, uint64_t len)
{
	struct loader_fd *f = opaque;
	uint8_t *p = dst;

	while (len) {
		/* Large segments go in chunks: pread caps a single call below 2 GiB anyway. */
		size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
		ssize_t n = pread(f->fd, p, chunk, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO; /* the file shrank under us */
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

int loader_src_fd(struct loader_src *src, struct loader_fd *f, int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	f->fd = fd;
	src->read = loader_fd_read;
	src->opaque = f;
	src->size = (uint64_t)st.st_size;
	return 0;
}

/* Reads [off, off+len) of the source after checking it lies inside the source. */
static int src_read(const struct loader_src *src, uint64_t off, void *dst, uint64_t len)
{
	if (off > src->size || len > src->size - off)
		return -EINVAL;
	if (!len)
		return 0;
	return src->read(src->opaque, off, dst, len);
}

/* Guest RAM for [gpa, gpa+len) above the firmware area, or NULL. */
static uint8_t *loader_ram(struct guest_mem *gm, uint64_t gpa, uint64_t len)
{
	if (gpa < LAYOUT_HIGH_RAM)
		return NULL;
	return gmem_ptr(gm, gpa, len);
}

/* Looks for the LVMM_ELFNOTE_AP_ENTRY note in a PT_NOTE segment; a malformed or oversized note
 * segment is simply not one (the image still loads as it would without it). */
static bool loader_elf_ap_entry(const struct loader_src *src, const Elf64_Phdr *p)
{
	uint8_t buf[LOADER_MAX_NOTES];
	uint64_t off = 0, len = p->p_filesz;

	if (!len || len > sizeof(buf) || p->p_offset > src->size || len > src->size - p->p_offset ||
	    src_read(src, p->p_offset, buf, len))
		return false;
	while (len - off >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		uint64_t name, desc;

		memcpy(&nh, buf + off, sizeof(nh));
		name = ((uint64_t)nh.n_namesz + 3) & ~3ULL;
		desc = ((uint64_t)nh.n_descsz + 3) & ~3ULL;
		off += sizeof(nh);
		if (name > len - off || desc > len - off - name)
			return false;
		if (nh.n_type == LVMM_ELFNOTE_AP_ENTRY &&
		    nh.n_namesz == sizeof(LVMM_ELFNOTE_NAME) &&
		    !memcmp(buf + off, LVMM_ELFNOTE_NAME, sizeof(LVMM_ELFNOTE_NAME)))
			return true;
		off += name + desc;
	}
	return false;
}

static int loader_elf(struct guest_mem *gm, const struct loader_src *src, const Elf64_Ehdr *eh,
		      struct loader_result *res, char *err, unsigned errlen)
{
	Elf64_Phdr ph[LOADER_MAX_PHDRS] = {0};
	uint64_t lo = UINT64_MAX, hi = 0, entry = 0;
	bool entry_found = false;
	unsigned nload = 0;
	int r;

	if (eh->e_ident[EI_CLASS] != ELFCLASS64) {
		snprintf(err, errlen, "ELF class %u is not ELF64", eh->e_ident[EI_CLASS]);
		return -ENOEXEC;
	}
	if (eh->e_ident[EI_DATA] != ELFDATA2LSB) {
		snprintf(err, errlen, "ELF data encoding %u is not little-endian",
			 eh->e_ident[EI_DATA]);
		return -ENOEXEC;
	}
	if (eh->e_machine != EM_X86_64) {
		snprintf(err, errlen, "ELF machine %u is not x86-64", eh->e_machine);
		return -ENOEXEC;
	}
	if (eh->e_type != ET_EXEC) {
		snprintf(err, errlen, "ELF type %u is not an executable", eh->e_type);
		return -ENOEXEC;
	}
	if (eh->e_phentsize != sizeof(Elf64_Phdr) || eh->e_phnum == 0 ||
	    eh->e_phnum > LOADER_MAX_PHDRS) {
		snprintf(err, errlen, "ELF has %u program headers of %u bytes (want 1..%d of %zu)",
			 eh->e_phnum, eh->e_phentsize, LOADER_MAX_PHDRS, sizeof(Elf64_Phdr));
		return -ENOEXEC;
	}
	r = src_read(src, eh->e_phoff, ph, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr));
	if (r) {
		snprintf(err, errlen, "ELF program headers at offset %" PRIu64 " are truncated",
			 (uint64_t)eh->e_phoff);
		return r == -EINVAL ? -ENOEXEC : r;
	}

	/* Validate everything before writing anything into the guest. */
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];

		if (p->p_type != PT_LOAD || p->p_memsz == 0)
			continue;
		if (p->p_filesz > p->p_memsz) {
			snprintf(err, errlen,
				 "ELF segment %u: file size %" PRIu64
				 " exceeds memory size %" PRIu64,
				 i, (uint64_t)p->p_filesz, (uint64_t)p->p_memsz);
			return -ENOEXEC;
		}
		if (p->p_offset > src->size || p->p_filesz > src->size - p->p_offset) {
			snprintf(err, errlen,
				 "ELF segment %u: file range at offset %" PRIu64 " is truncated", i,
				 (uint64_t)p->p_offset);
			return -ENOEXEC;
		}
		if (!loader_ram(gm, p->p_paddr, p->p_memsz)) {
			snprintf(err, errlen,
				 "ELF segment %u: 0x%" PRIx64 "+0x%" PRIx64
				 " is outside guest RAM above 1 MiB",
				 i, (uint64_t)p->p_paddr, (uint64_t)p->p_memsz);
			return -ENOEXEC;
		}
		nload++;
		if (p->p_paddr < lo)
			lo = p->p_paddr;
		if (p->p_paddr + p->p_memsz > hi)
			hi = p->p_paddr + p->p_memsz;
		/* vmlinux links e_entry at the physical startup_64; other images may use a virtual
		 * entry, which maps through the segment that contains it. */
		if (!entry_found && eh->e_entry >= p->p_paddr &&
		    eh->e_entry - p->p_paddr < p->p_memsz) {
			entry = eh->e_entry;
			entry_found = true;
		}
	}
	if (!nload) {
		snprintf(err, errlen, "ELF has no loadable segment");
		return -ENOEXEC;
	}
	for (unsigned i = 0; i < eh->e_phnum && !entry_found; i++) {
		const Elf64_Phdr *p = &ph[i];

		if (p->p_type == PT_LOAD && eh->e_entry >= p->p_vaddr &&
		    eh->e_entry - p->p_vaddr < p->p_memsz) {
			entry = p->p_paddr + (eh->e_entry - p->p_vaddr);
			entry_found = true;
		}
	}
	if (!entry_found) {
		snprintf(err, errlen, "ELF entry 0x%" PRIx64 " is outside every loaded segment",
			 (uint64_t)eh->e_entry);
		return -ENOEXEC;
	}

	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		uint8_t *dst;

		if (p->p_type != PT_LOAD || p->p_memsz == 0)
			continue;
		dst = loader_ram(gm, p->p_paddr, p->p_memsz);
		r = src_read(src, p->p_offset, dst, p->p_filesz);
		if (r) {
			snprintf(err, errlen, "ELF segment %u: read failed: %s", i, strerror(-r));
			return r;
		}
		memset(dst + p->p_filesz, 0, p->p_memsz - p->p_filesz);
	}
	res->kind = LOADER_ELF;
	res->ap_entry = false;
	for (unsigned i = 0; i < eh->e_phnum && !res->ap_entry; i++)
		if (ph[i].p_type == PT_NOTE)
			res->ap_entry = loader_elf_ap_entry(src, &ph[i]);
	res->entry = entry;
	res->start = lo;
	res->end = hi;
	return 0;
}

static int loader_bzimage(struct guest_mem *gm, const struct loader_src *src,
			  struct loader_result *res, char *err, unsigned errlen)
{
	struct setup_header h;
	uint64_t setup_size, kernel_size, load, end, need;
	uint8_t *dst;
	int r;

	r = src_read(src, BOOT_HDR_OFFSET, &h, sizeof(h));
	if (r) {
		snprintf(err, errlen, "bzImage setup header is truncated (%" PRIu64 " bytes)",
			 src->size);
		return r == -EINVAL ? -ENOEXEC : r;
	}
	if (h.version < BOOT_MIN_PROTOCOL) {
		snprintf(err, errlen, "boot protocol %u.%02u is older than 2.12",
			 (unsigned)(h.version >> 8), (unsigned)(h.version & 0xff));
		return -ENOEXEC;
	}
	if (!(h.loadflags & BOOT_LOADFLAG_LOADED_HIGH)) {
		snprintf(err, errlen, "zImage (not loaded high) is not supported");
		return -ENOEXEC;
	}
	if (!(h.xloadflags & BOOT_XLF_KERNEL_64)) {
		snprintf(err, errlen, "bzImage has no 64-bit entry (xloadflags 0x%x)",
			 h.xloadflags);
		return -ENOEXEC;
	}
	setup_size =
	    ((uint64_t)(h.setup_sects ? h.setup_sects : BZ_DEFAULT_SETUP_SECTS) + 1) * BZ_SECTOR;
	if (setup_size + BZ_ENTRY64_OFFSET >= src->size) {
		snprintf(err, errlen,
			 "bzImage of %" PRIu64 " bytes is truncated after %" PRIu64
			 " bytes of setup code",
			 src->size, setup_size);
		return -ENOEXEC;
	}
	kernel_size = src->size - setup_size;

	/* A relocatable kernel moves itself to its preferred address; 1 MiB is where the
	 * protocol puts the protected-mode code. A fixed kernel must sit at pref_address. */
	if (h.relocatable_kernel) {
		load = LAYOUT_HIGH_RAM;
		if (h.kernel_alignment == 0 || (h.kernel_alignment & (h.kernel_alignment - 1))) {
			snprintf(err, errlen, "bzImage kernel_alignment 0x%x is not a power of two",
				 h.kernel_alignment);
			return -ENOEXEC;
		}
	} else {
		load = h.pref_address;
	}
	dst = loader_ram(gm, load, kernel_size);
	if (!dst) {
		snprintf(err, errlen,
			 "bzImage kernel of %" PRIu64 " bytes at 0x%" PRIx64
			 " does not fit in guest RAM",
			 kernel_size, load);
		return -EFBIG;
	}
	end = load + kernel_size;
	/* The decompressor needs init_size bytes from where it runs (at least pref_address). */
	need = load > h.pref_address ? load : h.pref_address;
	if (h.init_size) {
		if (!loader_ram(gm, need, h.init_size)) {
			snprintf(err, errlen,
				 "bzImage needs %u bytes of RAM at 0x%" PRIx64 " to decompress",
				 h.init_size, need);
			return -EFBIG;
		}
		if (need + h.init_size > end)
			end = need + h.init_size;
	}
	r = src_read(src, setup_size, dst, kernel_size);
	if (r) {
		snprintf(err, errlen, "bzImage read failed: %s", strerror(-r));
		return r;
	}
	res->kind = LOADER_BZIMAGE;
	res->entry = load + BZ_ENTRY64_OFFSET;
	res->start = load;
	res->end = end;
	res->hdr = h;
	return 0;
}

int loader_load(struct guest_mem *gm, const struct loader_src *src, struct loader_result *res,
		char *err, unsigned errlen)
{
	Elf64_Ehdr eh;
	struct setup_header h;

	memset(res, 0, sizeof(*res));
	if (src->size > gm->size) {
		snprintf(err, errlen, "%" PRIu64 " bytes do not fit in %" PRIu64 " bytes of RAM",
			 src->size, gm->size);
		return -EFBIG;
	}
	if (src->size >= sizeof(eh) && !src_read(src, 0, &eh, sizeof(eh)) &&
	    !memcmp(eh.e_ident, ELFMAG, SELFMAG))
		return loader_elf(gm, src, &eh, res, err, errlen);
	if (src->size >= BOOT_HDR_OFFSET + sizeof(h) &&
	    !src_read(src, BOOT_HDR_OFFSET, &h, sizeof(h)) && h.header == BOOT_HDR_MAGIC &&
	    h.boot_flag == BOOT_FLAG_MAGIC)
		return loader_bzimage(gm, src, res, err, errlen);
	snprintf(err, errlen, "not an ELF64 or bzImage (%" PRIu64 " bytes)", src->size);
	return -ENOEXEC;
}
