/* VM configuration: defaults, size and --vnvme argument parsing, whole-config validation.
 * Every error names the offending value so the CLI and the API can print it as is. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "devices.h"
#include "lightiov/size.h"
#include "fsutil.h"
#include "layout.h"

/* RAM above the 32-bit hole continues at 4 GiB and must end below the 64-bit PCI window: 511 GiB */
#define CONFIG_MAX_MEMORY (LAYOUT_MMIO64_START - LAYOUT_RAM_HIGH + LAYOUT_MMIO32_START)
#define CONFIG_MAX_CPUS	  255
/* cloud-hypervisor's bound on platform.num_pci_segments (acpi.h's ACPI_MAX_PCI_SEGMENTS) */
#define CONFIG_MAX_PCI_SEGMENTS 96
/* A guest RAM size must be a whole number of pages: KVM memory slots are page granular. */
#define CONFIG_PAGE_SIZE 4096ULL

void config_defaults(struct vm_config *c)
{
	memset(c, 0, sizeof(*c));
	c->cpus = CONFIG_DEFAULT_CPUS;
	c->max_cpus = CONFIG_DEFAULT_CPUS;
	c->memory = CONFIG_DEFAULT_MEMORY;
	c->serial = SERIAL_STDIO;
	c->serial_limit = CONFIG_DEFAULT_SERIAL_LIMIT;
	c->num_pci_segments = 1;
}

int config_parse_size(const char *s, uint64_t *out, char *err, unsigned errlen)
{
	int r = lio_size_parse(s, out);

	if (!r)
		return 0;
	if (r == -LIO_SIZE_EMPTY)
		snprintf(err, errlen, "size is empty");
	else
		snprintf(err, errlen, "'%s' %s", s, lio_size_why(r));
	return -EINVAL;
}

static const char *const vnvme_mode_names[] = {
    [VNVME_EMULATE] = "emulate",
    [VNVME_PASSTHROUGH] = "passthrough",
    [VNVME_ISOLATED] = "isolated",
};

/* Names of ids, ssds and volumes end up in API paths, socket and device paths and file names:
 * keep them plain. The one check for the command line and the API alike. */
bool config_vnvme_name_ok(const char *s, size_t len, size_t max)
{
	if (!s || len == 0 || len >= max || (len <= 2 && !strncmp(s, "..", len)))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

static int vnvme_copy_name(char *dst, size_t max, const char *key, const char *v, size_t len,
			   char *err, unsigned errlen)
{
	if (!config_vnvme_name_ok(v, len, max)) {
		snprintf(err, errlen, "vnvme: %s '%.*s' must be 1-%zu characters of [A-Za-z0-9_.-]",
			 key, (int)len, v, max - 1);
		return -EINVAL;
	}
	memcpy(dst, v, len);
	dst[len] = '\0';
	return 0;
}

static int vnvme_parse_bool(const char *key, const char *v, bool *out, char *err, unsigned errlen)
{
	if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) {
		*out = true;
		return 0;
	}
	if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no")) {
		*out = false;
		return 0;
	}
	snprintf(err, errlen, "vnvme: %s '%s' is not on or off", key, v);
	return -EINVAL;
}

int config_parse_disk(const char *s, struct virtio_blk_config *out, char *err, unsigned errlen)
{
	char buf[CONFIG_PATH_MAX + 512], *tok, *save = NULL;
	struct virtio_blk_config o;
	int r = 0;

	memset(&o, 0, sizeof(o));
	if (!s || !*s || strlen(s) >= sizeof(buf)) {
		snprintf(err, errlen, "disk: %s argument", s && *s ? "overlong" : "empty");
		return -EINVAL;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok && !r; tok = strtok_r(NULL, ",", &save)) {
		char *v = strchr(tok, '=');

		if (!v) {
			snprintf(err, errlen, "disk: '%s' is not KEY=VALUE", tok);
			return -EINVAL;
		}
		*v++ = '\0';
		if (!strcmp(tok, "path")) {
			if (!*v || strlen(v) >= sizeof(o.path)) {
				snprintf(err, errlen, "disk: path is %s",
					 *v ? "too long" : "empty");
				return -EINVAL;
			}
			strcpy(o.path, v);
		} else if (!strcmp(tok, "readonly")) {
			r = vnvme_parse_bool("readonly", v, &o.readonly, err, errlen);
		} else if (!strcmp(tok, "direct")) {
			r = vnvme_parse_bool("direct", v, &o.direct, err, errlen);
		} else if (!strcmp(tok, "num_queues") || !strcmp(tok, "queue_size")) {
			bool nq = tok[0] == 'n';

			if (config_parse_count(v, nq ? 1 : 2,
					       nq ? VIRTIO_BLK_MAX_QUEUES
						  : VIRTIO_BLK_MAX_QUEUE_SIZE,
					       nq ? &o.num_queues : &o.queue_size)) {
				snprintf(err, errlen, "disk: %s '%s' is not a number in %u..%u",
					 tok, v, nq ? 1 : 2,
					 nq ? VIRTIO_BLK_MAX_QUEUES : VIRTIO_BLK_MAX_QUEUE_SIZE);
				return -EINVAL;
			}
		} else if (!strcmp(tok, "id")) {
			r = vnvme_copy_name(o.id, sizeof(o.id), "id", v, strlen(v), err, errlen);
		} else if (!strcmp(tok, "serial")) {
			if (strlen(v) >= sizeof(o.serial)) {
				snprintf(err, errlen, "disk: serial '%s' is longer than %zu bytes",
					 v, sizeof(o.serial) - 1);
				return -EINVAL;
			}
			strcpy(o.serial, v);
		} else {
			snprintf(err, errlen,
				 "disk: unknown option '%s' (path, readonly, direct, num_queues, "
				 "queue_size, id, serial)",
				 tok);
			return -EINVAL;
		}
	}
	if (r)
		return r;
	if (!o.path[0]) {
		snprintf(err, errlen, "disk: '%s' has no path=IMG", s);
		return -EINVAL;
	}
	*out = o;
	return 0;
}

