/* nvme-sweep: the NVMe 1.4 admin and I/O command sets against one vNVMe from inside a Linux
 * guest, through the kernel's NVMe ioctls (those nvme-cli uses), every status and the values that
 * matter checked against what this controller must answer. One static process on purpose: where
 * guest kernels run emulated, every exec of a dynamic program costs seconds.
 *
 * usage: nvme-sweep SERIAL   (the controller whose serial is SERIAL; it must be a 4 MiB disk of
 *        512-byte blocks that holds nothing of value: commands write, zero and deallocate it)
 * Prints one line per check,
 *   SWEEP <n> <name> want=<SCT/SC> got=<SCT/SC> ok|MISMATCH
 * with SCT/SC as three hex digits (000 success; DNR and More masked), "eNN" when the ioctl failed
 * with errno NN, "match"/"other" for value checks, a SWEEP-OUT line after a mismatch, and at the
 * end
 *   LVMM-SWEEP-DONE run=<checks> mismatches=<n>
 * Exits 0 when every check passed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/nvme_ioctl.h>

#include "lightiov/nvme.h"

#define SWEEP_BLOCKS 8192u /* 4 MiB of 512-byte LBAs: END, the first LBA past the namespace */
#define NSID_ALL     0xffffffffu
#define NQN_PREFIX   "nqn.2026-11.io.lvmm:nvme:"

struct sweep {
	int ctrl, ns;  /* /dev/nvmeX and /dev/nvmeXn1 */
	char name[32]; /* nvmeX */
	const char *serial;
	unsigned int run, bad;
	uint32_t result;  /* completion dword 0 of the last command */
	char detail[160]; /* what a failed value check saw */
};

static uint8_t pat[4096] __attribute__((aligned(4096)));
static uint8_t buf[4096] __attribute__((aligned(4096)));

/* The status an ioctl returned as the sweep prints it: three hex digits or eNN. */
static void status_str(int rc, int err, char *out, size_t len)
{
	if (rc < 0)
		snprintf(out, len, "e%d", err);
	else
		snprintf(out, len, "%03x", (unsigned int)rc & 0x7ff);
}

/* One status check: WANT is the status (SCT << 8 | SC) NVMe 1.4 asks for. */
static void check(struct sweep *s, unsigned int want, const char *name, int rc, int err)
{
	char got[16], w[8];

	status_str(rc, err, got, sizeof(got));
	snprintf(w, sizeof(w), "%03x", want);
	s->run++;
	if (!strcmp(got, w)) {
		printf("SWEEP %u %s want=%s got=%s ok\n", s->run, name, w, got);
		return;
	}
	s->bad++;
	printf("SWEEP %u %s want=%s got=%s MISMATCH\n", s->run, name, w, got);
	printf("SWEEP-OUT %s\n", rc < 0 ? strerror(err) : "NVMe status");
}

/* One value check on the last command's data or result. */
static void value(struct sweep *s, const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	s->run++;
	if (ok) {
		printf("SWEEP %u %s want=match got=match ok\n", s->run, name);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(s->detail, sizeof(s->detail), fmt, ap);
	va_end(ap);
	s->bad++;
	printf("SWEEP %u %s want=match got=other MISMATCH\n", s->run, name);
	printf("SWEEP-OUT %s\n", s->detail);
}

/* A passthrough command on FD (admin or I/O queue); DATA of LEN bytes, WRITE when the host
 * sends it. Returns the ioctl's value (the NVMe status, or -1) and keeps errno. */
static int cmd(struct sweep *s, int fd, unsigned long req, uint8_t opc, uint32_t nsid,
	       const uint32_t cdw[6], void *data, uint32_t len)
{
	struct nvme_passthru_cmd c = {
	    .opcode = opc,
	    .nsid = nsid,
	    .addr = (uintptr_t)data,
	    .data_len = len,
	};
	int rc, err;

	if (cdw) {
		c.cdw10 = cdw[0];
		c.cdw11 = cdw[1];
		c.cdw12 = cdw[2];
		c.cdw13 = cdw[3];
		c.cdw14 = cdw[4];
		c.cdw15 = cdw[5];
	}
	errno = 0;
	rc = ioctl(fd, req, &c);
	err = errno;
	s->result = c.result;
	errno = err;
	return rc;
}

#define ADMIN(s, opc, nsid, data, len, ...)                                                        \
	cmd(s, (s)->ctrl, NVME_IOCTL_ADMIN_CMD, opc, nsid, (const uint32_t[6]){__VA_ARGS__}, data, \
	    len)
#define IO(s, opc, nsid, data, len, ...)                                                           \
	cmd(s, (s)->ns, NVME_IOCTL_IO_CMD, opc, nsid, (const uint32_t[6]){__VA_ARGS__}, data, len)
#define T(s, want, name, call)                                                                     \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		check(s, want, name, rc_, errno);                                                  \
	} while (0)

