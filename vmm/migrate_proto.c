/* Live migration's frames and their order (migrate_proto.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "migrate_proto.h"

#define MIG_MAX_CPUS 64u

static const char *const mig_names[MIG_NTYPES] = {
    [MIG_HELLO] = "HELLO", [MIG_CONFIG] = "CONFIG", [MIG_MEMORY] = "MEMORY", [MIG_MEMFD] = "MEMFD",
    [MIG_STATE] = "STATE", [MIG_READY] = "READY",   [MIG_COMMIT] = "COMMIT", [MIG_DONE] = "DONE",
    [MIG_ERROR] = "ERROR", [MIG_FDS] = "FDS",
};

const char *mig_type_name(uint32_t type)
{
	return type && type < MIG_NTYPES ? mig_names[type] : "unknown";
}

void mig_make_hdr(struct mig_hdr *h, uint32_t type, uint64_t len)
{
	memset(h, 0, sizeof(*h));
	h->magic = MIG_MAGIC;
	h->version = MIG_VERSION;
	h->type = (uint16_t)type;
	h->len = len;
}

int mig_check_hdr(const struct mig_hdr *h, char *err, unsigned errlen)
{
	uint64_t min = 0, max = 0;

	if (h->magic != MIG_MAGIC) {
		snprintf(err, errlen, "not an lvmm migration stream (magic 0x%08x)", h->magic);
		return -EPROTO;
	}
	if (h->version != MIG_VERSION) {
		snprintf(err, errlen, "migration protocol version %u, this lvmm speaks %u",
			 h->version, MIG_VERSION);
		return -EPROTO;
	}
	if (h->flags || h->pad) {
		snprintf(err, errlen, "frame %s: reserved header fields are not zero",
			 mig_type_name(h->type));
		return -EPROTO;
	}
	switch (h->type) {
	case MIG_HELLO:
		min = max = sizeof(struct mig_hello);
		break;
	case MIG_CONFIG:
		min = 2;
		max = MIG_MAX_CONFIG;
		break;
	case MIG_MEMORY:
		min = 8 + MIG_PAGE;
		max = 8 + MIG_MAX_PAGES;
		break;
	case MIG_MEMFD:
		min = max = sizeof(struct mig_memfd);
		break;
	case MIG_FDS:
		min = max = sizeof(struct mig_fd);
		break;
	case MIG_STATE:
		min = 1;
		max = MIG_MAX_STATE;
		break;
	case MIG_READY:
	case MIG_COMMIT:
	case MIG_DONE:
		break;
	case MIG_ERROR:
		max = MIG_MAX_ERROR;
		break;
	default:
		snprintf(err, errlen, "unknown frame type %u", h->type);
		return -EPROTO;
	}
	if (h->len < min || h->len > max) {
		snprintf(err, errlen, "frame %s: %llu bytes, outside %llu..%llu",
			 mig_type_name(h->type), (unsigned long long)h->len,
			 (unsigned long long)min, (unsigned long long)max);
		return -EPROTO;
	}
	return 0;
}

void mig_rx_init(struct mig_rx *rx)
{
	memset(rx, 0, sizeof(*rx));
	rx->phase = MIG_RX_HELLO;
}

int mig_rx_expect(const struct mig_rx *rx, uint32_t type, char *err, unsigned errlen)
{
	bool ok;

	switch (rx->phase) {
	case MIG_RX_HELLO:
		ok = type == MIG_HELLO;
		break;
	case MIG_RX_CONFIG:
		ok = type == MIG_CONFIG;
		break;
	case MIG_RX_MEMORY:
		if (rx->hello.local)
			ok = type == MIG_FDS || type == (rx->got_memfd ? MIG_STATE : MIG_MEMFD);
		else
			ok = type == MIG_MEMORY || type == MIG_FDS || type == MIG_STATE;
		break;
	case MIG_RX_COMMIT:
		ok = type == MIG_COMMIT;
		break;
	default:
		ok = false;
	}
	if (type == MIG_ERROR && rx->phase != MIG_RX_END)
		ok = true;
	if (!ok) {
		snprintf(err, errlen, "frame %s out of order", mig_type_name(type));
		return -EPROTO;
	}
	return 0;
}

int mig_rx_frame(struct mig_rx *rx, uint32_t type, const uint8_t *payload, uint64_t len,
		 uint64_t *off, const uint8_t **pages, uint64_t *npages, char *err, unsigned errlen)
{
	int r = mig_rx_expect(rx, type, err, errlen);
	uint64_t o;

	*npages = 0;
	if (r)
		return r;
	switch (type) {
	case MIG_HELLO:
		if (len != sizeof(rx->hello))
			goto short_frame;
		memcpy(&rx->hello, payload, sizeof(rx->hello));
		if (!rx->hello.memory || rx->hello.memory % MIG_PAGE ||
		    rx->hello.memory > MIG_MAX_MEMORY || !rx->hello.ncpus ||
		    rx->hello.ncpus > MIG_MAX_CPUS || rx->hello.local > 1 ||
		    rx->hello.running > 1 || rx->hello.pad || rx->hello.reserved) {
			snprintf(err, errlen,
				 "HELLO: %llu bytes of RAM, %u vCPUs, local %u: not a VM lvmm "
				 "takes",
				 (unsigned long long)rx->hello.memory, rx->hello.ncpus,
				 rx->hello.local);
			return -EPROTO;
		}
		rx->phase = MIG_RX_CONFIG;
		return 0;
	case MIG_CONFIG:
		if (memchr(payload, 0, len)) {
			snprintf(err, errlen, "CONFIG: a NUL byte in the JSON");
			return -EPROTO;
		}
		rx->phase = MIG_RX_MEMORY;
		return 0;
	case MIG_MEMORY:
		if (len < 8 + MIG_PAGE)
			goto short_frame;
		memcpy(&o, payload, 8);
		len -= 8;
		if (o % MIG_PAGE || len % MIG_PAGE || o > rx->hello.memory ||
		    len > rx->hello.memory - o) {
			snprintf(err, errlen,
				 "MEMORY: %llu bytes at offset 0x%llx: not whole pages inside "
				 "%llu bytes of RAM",
				 (unsigned long long)len, (unsigned long long)o,
				 (unsigned long long)rx->hello.memory);
			return -EPROTO;
		}
		*off = o;
		*pages = payload + 8;
		*npages = len;
		rx->memory_frames++;
		rx->memory_bytes += len;
		return 0;
	case MIG_MEMFD: {
		struct mig_memfd m;

		if (len != sizeof(m))
			goto short_frame;
		memcpy(&m, payload, sizeof(m));
		if (m.size != rx->hello.memory) {
			snprintf(err, errlen, "MEMFD: %llu bytes, the VM has %llu",
				 (unsigned long long)m.size, (unsigned long long)rx->hello.memory);
			return -EPROTO;
		}
		rx->got_memfd = true;
		return 0;
	}
	case MIG_FDS: {
		struct mig_fd f;

		if (len != sizeof(f))
			goto short_frame;
		memcpy(&f, payload, sizeof(f));
		if (!f.id[0] || !memchr(f.id, 0, sizeof(f.id)) || !f.count ||
		    f.count > MIG_MAX_DEV_FDS || f.index >= f.count || rx->fds >= MIG_MAX_FDS) {
			snprintf(err, errlen,
				 "FDS: fd %u of %u of a device (at most %u each, %u in all): not "
				 "one lvmm takes",
				 f.index, f.count, MIG_MAX_DEV_FDS, MIG_MAX_FDS);
			return -EPROTO;
		}
		rx->fds++;
		return 0;
	}
	case MIG_STATE:
		rx->phase = MIG_RX_COMMIT;
		return 0;
	case MIG_COMMIT:
		rx->phase = MIG_RX_END;
		return 0;
	case MIG_ERROR:
		snprintf(err, errlen, "the source gave up: %.*s",
			 (int)(len < MIG_MAX_ERROR ? len : MIG_MAX_ERROR), (const char *)payload);
		return -ECANCELED;
	}
	snprintf(err, errlen, "frame %s out of order", mig_type_name(type));
	return -EPROTO;
short_frame:
	snprintf(err, errlen, "frame %s: %llu bytes is the wrong size", mig_type_name(type),
		 (unsigned long long)len);
	return -EPROTO;
}