int config_parse_mac(const char *s, uint8_t mac[6])
{
	unsigned b[6];
	char end;

	if (strlen(s) != 17 || sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3],
				      &b[4], &b[5], &end) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	return 0;
}

int config_validate_net(const struct virtio_net_config *n, char *err, unsigned errlen)
{
	const char *id = n->id[0] ? n->id : "net";
	unsigned qs = n->queue_size, pairs = n->num_queues ? n->num_queues / 2 : 1;

	if (!memchr(n->id, 0, sizeof(n->id)) || !memchr(n->tap, 0, sizeof(n->tap))) {
		snprintf(err, errlen, "net: unterminated string field");
		return -EINVAL;
	}
	if ((n->num_queues && (n->num_queues < 2 || n->num_queues > 2 * VIRTIO_NET_MAX_PAIRS ||
			       (n->num_queues & 1))) ||
	    (qs && (qs < 2 || qs > 1024 || (qs & (qs - 1))))) {
		snprintf(err, errlen,
			 "net %s: num_queues %u, queue_size %u (an even count of 2..%u queues, "
			 "rx and tx of each pair; a power of two of 2..1024 entries)",
			 id, n->num_queues, qs, 2 * VIRTIO_NET_MAX_PAIRS);
		return -EINVAL;
	}
	if (n->mtu && (n->mtu < 68 || n->mtu > 65535)) {
		snprintf(err, errlen, "net %s: mtu %u is outside 68..65535", id, n->mtu);
		return -EINVAL;
	}
	if (n->mac[0] & 1) {
		snprintf(err, errlen, "net %s: mac %02x:%02x:%02x:%02x:%02x:%02x is multicast", id,
			 n->mac[0], n->mac[1], n->mac[2], n->mac[3], n->mac[4], n->mac[5]);
		return -EINVAL;
	}
	if (n->nfds > VIRTIO_NET_MAX_PAIRS || (n->nfds && n->nfds != pairs) ||
	    (!n->nfds && !n->tap[0])) {
		snprintf(err, errlen,
			 "net %s: %u fds for %u queue pairs (a tap name, or one tap fd per pair)",
			 id, n->nfds, pairs);
		return -EINVAL;
	}
	for (unsigned i = 0; i < n->nfds; i++)
		if (n->fds[i] < 0) {
			snprintf(err, errlen, "net %s: fd %d", id, n->fds[i]);
			return -EINVAL;
		}
	return 0;
}

int config_parse_net(const char *s, struct virtio_net_config *out, char *err, unsigned errlen)
{
	char buf[512], *tok, *save = NULL;
	struct virtio_net_config o;
	int r = 0;

	memset(&o, 0, sizeof(o));
	if (!s || !*s || strlen(s) >= sizeof(buf)) {
		snprintf(err, errlen, "net: %s argument", s && *s ? "overlong" : "empty");
		return -EINVAL;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok && !r; tok = strtok_r(NULL, ",", &save)) {
		char *v = strchr(tok, '=');

		if (!v) {
			snprintf(err, errlen, "net: '%s' is not KEY=VALUE", tok);
			return -EINVAL;
		}
		*v++ = '\0';
		if (!strcmp(tok, "tap")) {
			if (!*v || strlen(v) >= sizeof(o.tap)) {
				snprintf(err, errlen,
					 "net: tap '%s' is not a name of 1-15 characters", v);
				return -EINVAL;
			}
			strcpy(o.tap, v);
		} else if (!strcmp(tok, "fd")) {
			/* fd=N or fd=N:N:... (one per queue pair), for a caller that opened them */
			char *f, *fs = NULL;

			for (f = strtok_r(v, ":", &fs); f; f = strtok_r(NULL, ":", &fs)) {
				unsigned fd;

				if (o.nfds == VIRTIO_NET_MAX_PAIRS ||
				    config_parse_count(f, 0, 1 << 20, &fd)) {
					snprintf(err, errlen, "net: fd '%s' (at most %d numbers)",
						 f, VIRTIO_NET_MAX_PAIRS);
					return -EINVAL;
				}
				o.fds[o.nfds++] = (int)fd;
			}
		} else if (!strcmp(tok, "mac")) {
			if (config_parse_mac(v, o.mac)) {
				snprintf(err, errlen, "net: mac '%s' is not xx:xx:xx:xx:xx:xx", v);
				return -EINVAL;
			}
		} else if (!strcmp(tok, "num_queues") || !strcmp(tok, "queue_size") ||
			   !strcmp(tok, "mtu")) {
			unsigned *dst = tok[0] == 'n'	? &o.num_queues
					: tok[0] == 'q' ? &o.queue_size
							: &o.mtu;

			if (config_parse_count(v, 1, 65535, dst)) {
				snprintf(err, errlen, "net: %s '%s' is not a number", tok, v);
				return -EINVAL;
			}
		} else if (!strcmp(tok, "id")) {
			r = vnvme_copy_name(o.id, sizeof(o.id), "id", v, strlen(v), err, errlen);
		} else if (!strcmp(tok, "ip") || !strcmp(tok, "mask")) {
			/* the host side's address, set when lvmm opens the tap (cloud-hypervisor's)
			 */
			struct in_addr a;

			if (inet_pton(AF_INET, v, &a) != 1) {
				snprintf(err, errlen, "net: %s '%s' is not an IPv4 address", tok,
					 v);
				return -EINVAL;
			}
			*(tok[0] == 'i' ? &o.host_ip : &o.host_mask) = a.s_addr;
		} else if (!strcmp(tok, "host_mac") || !strcmp(tok, "vhost_user") ||
			   !strcmp(tok, "iommu")) {
			snprintf(err, errlen, "net: '%s' is not supported", tok);
			return -EINVAL;
		} else {
			snprintf(err, errlen,
				 "net: unknown option '%s' (tap, fd, mac, ip, mask, num_queues, "
				 "queue_size, mtu, id)",
				 tok);
			return -EINVAL;
		}
	}
	if (r)
		return r;
	if (!o.tap[0] && !o.nfds) {
		snprintf(err, errlen, "net: '%s' needs tap=NAME (or fd=N)", s);
		return -EINVAL;
	}
	if ((o.host_ip || o.host_mask) && (o.nfds || !o.host_ip)) {
		snprintf(err, errlen, "net: ip= (and mask=) address a tap lvmm opens by name");
		return -EINVAL;
	}
	if (o.host_ip && !o.host_mask)
		o.host_mask = htonl(0xffffff00u); /* cloud-hypervisor's default 255.255.255.0 */
	r = config_validate_net(&o, err, errlen);
	if (!r)
		*out = o;
	return r;
}