/* Read or write NLB0 + 1 blocks through NVME_IOCTL_SUBMIT_IO, the ioctl of nvme read/write. */
static int rw(struct sweep *s, uint8_t opc, uint64_t slba, uint16_t nlb0, uint16_t control,
	      void *data)
{
	struct nvme_user_io io = {
	    .opcode = opc,
	    .control = control,
	    .nblocks = nlb0,
	    .addr = (uintptr_t)data,
	    .slba = slba,
	};

	errno = 0;
	return ioctl(s->ns, NVME_IOCTL_SUBMIT_IO, &io);
}

/* The first line of a sysfs attribute, without its newline; "" when it cannot be read. */
static void sysfs_read(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "r");

	out[0] = 0;
	if (!f)
		return;
	if (!fgets(out, (int)len, f))
		out[0] = 0;
	fclose(f);
	out[strcspn(out, "\n")] = 0;
}

/* Trailing blanks off a space-padded sysfs or Identify string. */
static void rtrim(char *p)
{
	size_t n = strlen(p);

	while (n && p[n - 1] == ' ')
		p[--n] = 0;
}

/* The controller whose serial is SERIAL; opens it and its namespace 1. */
static int sweep_open(struct sweep *s)
{
	char path[300], sn[64];
	struct dirent *e;
	DIR *d = opendir("/sys/class/nvme");

	if (!d)
		return -1;
	s->name[0] = 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "nvme", 4))
			continue;
		snprintf(path, sizeof(path), "/sys/class/nvme/%s/serial", e->d_name);
		sysfs_read(path, sn, sizeof(sn));
		rtrim(sn);
		if (!strcmp(sn, s->serial) && strlen(e->d_name) < sizeof(s->name))
			snprintf(s->name, sizeof(s->name), "%s", e->d_name);
	}
	closedir(d);
	if (!s->name[0])
		return -1;
	snprintf(path, sizeof(path), "/dev/%s", s->name);
	s->ctrl = open(path, O_RDWR);
	snprintf(path, sizeof(path), "/dev/%sn1", s->name);
	s->ns = open(path, O_RDWR);
	return s->ctrl < 0 || s->ns < 0 ? -1 : 0;
}

static void sweep_identify(struct sweep *s)
{
	const struct nvme_id_ctrl *id = (const void *)buf;
	const struct nvme_id_ns *ns = (const void *)buf;
	char path[300], nqn[300], want_nqn[300];
	int nsid, i, pad_ok;

	T(s, 0x000, "id-ctrl", ADMIN(s, NVME_ADMIN_IDENTIFY, 0, buf, 4096, NVME_ID_CNS_CTRL));
	value(s, "id-ctrl-oncs-save", id->oncs == 0x1c, "oncs %#x", id->oncs);
	value(s, "id-ctrl-vwc", id->vwc & NVME_CTRL_VWC_PRESENT, "vwc %#x", id->vwc);
	/* the subsystem NQN ends with the serial, NULs after it (no blanks) */
	snprintf(want_nqn, sizeof(want_nqn), NQN_PREFIX "%s", s->serial);
	pad_ok = 1;
	for (i = (int)strlen(want_nqn); i < (int)sizeof(id->subnqn); i++)
		pad_ok &= id->subnqn[i] == 0;
	value(s, "id-ctrl-subnqn", !strncmp(id->subnqn, want_nqn, strlen(want_nqn)) && pad_ok,
	      "subnqn '%.64s'", id->subnqn);

	T(s, 0x000, "id-ns-1", ADMIN(s, NVME_ADMIN_IDENTIFY, 1, buf, 4096, NVME_ID_CNS_NS));
	value(s, "id-ns-nsze", ns->nsze == SWEEP_BLOCKS && ns->ncap == SWEEP_BLOCKS,
	      "nsze %llu ncap %llu", (unsigned long long)ns->nsze, (unsigned long long)ns->ncap);
	value(s, "id-ns-lba-512", ns->lbaf[ns->flbas & 0xf].ds == 9, "flbas %u ds %u", ns->flbas,
	      ns->lbaf[ns->flbas & 0xf].ds);
	/* on the block device: the namespace id from NVME_IOCTL_ID, then Identify through it */
	errno = 0;
	nsid = ioctl(s->ns, NVME_IOCTL_ID);
	value(s, "ioctl-id", nsid == 1, "NVME_IOCTL_ID %d (%s)", nsid, strerror(errno));
	T(s, 0x000, "id-ns-blockdev",
	  cmd(s, s->ns, NVME_IOCTL_ADMIN_CMD, NVME_ADMIN_IDENTIFY, 1,
	      (const uint32_t[6]){NVME_ID_CNS_NS}, buf, 4096));
	T(s, 0x00b, "id-ns-ffffffff",
	  ADMIN(s, NVME_ADMIN_IDENTIFY, NSID_ALL, buf, 4096, NVME_ID_CNS_NS));
	T(s, 0x00b, "id-ns-2", ADMIN(s, NVME_ADMIN_IDENTIFY, 2, buf, 4096, NVME_ID_CNS_NS));
	T(s, 0x00b, "id-ns-0", ADMIN(s, NVME_ADMIN_IDENTIFY, 0, buf, 4096, NVME_ID_CNS_NS));
	T(s, 0x000, "list-ns",
	  ADMIN(s, NVME_ADMIN_IDENTIFY, 0, buf, 4096, NVME_ID_CNS_NS_ACTIVE_LIST));
	value(s, "list-ns-only-1", ((uint32_t *)buf)[0] == 1 && ((uint32_t *)buf)[1] == 0,
	      "active list %u %u", ((uint32_t *)buf)[0], ((uint32_t *)buf)[1]);
	T(s, 0x00b, "active-list-fffffffe",
	  ADMIN(s, NVME_ADMIN_IDENTIFY, 0xfffffffe, buf, 4096, NVME_ID_CNS_NS_ACTIVE_LIST));
	T(s, 0x000, "ns-descs-1",
	  ADMIN(s, NVME_ADMIN_IDENTIFY, 1, buf, 4096, NVME_ID_CNS_NS_DESC_LIST));
	T(s, 0x002, "identify-cns-10h", ADMIN(s, NVME_ADMIN_IDENTIFY, 0, buf, 4096, 0x10));

	/* what nvme list and nvme list-subsys read: the kernel's view in sysfs */
	snprintf(path, sizeof(path), "/sys/class/nvme/%s/model", s->name);
	sysfs_read(path, nqn, sizeof(nqn));
	rtrim(nqn);
	value(s, "sysfs-model", nqn[0] != 0, "model '%s'", nqn);
	snprintf(path, sizeof(path), "/sys/class/nvme/%s/subsysnqn", s->name);
	sysfs_read(path, nqn, sizeof(nqn));
	value(s, "sysfs-subsysnqn", !strcmp(nqn, want_nqn), "subsysnqn '%s'", nqn);
	snprintf(path, sizeof(path), "/sys/block/%sn1/queue/logical_block_size", s->name);
	sysfs_read(path, nqn, sizeof(nqn));
	value(s, "sysfs-block-size", !strcmp(nqn, "512"), "logical_block_size '%s'", nqn);
}

/* Get Log Page: LID, LEN bytes (dword multiple) from byte offset LPO. */
static int get_log(struct sweep *s, uint32_t nsid, uint8_t lid, uint32_t len, uint64_t lpo)
{
	uint32_t numd = len / 4 - 1;

	return ADMIN(s, NVME_ADMIN_GET_LOG_PAGE, nsid, buf, len, (numd & 0xffff) << 16 | lid,
		     numd >> 16, (uint32_t)lpo, (uint32_t)(lpo >> 32));
}