int config_validate_vsock(const struct virtio_vsock_config *v, char *err, unsigned errlen)
{
	if (v->cid < VIRTIO_VSOCK_MIN_CID || v->cid >= UINT32_MAX) {
		snprintf(err, errlen, "vsock: cid %llu is outside 3..4294967294",
			 (unsigned long long)v->cid);
		return -EINVAL;
	}
	if (!memchr(v->socket, 0, sizeof(v->socket)) || !memchr(v->id, 0, sizeof(v->id)) ||
	    v->socket[0] != '/' || strlen(v->socket) + 12 > VIRTIO_VSOCK_PATH_MAX) {
		snprintf(err, errlen,
			 "vsock: socket must be an absolute path of at most %d characters (lvmm "
			 "appends _<port> for the guest's connections)",
			 VIRTIO_VSOCK_PATH_MAX - 12);
		return -EINVAL;
	}
	return 0;
}

int config_parse_vsock(const char *s, struct virtio_vsock_config *out, char *err, unsigned errlen)
{
	char buf[512], *tok, *save = NULL;
	struct virtio_vsock_config o;
	bool cid = false;
	int r = 0;

	memset(&o, 0, sizeof(o));
	if (!s || !*s || strlen(s) >= sizeof(buf)) {
		snprintf(err, errlen, "vsock: %s argument", s && *s ? "overlong" : "empty");
		return -EINVAL;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok && !r; tok = strtok_r(NULL, ",", &save)) {
		char *v = strchr(tok, '='), *end;

		if (!v) {
			snprintf(err, errlen, "vsock: '%s' is not KEY=VALUE", tok);
			return -EINVAL;
		}
		*v++ = '\0';
		if (!strcmp(tok, "cid")) {
			errno = 0;
			o.cid = strtoull(v, &end, 10);
			if (errno || *end || !*v || *v == '-') {
				snprintf(err, errlen, "vsock: cid '%s' is not a number", v);
				return -EINVAL;
			}
			cid = true;
		} else if (!strcmp(tok, "socket")) {
			if (strlen(v) >= sizeof(o.socket)) {
				snprintf(err, errlen, "vsock: socket path is too long");
				return -EINVAL;
			}
			strcpy(o.socket, v);
		} else if (!strcmp(tok, "id")) {
			r = vnvme_copy_name(o.id, sizeof(o.id), "id", v, strlen(v), err, errlen);
		} else {
			snprintf(err, errlen, "vsock: unknown option '%s' (cid, socket, id)", tok);
			return -EINVAL;
		}
	}
	if (r)
		return r;
	if (!cid || !o.socket[0]) {
		snprintf(err, errlen, "vsock: '%s' needs cid=N and socket=PATH", s);
		return -EINVAL;
	}
	r = config_validate_vsock(&o, err, errlen);
	if (!r)
		*out = o;
	return r;
}

int config_validate_fs(const struct virtio_fs_config *f, char *err, unsigned errlen)
{
	unsigned qs = f->queue_size;

	if (!memchr(f->tag, 0, sizeof(f->tag)) || !memchr(f->socket, 0, sizeof(f->socket)) ||
	    !memchr(f->id, 0, sizeof(f->id))) {
		snprintf(err, errlen, "fs: unterminated string field");
		return -EINVAL;
	}
	if (!f->tag[0]) {
		snprintf(err, errlen, "fs: a tag of 1..%d bytes is required", VIRTIO_FS_TAG_MAX);
		return -EINVAL;
	}
	if (f->socket[0] != '/') {
		snprintf(err, errlen,
			 "fs %s: socket must be an absolute path of at most %d characters", f->tag,
			 VIRTIO_FS_PATH_MAX - 1);
		return -EINVAL;
	}
	if (f->num_queues > VIRTIO_FS_MAX_QUEUES ||
	    (qs && (qs < 2 || qs > VIRTIO_FS_QUEUE_MAX || (qs & (qs - 1))))) {
		snprintf(err, errlen,
			 "fs %s: num_queues %u, queue_size %u (1..%d request queues, a power of "
			 "two of 2..%u entries)",
			 f->tag, f->num_queues, qs, VIRTIO_FS_MAX_QUEUES, VIRTIO_FS_QUEUE_MAX);
		return -EINVAL;
	}
	return 0;
}

int config_parse_fs(const char *s, struct virtio_fs_config *out, char *err, unsigned errlen)
{
	char buf[512], *tok, *save = NULL;
	struct virtio_fs_config o;
	int r = 0;

	memset(&o, 0, sizeof(o));
	if (!s || !*s || strlen(s) >= sizeof(buf)) {
		snprintf(err, errlen, "fs: %s argument", s && *s ? "overlong" : "empty");
		return -EINVAL;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok && !r; tok = strtok_r(NULL, ",", &save)) {
		char *v = strchr(tok, '=');

		if (!v) {
			snprintf(err, errlen, "fs: '%s' is not KEY=VALUE", tok);
			return -EINVAL;
		}
		*v++ = '\0';
		if (!strcmp(tok, "tag") || !strcmp(tok, "socket")) {
			char *dst = tok[0] == 't' ? o.tag : o.socket;
			size_t max = tok[0] == 't' ? sizeof(o.tag) : sizeof(o.socket);

			if (!*v || strlen(v) >= max) {
				snprintf(err, errlen, "fs: %s is %s (1..%zu characters)", tok,
					 *v ? "too long" : "empty", max - 1);
				return -EINVAL;
			}
			strcpy(dst, v);
		} else if (!strcmp(tok, "num_queues") || !strcmp(tok, "queue_size")) {
			bool nq = tok[0] == 'n';
			unsigned lo = nq ? 1 : 2,
				 hi = nq ? VIRTIO_FS_MAX_QUEUES : VIRTIO_FS_QUEUE_MAX;

			if (config_parse_count(v, lo, hi, nq ? &o.num_queues : &o.queue_size)) {
				snprintf(err, errlen, "fs: %s '%s' is not a number in %u..%u", tok,
					 v, lo, hi);
				return -EINVAL;
			}
		} else if (!strcmp(tok, "id")) {
			r = vnvme_copy_name(o.id, sizeof(o.id), "id", v, strlen(v), err, errlen);
		} else {
			snprintf(
			    err, errlen,
			    "fs: unknown option '%s' (tag, socket, num_queues, queue_size, id)",
			    tok);
			return -EINVAL;
		}
	}
	if (r)
		return r;
	if (!o.tag[0] || !o.socket[0]) {
		snprintf(err, errlen, "fs: '%s' needs tag=TAG and socket=PATH", s);
		return -EINVAL;
	}
	r = config_validate_fs(&o, err, errlen);
	if (!r)
		*out = o;
	return r;
}

int config_validate_device(const struct vfio_pci_config *d, char *err, unsigned errlen)
{
	if (!memchr(d->path, 0, sizeof(d->path)) || !memchr(d->id, 0, sizeof(d->id))) {
		snprintf(err, errlen, "device: unterminated string field");
		return -EINVAL;
	}
	if (!d->path[0]) {
		snprintf(err, errlen, "device: path=/sys/bus/pci/devices/BDF is required");
		return -EINVAL;
	}
	if (d->iommu || d->pci_segment) {
		snprintf(err, errlen, "device %s: %s is not supported", d->path,
			 d->iommu ? "iommu=on (no virtual IOMMU)" : "a pci_segment other than 0");
		return -EINVAL;
	}
	return 0;
}

/* Device i names a host function no device before it names: one function, one user (two
 * would reset it under each other). An address that does not parse is the device's error. */
static int config_device_unique(const struct vm_config *c, unsigned i, char *err, unsigned errlen)
{
	char a[32], b[32], why[160];

	if (vfio_parse_bdf(c->devices[i].path, a, sizeof(a), why, sizeof(why)))
		return 0;
	for (unsigned j = 0; j < i; j++)
		if (!vfio_parse_bdf(c->devices[j].path, b, sizeof(b), why, sizeof(why)) &&
		    !strcmp(a, b)) {
			snprintf(err, errlen, "device: %s is passed through twice ('%s' and '%s')",
				 a, c->devices[j].path, c->devices[i].path);
			return -EINVAL;
		}
	return 0;
}

int config_parse_device(const char *s, struct vfio_pci_config *out, char *err, unsigned errlen)
{
	char buf[VFIO_PCI_PATH_MAX + 256], *tok, *save = NULL;
	struct vfio_pci_config o;
	int r = 0;

	memset(&o, 0, sizeof(o));
	if (!s || !*s || strlen(s) >= sizeof(buf)) {
		snprintf(err, errlen, "device: %s argument", s && *s ? "overlong" : "empty");
		return -EINVAL;
	}
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok && !r; tok = strtok_r(NULL, ",", &save)) {
		char *v = strchr(tok, '=');

		if (!v) {
			snprintf(err, errlen, "device: '%s' is not KEY=VALUE", tok);
			return -EINVAL;
		}
		*v++ = '\0';
		if (!strcmp(tok, "path")) {
			if (!*v || strlen(v) >= sizeof(o.path)) {
				snprintf(err, errlen, "device: path is %s (1..%zu characters)",
					 *v ? "too long" : "empty", sizeof(o.path) - 1);
				return -EINVAL;
			}
			strcpy(o.path, v);
		} else if (!strcmp(tok, "id")) {
			r = vnvme_copy_name(o.id, sizeof(o.id), "id", v, strlen(v), err, errlen);
		} else if (!strcmp(tok, "iommu")) {
			r = vnvme_parse_bool(tok, v, &o.iommu, err, errlen);
		} else if (!strcmp(tok, "pci_segment")) {
			if (config_parse_count(v, 0, 0xffff, &o.pci_segment)) {
				snprintf(err, errlen, "device: pci_segment '%s' is not a number",
					 v);
				return -EINVAL;
			}
		} else {
			snprintf(err, errlen,
				 "device: unknown option '%s' (path, id, iommu, pci_segment)", tok);
			return -EINVAL;
		}
	}
	if (r)
		return r;
	r = config_validate_device(&o, err, errlen);
	if (!r)
		*out = o;
	return r;
}