static void sweep_logs(struct sweep *s)
{
	const struct nvme_smart_log *smart = (const void *)buf;
	const struct nvme_id_ctrl *id = (const void *)buf;
	static const uint8_t absent[] = {0x04, 0x06, 0xc0};
	unsigned int i, elpe;
	char name[32];

	T(s, 0x000, "smart-log", get_log(s, NSID_ALL, NVME_LOG_SMART, 512, 0));
	value(s, "smart-log-temperature", smart->temperature > 273 && smart->temperature < 373,
	      "temperature %u K", smart->temperature);
	T(s, 0x002, "smart-log-nsid-1", get_log(s, 1, NVME_LOG_SMART, 512, 0));
	T(s, 0x000, "smart-log-nsid-0", get_log(s, 0, NVME_LOG_SMART, 512, 0));
	/* nvme error-log: ELPE + 1 entries */
	elpe = 0;
	if (ADMIN(s, NVME_ADMIN_IDENTIFY, 0, buf, 4096, NVME_ID_CNS_CTRL) == 0)
		elpe = id->elpe;
	if (elpe >= sizeof(buf) / sizeof(struct nvme_error_log))
		elpe = sizeof(buf) / sizeof(struct nvme_error_log) - 1;
	T(s, 0x000, "error-log",
	  get_log(s, NSID_ALL, NVME_LOG_ERROR, (elpe + 1) * (uint32_t)sizeof(struct nvme_error_log),
		  0));
	T(s, 0x000, "fw-log", get_log(s, NSID_ALL, NVME_LOG_FW_SLOT, 512, 0));
	T(s, 0x000, "get-log-01", get_log(s, NSID_ALL, NVME_LOG_ERROR, 64, 0));
	T(s, 0x000, "get-log-02", get_log(s, NSID_ALL, NVME_LOG_SMART, 512, 0));
	T(s, 0x000, "get-log-03", get_log(s, NSID_ALL, NVME_LOG_FW_SLOT, 512, 0));
	T(s, 0x000, "get-log-02-offset-4", get_log(s, NSID_ALL, NVME_LOG_SMART, 64, 4));
	T(s, 0x000, "get-log-02-longer", get_log(s, NSID_ALL, NVME_LOG_SMART, 4096, 0));
	T(s, 0x002, "get-log-02-offset-past", get_log(s, NSID_ALL, NVME_LOG_SMART, 64, 1024));
	T(s, 0x002, "get-log-02-offset-unaligned", get_log(s, NSID_ALL, NVME_LOG_SMART, 64, 2));
	for (i = 0; i < sizeof(absent); i++) {
		snprintf(name, sizeof(name), "get-log-%02x", absent[i]);
		T(s, 0x109, name, get_log(s, NSID_ALL, absent[i], 64, 0));
	}
}