int config_parse_count(const char *s, unsigned min, unsigned max, unsigned *out)
{
	uint64_t n;

	if (lio_count_parse(s, min, max, &n))
		return -EINVAL;
	*out = (unsigned)n;
	return 0;
}

/* One key=value option; is_file says which syntax the argument started with. */
static int vnvme_parse_opt(struct vnvme_config *o, bool is_file, const char *key, const char *v,
			   char *err, unsigned errlen)
{
	char sub[200];
	int r;

	if (!strcmp(key, "id"))
		return vnvme_copy_name(o->id, sizeof(o->id), "id", v, strlen(v), err, errlen);
	if (!strcmp(key, "readonly"))
		return vnvme_parse_bool(key, v, &o->readonly, err, errlen);
	if (!strcmp(key, "serial")) {
		size_t n = strlen(v);

		if (n == 0 || n >= sizeof(o->serial)) {
			snprintf(err, errlen, "vnvme: serial '%s' must be 1-%zu characters", v,
				 sizeof(o->serial) - 1);
			return -EINVAL;
		}
		/* The NVMe serial field is printable ASCII. */
		for (size_t i = 0; i < n; i++) {
			if (v[i] < 0x20 || v[i] > 0x7e) {
				snprintf(err, errlen,
					 "vnvme: serial '%s' has a non-printable character", v);
				return -EINVAL;
			}
		}
		memcpy(o->serial, v, n + 1);
		return 0;
	}
	if (!strcmp(key, "mode")) {
		for (unsigned i = 0; i < sizeof(vnvme_mode_names) / sizeof(vnvme_mode_names[0]);
		     i++) {
			if (!strcmp(v, vnvme_mode_names[i])) {
				o->mode = (enum vnvme_mode)i;
				return 0;
			}
		}
		snprintf(err, errlen, "vnvme: mode '%s' is not emulate, passthrough or isolated",
			 v);
		return -EINVAL;
	}
	if (!strcmp(key, "queues")) {
		r = config_parse_count(v, 1, 65535, &o->queues);
		if (r)
			snprintf(err, errlen,
				 "vnvme: queues '%s' is not a number of I/O queues 1..65535", v);
		return r;
	}
	if (is_file && !strcmp(key, "size")) {
		r = config_parse_size(v, &o->size, sub, sizeof(sub));
		if (r)
			snprintf(err, errlen, "vnvme size: %s", sub);
		return r;
	}
	if (!is_file && !strcmp(key, "vol"))
		return vnvme_copy_name(o->vol, CONFIG_SSD_NAME_MAX, "vol", v, strlen(v), err,
				       errlen);
	if (!is_file && !strcmp(key, "doorbell")) {
		if (!strcmp(v, "poll") || !strcmp(v, "eventfd") || !strcmp(v, "auto")) {
			o->doorbell = v[0] == 'p'   ? VNVME_DB_POLL
				      : v[0] == 'e' ? VNVME_DB_EVENTFD
						    : VNVME_DB_AUTO;
			return 0;
		}
		snprintf(err, errlen, "vnvme: doorbell '%s' is not poll, eventfd or auto", v);
		return -EINVAL;
	}
	snprintf(err, errlen, "vnvme: unknown key '%s' for the %s form", key,
		 is_file ? "file=PATH" : "NAME:SIZE");
	return -EINVAL;
}

int config_parse_vnvme(const char *s, struct vnvme_config *out, char *err, unsigned errlen)
{
	struct vnvme_config o;
	char buf[CONFIG_PATH_MAX + 512];
	char *tok, *save = NULL, *colon, *eq;
	bool is_file;
	int r;

	memset(&o, 0, sizeof(o));
	if (!s || !*s) {
		snprintf(err, errlen, "vnvme: empty argument");
		return -EINVAL;
	}
	if (strlen(s) >= sizeof(buf)) {
		snprintf(err, errlen, "vnvme: argument of %zu characters is too long", strlen(s));
		return -EINVAL;
	}
	strcpy(buf, s);

	/* The first option decides the syntax; a path with commas is not supported. */
	tok = strtok_r(buf, ",", &save);
	if (!tok) {
		snprintf(err, errlen, "vnvme: '%s' has no backing (file=PATH or NAME:SIZE)", s);
		return -EINVAL;
	}
	is_file = !strncmp(tok, "file=", 5);
	if (is_file) {
		const char *path = tok + 5;

		if (!*path) {
			snprintf(err, errlen, "vnvme: '%s' has an empty file path", s);
			return -EINVAL;
		}
		if (strlen(path) >= sizeof(o.path)) {
			snprintf(err, errlen, "vnvme: file path is too long");
			return -EINVAL;
		}
		strcpy(o.path, path);
	} else {
		char sub[200];

		colon = strchr(tok, ':');
		if (strchr(tok, '=')) {
			snprintf(err, errlen, "vnvme: '%s' is neither file=PATH nor NAME:SIZE",
				 tok);
			return -EINVAL;
		}
		o.mode = VNVME_ISOLATED; /* the guest is not trusted unless the operator says so */
		r = vnvme_copy_name(o.ssd, CONFIG_SSD_NAME_MAX, "ssd name", tok,
				    colon ? (size_t)(colon - tok) : strlen(tok), err, errlen);
		if (r)
			return r;
		if (!colon)
			goto opts; /* NAME,vol=VOL: an existing volume, checked below */
		r = config_parse_size(colon + 1, &o.size, sub, sizeof(sub));
		if (r) {
			snprintf(err, errlen, "vnvme %s size: %s", o.ssd, sub);
			return r;
		}
		if (o.size == 0) {
			snprintf(err, errlen, "vnvme %s: size must be greater than 0", o.ssd);
			return -EINVAL;
		}
	}

opts:
	while ((tok = strtok_r(NULL, ",", &save))) {
		eq = strchr(tok, '=');
		if (!eq || eq == tok) {
			snprintf(err, errlen, "vnvme: option '%s' is not key=value", tok);
			return -EINVAL;
		}
		*eq = '\0';
		r = vnvme_parse_opt(&o, is_file, tok, eq + 1, err, errlen);
		if (r)
			return r;
	}
	if (!is_file && !o.size && !o.vol[0]) {
		snprintf(err, errlen,
			 "vnvme: '%s' is neither file=PATH nor %s:SIZE nor %s,vol=NAME", s, o.ssd,
			 o.ssd);
		return -EINVAL;
	}
	if (is_file && o.mode != VNVME_EMULATE) {
		snprintf(err, errlen, "vnvme: mode %s needs an ssd backend (NAME:SIZE form)",
			 vnvme_mode_names[o.mode]);
		return -EINVAL;
	}
	*out = o;
	return 0;
}

static int config_validate_disks(const struct vm_config *c, char *err, unsigned errlen)
{
	char id[64];

	if (c->ndisks > CONFIG_MAX_DISKS) {
		snprintf(err, errlen, "disks: %u devices, at most %d are supported", c->ndisks,
			 CONFIG_MAX_DISKS);
		return -EINVAL;
	}
	for (unsigned i = 0; i < c->ndisks; i++) {
		const struct virtio_blk_config *d = &c->disks[i];
		unsigned qs = d->queue_size;

		virtio_blk_id(d, i, id, sizeof(id));
		if (!memchr(d->path, 0, sizeof(d->path)) || !memchr(d->id, 0, sizeof(d->id)) ||
		    !memchr(d->serial, 0, sizeof(d->serial))) {
			snprintf(err, errlen, "disk %u: unterminated string field", i);
			return -EINVAL;
		}
		if (!d->path[0]) {
			snprintf(err, errlen, "disk %s: no path", id);
			return -EINVAL;
		}
		if (d->num_queues > VIRTIO_BLK_MAX_QUEUES ||
		    (qs && (qs < 2 || qs > VIRTIO_BLK_MAX_QUEUE_SIZE || (qs & (qs - 1))))) {
			snprintf(
			    err, errlen,
			    "disk %s: num_queues %u, queue_size %u (1..%u queues, a power of two "
			    "of 2..%u entries)",
			    id, d->num_queues, qs, VIRTIO_BLK_MAX_QUEUES,
			    VIRTIO_BLK_MAX_QUEUE_SIZE);
			return -EINVAL;
		}
	}
	return 0;
}

static int config_validate_vnvme(const struct vm_config *c, char *err, unsigned errlen)
{
	char a[64], b[64];

	if (c->nvnvme > CONFIG_MAX_VNVME) {
		snprintf(err, errlen, "vnvme: %u devices, at most %d are supported", c->nvnvme,
			 CONFIG_MAX_VNVME);
		return -EINVAL;
	}
	for (unsigned i = 0; i < c->nvnvme; i++) {
		const struct vnvme_config *v = &c->vnvme[i];

		vnvme_id(v, i, a, sizeof(a));
		if (!memchr(v->path, 0, sizeof(v->path)) || !memchr(v->ssd, 0, sizeof(v->ssd)) ||
		    !memchr(v->id, 0, sizeof(v->id))) {
			snprintf(err, errlen, "vnvme %u: unterminated string field", i);
			return -EINVAL;
		}
		if (!v->path[0] == !v->ssd[0]) {
			snprintf(err, errlen,
				 "vnvme %s: needs exactly one of file=PATH or NAME:SIZE", a);
			return -EINVAL;
		}
		if ((unsigned)v->mode > VNVME_ISOLATED) {
			snprintf(err, errlen, "vnvme %s: mode %u is unknown", a, (unsigned)v->mode);
			return -EINVAL;
		}
		if (v->path[0] && v->mode != VNVME_EMULATE) {
			snprintf(err, errlen, "vnvme %s: mode %s needs an ssd backend", a,
				 vnvme_mode_names[v->mode]);
			return -EINVAL;
		}
		/* the API fills these in too: the same names the command line takes */
		if (v->ssd[0] &&
		    !config_vnvme_name_ok(v->ssd, strlen(v->ssd), CONFIG_SSD_NAME_MAX)) {
			snprintf(err, errlen,
				 "vnvme %s: ssd name '%s' is not 1-%d characters of "
				 "[A-Za-z0-9_.-]",
				 a, v->ssd, CONFIG_SSD_NAME_MAX - 1);
			return -EINVAL;
		}
		if (v->vol[0] && !config_vnvme_name_ok(v->vol, strnlen(v->vol, sizeof(v->vol)),
						       CONFIG_SSD_NAME_MAX)) {
			snprintf(err, errlen,
				 "vnvme %s: vol '%.*s' is not 1-%d characters of "
				 "[A-Za-z0-9_.-]",
				 a, (int)sizeof(v->vol), v->vol, CONFIG_SSD_NAME_MAX - 1);
			return -EINVAL;
		}
		if (v->ssd[0] && v->size == 0 && !v->vol[0]) {
			snprintf(err, errlen, "vnvme %s: ssd %s needs a size or a volume", a,
				 v->ssd);
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++) {
			vnvme_id(&c->vnvme[j], j, b, sizeof(b));
			if (!strcmp(a, b)) {
				snprintf(err, errlen, "vnvme: id '%s' is used twice", a);
				return -EINVAL;
			}
		}
	}
	return 0;
}