static void sweep_features(struct sweep *s)
{
	static const uint8_t sel_fids[] = {NVME_FEAT_TEMP_THRESH, NVME_FEAT_VOLATILE_WC,
					   NVME_FEAT_IRQ_CONFIG};
	static const uint8_t fids[] = {1, 2, 5, 7, 8, 10, 11};
	static const uint8_t refused[] = {NVME_FEAT_LBA_RANGE, NVME_FEAT_AUTO_PST, 0x80};
	unsigned int i, sel;
	char name[40];

	/* every select of every feature offered (as nvme get-feature: NSID_ALL on the
	 * controller node), and those that are not */
	for (i = 0; i < sizeof(sel_fids); i++)
		for (sel = 0; sel < 4; sel++) {
			snprintf(name, sizeof(name), "get-feature-%u-sel%u", sel_fids[i], sel);
			T(s, 0x000, name,
			  ADMIN(s, NVME_ADMIN_GET_FEATURES, NSID_ALL, NULL, 0,
				sel << 8 | sel_fids[i]));
		}
	for (i = 0; i < sizeof(fids); i++) {
		snprintf(name, sizeof(name), "get-feature-%u", fids[i]);
		T(s, 0x000, name, ADMIN(s, NVME_ADMIN_GET_FEATURES, NSID_ALL, NULL, 0, fids[i]));
	}
	for (i = 0; i < sizeof(refused); i++) {
		snprintf(name, sizeof(name), "get-feature-%#x", refused[i]);
		T(s, 0x002, name, ADMIN(s, NVME_ADMIN_GET_FEATURES, 0, buf, 4096, refused[i]));
	}
	T(s, 0x002, "get-feature-sel4",
	  ADMIN(s, NVME_ADMIN_GET_FEATURES, 0, NULL, 0, 4 << 8 | NVME_FEAT_VOLATILE_WC));
	T(s, 0x002, "get-feature-irq-vector-past",
	  ADMIN(s, NVME_ADMIN_GET_FEATURES, 0, NULL, 0, NVME_FEAT_IRQ_CONFIG, 0xffff));

	/* Set Features, each read back where the value is observable */
	T(s, 0x000, "set-vwc-off",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, NSID_ALL, NULL, 0, NVME_FEAT_VOLATILE_WC, 0));
	T(s, 0x000, "get-vwc",
	  ADMIN(s, NVME_ADMIN_GET_FEATURES, 0, NULL, 0, NVME_FEAT_VOLATILE_WC));
	value(s, "vwc-reads-off", s->result == 0, "result %#x", s->result);
	T(s, 0x000, "get-vwc-default",
	  ADMIN(s, NVME_ADMIN_GET_FEATURES, 0, NULL, 0, 1 << 8 | NVME_FEAT_VOLATILE_WC));
	value(s, "vwc-default-on", s->result == 1, "result %#x", s->result);
	T(s, 0x000, "get-vwc-supported",
	  ADMIN(s, NVME_ADMIN_GET_FEATURES, 0, NULL, 0, 3 << 8 | NVME_FEAT_VOLATILE_WC));
	value(s, "vwc-changeable", s->result == 4, "result %#x", s->result);
	T(s, 0x10d, "set-vwc-save",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, 0, NULL, 0, NVME_FEAT_SAVE | NVME_FEAT_VOLATILE_WC, 0));
	T(s, 0x000, "set-arbitration",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, NSID_ALL, NULL, 0, NVME_FEAT_ARBITRATION, 0));
	T(s, 0x000, "set-power-state-0",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, NSID_ALL, NULL, 0, NVME_FEAT_POWER_MGMT, 0));
	T(s, 0x002, "set-power-state-1",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, 0, NULL, 0, NVME_FEAT_POWER_MGMT, 1));
	T(s, 0x000, "set-temp-thresh",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, NSID_ALL, NULL, 0, NVME_FEAT_TEMP_THRESH, 0x160));
	T(s, 0x000, "get-temp-thresh",
	  ADMIN(s, NVME_ADMIN_GET_FEATURES, 0, NULL, 0, NVME_FEAT_TEMP_THRESH));
	value(s, "temp-thresh-reads-back", (s->result & 0xffff) == 0x160, "result %#x", s->result);
	T(s, 0x002, "set-temp-thresh-sensor-1",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, 0, NULL, 0, NVME_FEAT_TEMP_THRESH, 0x10160));
	T(s, 0x000, "set-temp-thresh-back",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, NSID_ALL, NULL, 0, NVME_FEAT_TEMP_THRESH, 0x157));
	T(s, 0x00c, "set-num-queues-late",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, 0, NULL, 0, NVME_FEAT_NUM_QUEUES, 0));
	T(s, 0x000, "set-irq-coalescing",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, NSID_ALL, NULL, 0, NVME_FEAT_IRQ_COALESCE, 0));
	T(s, 0x000, "set-irq-config",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, NSID_ALL, NULL, 0, NVME_FEAT_IRQ_CONFIG,
		NVME_FEAT_IVC_CD));
	T(s, 0x002, "set-irq-config-vector-past",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, 0, NULL, 0, NVME_FEAT_IRQ_CONFIG, 0xffff));
	T(s, 0x002, "set-feature-3",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, 0, NULL, 0, NVME_FEAT_LBA_RANGE));
	T(s, 0x002, "set-feature-0x80", ADMIN(s, NVME_ADMIN_SET_FEATURES, 0, NULL, 0, 0x80, 1));
}

/* Reads 8 blocks at slba into a poisoned buffer; the data must be the pattern. */
static void read_pattern(struct sweep *s, const char *name, const char *vname, uint64_t slba,
			 uint16_t control, const char *why)
{
	memset(buf, 0xa5, sizeof(buf));
	T(s, 0x000, name, rw(s, NVME_CMD_READ, slba, 7, control, buf));
	value(s, vname, !memcmp(pat, buf, sizeof(pat)), "%s", why);
}