int config_parse_serial(const char *s, struct vm_config *c, char *err, unsigned errlen)
{
	char buf[CONFIG_PATH_MAX + 64], *comma;
	uint64_t limit = CONFIG_DEFAULT_SERIAL_LIMIT;
	bool trunc = false;
	size_t n = strlen(s);

	if (!strcmp(s, "stdio") || !strcmp(s, "off")) {
		c->serial = s[0] == 's' ? SERIAL_STDIO : SERIAL_OFF;
		c->serial_file[0] = 0;
		return 0;
	}
	if (strncmp(s, "file=", 5) || !s[5]) {
		snprintf(err, errlen, "serial: '%s' is not stdio, file=PATH or off", s);
		return -EINVAL;
	}
	if (n >= sizeof(buf)) {
		snprintf(err, errlen, "serial: argument of %zu bytes is too long", n);
		return -ENAMETOOLONG;
	}
	memcpy(buf, s + 5, n - 4);
	/* Options from the end: whatever is not one belongs to the path. */
	while ((comma = strrchr(buf, ','))) {
		const char *opt = comma + 1;

		if (!strcmp(opt, "truncate=on") || !strcmp(opt, "truncate=off")) {
			trunc = !strcmp(opt, "truncate=on");
		} else if (!strncmp(opt, "limit=", 6)) {
			char why[128];

			if (config_parse_size(opt + 6, &limit, why, sizeof(why))) {
				snprintf(err, errlen, "serial: limit: %s", why);
				return -EINVAL;
			}
		} else {
			break;
		}
		*comma = 0;
	}
	if (!buf[0] || strlen(buf) >= sizeof(c->serial_file)) {
		snprintf(err, errlen, "serial: file path empty or longer than %zu bytes",
			 sizeof(c->serial_file) - 1);
		return -EINVAL;
	}
	c->serial = SERIAL_FILE;
	strcpy(c->serial_file, buf);
	c->serial_limit = limit;
	c->serial_truncate = trunc;
	return 0;
}

int config_parse_rng(const char *s, struct vm_config *c, char *err, unsigned errlen)
{
	const char *src = CONFIG_DEFAULT_RNG_SRC;

	if (s && *s) {
		if (strncmp(s, "src=", 4) || !s[4]) {
			snprintf(err, errlen, "rng: '%.64s' is not src=PATH", s);
			return -EINVAL;
		}
		src = s + 4;
	}
	if (strlen(src) >= sizeof(c->rng_src)) {
		snprintf(err, errlen, "rng: src of %zu bytes is too long", strlen(src));
		return -EINVAL;
	}
	strcpy(c->rng_src, src);
	return 0;
}

int config_fds_dup(struct vm_config *c)
{
	int r = 0;

	for (unsigned i = 0; i < c->nnets && i < CONFIG_MAX_NETS; i++)
		for (unsigned k = 0; c->nets[i].fds_owned && k < c->nets[i].nfds; k++) {
			int *f = &c->nets[i].fds[k];

			*f = *f < 0 ? -1 : fcntl(*f, F_DUPFD_CLOEXEC, 3);
			if (*f < 0 && !r)
				r = -EBADF;
		}
	if (c->has_vsock && c->vsock.listen_owned) {
		c->vsock.listen_fd = fcntl(c->vsock.listen_fd, F_DUPFD_CLOEXEC, 3);
		if (c->vsock.listen_fd < 0 && !r)
			r = -EBADF;
	}
	return r;
}

int config_fds_check(const struct vm_config *c, char *err, unsigned errlen)
{
	for (unsigned i = 0; i < c->nnets && i < CONFIG_MAX_NETS; i++)
		for (unsigned k = 0; c->nets[i].fds_owned && k < c->nets[i].nfds; k++)
			if (c->nets[i].fds[k] < 0) {
				char id[64];

				virtio_net_id(&c->nets[i], i, id, sizeof(id));
				snprintf(err, errlen,
					 "net %s: the source handed over %u of its %u tap queues",
					 id, k, c->nets[i].nfds);
				return -EINVAL;
			}
	return 0;
}

void config_fds_close(struct vm_config *c)
{
	for (unsigned i = 0; i < c->nnets && i < CONFIG_MAX_NETS; i++) {
		struct virtio_net_config *n = &c->nets[i];

		for (unsigned k = 0; n->fds_owned && k < n->nfds; k++)
			if (n->fds[k] >= 0)
				close(n->fds[k]);
		if (n->fds_owned) {
			n->nfds = 0;
			n->fds_owned = false;
		}
	}
	if (c->has_vsock && c->vsock.listen_owned) {
		if (c->vsock.listen_fd >= 0)
			close(c->vsock.listen_fd);
		c->vsock.listen_fd = -1;
		c->vsock.has_listen_fd = c->vsock.listen_owned = false;
	}
}

int config_validate(const struct vm_config *c, char *err, unsigned errlen)
{
	if (c->cpus < 1 || c->cpus > CONFIG_MAX_CPUS) {
		snprintf(err, errlen, "cpus: %u is outside 1..%d", c->cpus, CONFIG_MAX_CPUS);
		return -EINVAL;
	}
	if (c->max_cpus < c->cpus || c->max_cpus > CONFIG_MAX_CPUS) {
		snprintf(err, errlen, "max_cpus: %u is outside %u..%d", c->max_cpus, c->cpus,
			 CONFIG_MAX_CPUS);
		return -EINVAL;
	}
	if (c->memory < CONFIG_MIN_MEMORY) {
		snprintf(err, errlen, "memory: %llu bytes is below the minimum of %llu MiB",
			 (unsigned long long)c->memory, CONFIG_MIN_MEMORY >> 20);
		return -EINVAL;
	}
	if (c->memory > CONFIG_MAX_MEMORY) {
		snprintf(err, errlen, "memory: %llu bytes is above the maximum of %llu GiB",
			 (unsigned long long)c->memory, CONFIG_MAX_MEMORY >> 30);
		return -EINVAL;
	}
	if (c->memory % CONFIG_PAGE_SIZE) {
		snprintf(err, errlen, "memory: %llu bytes is not a multiple of 4 KiB",
			 (unsigned long long)c->memory);
		return -EINVAL;
	}
	if (!memchr(c->kernel, 0, sizeof(c->kernel)) ||
	    !memchr(c->initramfs, 0, sizeof(c->initramfs)) ||
	    !memchr(c->cmdline, 0, sizeof(c->cmdline)) ||
	    !memchr(c->serial_file, 0, sizeof(c->serial_file)) ||
	    !memchr(c->allowed_dir, 0, sizeof(c->allowed_dir)) ||
	    !memchr(c->rng_src, 0, sizeof(c->rng_src))) {
		snprintf(err, errlen, "config: unterminated string field");
		return -EINVAL;
	}
	if (!c->kernel[0]) {
		snprintf(err, errlen, "kernel: no kernel image given (--kernel FILE)");
		return -EINVAL;
	}
	if (access(c->kernel, R_OK)) {
		int e = errno;

		snprintf(err, errlen, "kernel %s: %s", c->kernel, strerror(e));
		return -e;
	}
	if (c->initramfs[0] && access(c->initramfs, R_OK)) {
		int e = errno;

		snprintf(err, errlen, "initramfs %s: %s", c->initramfs, strerror(e));
		return -e;
	}
	/* Room for the parameters lvmm appends on some hosts is checked by the boot loader. */
	if (strlen(c->cmdline) >= LAYOUT_CMDLINE_MAX) {
		snprintf(err, errlen, "cmdline: %zu characters exceed the %llu-byte limit",
			 strlen(c->cmdline), LAYOUT_CMDLINE_MAX - 1);
		return -EINVAL;
	}
	if (c->num_pci_segments > CONFIG_MAX_PCI_SEGMENTS) {
		snprintf(err, errlen, "num_pci_segments: %u is outside 1..%d", c->num_pci_segments,
			 CONFIG_MAX_PCI_SEGMENTS);
		return -EINVAL;
	}
	if (c->rng_src[0]) {
		int r =
		    fsutil_check(NULL, "rng src", c->rng_src, false, FSUTIL_ENTROPY, err, errlen);

		if (r)
			return r;
	}
	switch (c->serial) {
	case SERIAL_STDIO:
	case SERIAL_OFF:
	case SERIAL_NULL:
		break;
	case SERIAL_FILE:
		if (!c->serial_file[0]) {
			snprintf(err, errlen, "serial: mode file needs a path (file=PATH)");
			return -EINVAL;
		}
		break;
	default:
		snprintf(err, errlen, "serial: mode %u is unknown", (unsigned)c->serial);
		return -EINVAL;
	}
	int r = config_validate_vnvme(c, err, errlen);

	if (!r)
		r = config_validate_disks(c, err, errlen);
	if (!r && c->nnets > CONFIG_MAX_NETS) {
		snprintf(err, errlen, "net: %u devices, at most %d are supported", c->nnets,
			 CONFIG_MAX_NETS);
		r = -EINVAL;
	}
	for (unsigned i = 0; !r && i < c->nnets; i++)
		r = config_validate_net(&c->nets[i], err, errlen);
	if (!r && c->has_vsock)
		r = config_validate_vsock(&c->vsock, err, errlen);
	if (!r && c->nfs > CONFIG_MAX_FS) {
		snprintf(err, errlen, "fs: %u shares, at most %d are supported", c->nfs,
			 CONFIG_MAX_FS);
		r = -EINVAL;
	}
	for (unsigned i = 0; !r && i < c->nfs; i++)
		r = config_validate_fs(&c->fs[i], err, errlen);
	if (!r && c->ndevices > CONFIG_MAX_DEVICES) {
		snprintf(err, errlen, "device: %u devices, at most %d are supported", c->ndevices,
			 CONFIG_MAX_DEVICES);
		r = -EINVAL;
	}
	for (unsigned i = 0; !r && i < c->ndevices; i++)
		r = config_validate_device(&c->devices[i], err, errlen);
	for (unsigned i = 0; !r && i < c->ndevices; i++)
		r = config_device_unique(c, i, err, errlen);
	if (!r)
		r = devices_config_check_ids(c, err, errlen);
	return r;
}