static int all_zero(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return 0;
	return 1;
}

static void sweep_io(struct sweep *s)
{
	const uint16_t fua = (uint16_t)(NVME_RW_FUA >> 16);
	struct nvme_dsm_range *r = (void *)buf;
	uint32_t i, x = 0x2545f491;
	static const uint8_t absent[] = {0x03, 0x7f, 0xff};
	char name[32];

	for (i = 0; i < sizeof(pat); i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		pat[i] = (uint8_t)x;
	}
	/* with the write cache off: durable writes; then the cache back on */
	T(s, 0x000, "write-vwc-off", rw(s, NVME_CMD_WRITE, 0, 7, 0, pat));
	T(s, 0x000, "set-vwc-on",
	  ADMIN(s, NVME_ADMIN_SET_FEATURES, NSID_ALL, NULL, 0, NVME_FEAT_VOLATILE_WC, 1));
	T(s, 0x000, "write", rw(s, NVME_CMD_WRITE, 8, 7, 0, pat));
	T(s, 0x000, "write-fua", rw(s, NVME_CMD_WRITE, 16, 7, fua, pat));
	read_pattern(s, "read", "read-back-equal", 8, 0, "read at 8 differs");
	read_pattern(s, "read-fua-block", "read-back-equal-fua", 16, fua, "read at 16 differs");
	read_pattern(s, "read-vwc-off-block", "read-back-equal-2", 0, 0, "read at 0 differs");
	T(s, 0x000, "flush", IO(s, NVME_CMD_FLUSH, 1, NULL, 0, 0));
	/* the deprecated I/O ioctl on the controller node (nvme flush /dev/nvmeX) */
	T(s, 0x000, "flush-ctrl",
	  cmd(s, s->ctrl, NVME_IOCTL_IO_CMD, NVME_CMD_FLUSH, 1, NULL, NULL, 0));
	T(s, 0x000, "write-zeroes", IO(s, NVME_CMD_WRITE_ZEROES, 1, NULL, 0, 8, 0, 7));
	memset(buf, 0xa5, sizeof(buf));
	T(s, 0x000, "read-zeroed", rw(s, NVME_CMD_READ, 8, 7, 0, buf));
	value(s, "read-zeroed-is-zero", all_zero(buf, sizeof(buf)), "zeroed blocks not zero");
	read_pattern(s, "read-neighbour-kept", "neighbour-kept", 16, 0, "write zeroes spilled");

	memset(buf, 0, sizeof(buf));
	r->nlb = 8;
	r->slba = 16;
	T(s, 0x000, "dsm-deallocate", IO(s, NVME_CMD_DSM, 1, buf, 16, 0, NVME_DSM_AD));
	memset(buf, 0, sizeof(buf));
	r->nlb = 8;
	r->slba = 0;
	T(s, 0x000, "dsm-advisory", IO(s, NVME_CMD_DSM, 1, buf, 16, 0, 1 /* IDR */));
	read_pattern(s, "read-after-advisory", "advisory-kept-data", 0, 0, "DSM IDR changed data");

	/* refusals past the end of the namespace */
	memset(buf, 0, sizeof(buf));
	r->nlb = 1;
	r->slba = SWEEP_BLOCKS;
	T(s, 0x080, "dsm-past-end", IO(s, NVME_CMD_DSM, 1, buf, 16, 0, NVME_DSM_AD));
	T(s, 0x080, "write-past-end", IO(s, NVME_CMD_WRITE, 1, pat, 512, SWEEP_BLOCKS));
	T(s, 0x080, "read-past-end", IO(s, NVME_CMD_READ, 1, buf, 512, SWEEP_BLOCKS));
	T(s, 0x080, "read-straddling-end",
	  IO(s, NVME_CMD_READ, 1, buf, 4096, SWEEP_BLOCKS - 4, 0, 7));
	T(s, 0x080, "write-zeroes-past-end",
	  IO(s, NVME_CMD_WRITE_ZEROES, 1, NULL, 0, SWEEP_BLOCKS));
	T(s, 0x080, "submit-io-past-end", rw(s, NVME_CMD_READ, SWEEP_BLOCKS - 1, 1, 0, buf));

	/* commands this controller does not offer */
	T(s, 0x001, "compare", IO(s, NVME_CMD_COMPARE, 1, pat, 4096, 0, 0, 7));
	T(s, 0x001, "write-uncorrectable", IO(s, NVME_CMD_WRITE_UNCOR, 1, NULL, 0, 0));
	T(s, 0x001, "verify", IO(s, 0x0c, 1, NULL, 0, 0));
	T(s, 0x001, "resv-report", IO(s, 0x0e, 1, buf, 4096, 1023));
	memset(buf, 0, 16);
	T(s, 0x001, "resv-register", IO(s, 0x0d, 1, buf, 16, 0));
	for (i = 0; i < sizeof(absent); i++) {
		snprintf(name, sizeof(name), "io-opcode-%#04x", absent[i]);
		T(s, 0x001, name, IO(s, absent[i], 1, NULL, 0, 0));
	}
	T(s, 0x000, "io-passthru-read", IO(s, NVME_CMD_READ, 1, buf, 4096, 0, 0, 7));
	value(s, "io-passthru-read-data", !memcmp(pat, buf, sizeof(pat)), "read at 0 differs");
}

static void sweep_admin(struct sweep *s)
{
	static const struct {
		uint8_t opc;
		uint32_t nsid, cdw10;
		const char *name;
	} absent[] = {
	    {NVME_ADMIN_FORMAT_NVM, 1, 0, "format"},
	    {0x84, 0, 0, "sanitize"},
	    {NVME_ADMIN_FW_COMMIT, 0, 0x08, "fw-commit"},
	    {0x14, NSID_ALL, 1, "device-self-test"},
	    {NVME_ADMIN_NS_MGMT, 0, 0, "ns-management"},
	    {NVME_ADMIN_KEEP_ALIVE, 0, 0, "keep-alive"},
	    {0x19, 0, 0, "directive-send"},
	    {0x86, 0, 0, "get-lba-status"},
	    {0xc0, 0, 0, "admin-opcode-0xc0"},
	};
	unsigned int i;

	for (i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		T(s, 0x001, absent[i].name,
		  ADMIN(s, absent[i].opc, absent[i].nsid, NULL, 0, absent[i].cdw10));
	T(s, 0x000, "abort", ADMIN(s, NVME_ADMIN_ABORT, 0, NULL, 0, 0xffff0001));
	value(s, "abort-not-aborted", s->result & 1, "result %#x", s->result);
	/* queue misuse: the driver's queues stay as they are */
	T(s, 0x101, "delete-sq-60", ADMIN(s, NVME_ADMIN_DELETE_SQ, 0, NULL, 0, 60));
	T(s, 0x10c, "delete-cq-in-use", ADMIN(s, NVME_ADMIN_DELETE_CQ, 0, NULL, 0, 1));
	T(s, 0x101, "create-cq-id-0", ADMIN(s, NVME_ADMIN_CREATE_CQ, 0, NULL, 0, 0x000f0000, 1));
	T(s, 0x002, "dbbuf-config-null", ADMIN(s, NVME_ADMIN_DBBUF, 0, NULL, 0, 0));
	/* and I/O still flows after all of it */
	read_pattern(s, "read-after-admin", "read-after-admin-data", 0, 0, "read at 0 differs");
}

int main(int argc, char **argv)
{
	struct sweep s = {.ctrl = -1, .ns = -1};

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: nvme-sweep SERIAL\n");
		return 2;
	}
	s.serial = argv[1];
	if (sweep_open(&s) < 0) {
		printf("LVMM-SWEEP-DONE run=0 mismatches=1 (no controller with serial %s: %s)\n",
		       s.serial, strerror(errno));
		return 1;
	}
	printf("SWEEP-START /dev/%s %u blocks\n", s.name, SWEEP_BLOCKS);
	sweep_identify(&s);
	sweep_logs(&s);
	sweep_features(&s);
	sweep_io(&s);
	sweep_admin(&s);
	printf("LVMM-SWEEP-DONE run=%u mismatches=%u\n", s.run, s.bad);
	return s.bad ? 1 : 0;
}
