/* virtio-blk driven through BAR 0 and its split queue as Linux's virtio_blk does, on an image
 * file: configuration space and features, writes read back (the image holds them), flush, the
 * serial, discard and write zeroes, and every request a hostile driver can make (past the end,
 * lengths that are not sectors, unknown types, no status byte, writes to a read-only disk, bad
 * segment flags); the image lock between two users; the image released and reclaimed for a
 * live migration; --disk and DiskConfig parsing; device ids
 * unique across models. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "config.h"
#include "devices.h"
#include "guest_mem.h"
#include "testutil.h"
#include "vdrv.h"
#include "virtio/virtio_blk.h"
#include "virtio/virtio_pci.h"

#define RAM_SIZE  (4u << 20)
#define DESC_GPA  VDRV_DESC(0)
#define AVAIL_GPA VDRV_AVAIL(0)
#define USED_GPA  VDRV_USED(0)
#define HDR_GPA	  0x8000
#define STAT_GPA  0x9000
#define BUF_GPA	  0x10000
#define QSIZE	  VDRV_QSIZE
#define IMG_BYTES (1u << 20)

#define T_IN	       0
#define T_OUT	       1
#define T_FLUSH	       4
#define T_GET_ID       8
#define T_DISCARD      11
#define T_WRITE_ZEROES 13
#define S_OK	       0
#define S_IOERR	       1
#define S_UNSUPP       2

static uint8_t *ram;
static struct guest_mem gm;
static char dir[64], img[128], err[512];
static void *dev;
static struct virtio_pci *vp;

static int blk_open(const char *path, bool readonly, void **out)
{
	struct dev_host h = {.gm = &gm, .cpus = 1};
	struct virtio_blk_config c = {.readonly = readonly, .num_queues = 2, .queue_size = QSIZE};

	snprintf(c.path, sizeof(c.path), "%s", path);
	snprintf(c.serial, sizeof(c.serial), "lvmm-serial-0001");
	return virtio_blk_model.create(&h, &c, "disk0", 0, out, err, sizeof(err));
}

static void driver_init(void)
{
	uint64_t f = 1ULL << 32 | 1ULL << 29 | 1ULL << 12 | 1ULL << 13 | 1ULL << 14 | 1ULL << 9;

	vdrv_attach(vp, ram); /* the driver's ring indexes start from 0 */
	vdrv_bar_w(VIRTIO_PCI_STATUS, 0, 1);
	vdrv_bar_w(VIRTIO_PCI_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER, 1);
	vdrv_bar_w(VIRTIO_PCI_DFSELECT, 0, 4);
	f &= vdrv_bar_r(VIRTIO_PCI_DF, 4) | (uint64_t)1 << 32 | 1ULL << 29;
	vdrv_bar_w(VIRTIO_PCI_GFSELECT, 0, 4);
	vdrv_bar_w(VIRTIO_PCI_GF, f & 0xffffffff, 4);
	vdrv_bar_w(VIRTIO_PCI_GFSELECT, 1, 4);
	vdrv_bar_w(VIRTIO_PCI_GF, f >> 32, 4);
	vdrv_bar_w(VIRTIO_PCI_STATUS,
		   VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK, 1);
	ck_assert(vdrv_bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_FEATURES_OK);
	vdrv_queue_init(0);
	vdrv_bar_w(VIRTIO_PCI_STATUS,
		   VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | VIRTIO_STATUS_FEATURES_OK |
		       VIRTIO_STATUS_DRIVER_OK,
		   1);
}

static void setup_rw(bool readonly)
{
	uint8_t *pattern = malloc(IMG_BYTES);

	ram = calloc(1, RAM_SIZE);
	ck_assert_ptr_nonnull(ram);
	gmem_init_buffer(&gm, ram, RAM_SIZE);
	testutil_mkdtemp(dir, sizeof(dir), "/tmp/lvmm-vblk-");
	snprintf(img, sizeof(img), "%s/disk.img", dir);
	for (unsigned i = 0; i < IMG_BYTES; i++)
		pattern[i] = (uint8_t)(i * 7 + (i >> 9));
	testutil_write_file(img, (const char *)pattern, IMG_BYTES, 0600);
	free(pattern);
	ck_assert_msg(blk_open(img, readonly, &dev) == 0, "%s", err);
	vp = virtio_blk_model.pci(dev)->priv;
	driver_init();
}

static void setup(void)
{
	setup_rw(false);
}

static void setup_ro(void)
{
	setup_rw(true);
}

static void teardown(void)
{
	virtio_blk_model.destroy(dev);
	testutil_rmtree(dir);
	free(ram);
}

/* Offers the chain at descriptor 0, kicks queue 0 and waits for it to come back: its used len. */
static uint32_t run_chain(void)
{
	uint16_t before = vdrv_used_idx(0);
	uint32_t id, len;

	vdrv_offer(0, 0);
	ck_assert(vdrv_used_next(0, &id, &len));
	ck_assert_uint_eq(vdrv_used_idx(0), (uint16_t)(before + 1));
	ck_assert_uint_eq(id, 0);
	return len;
}

/* A request: header, len data bytes at BUF_GPA (device-writable for IN and GET_ID), status. */
static uint8_t request(uint32_t type, uint64_t sector, uint32_t len, uint32_t *used)
{
	bool in = type == T_IN || type == T_GET_ID;
	uint32_t u;

	memcpy(ram + HDR_GPA, &type, 4);
	memset(ram + HDR_GPA + 4, 0, 4);
	memcpy(ram + HDR_GPA + 8, &sector, 8);
	ram[STAT_GPA] = 0xee;
	if (len) {
		vdrv_set_desc(0, 0, HDR_GPA, 16, VIRTQ_DESC_F_NEXT, 1);
		vdrv_set_desc(0, 1, BUF_GPA, len, VIRTQ_DESC_F_NEXT | (in ? VIRTQ_DESC_F_WRITE : 0),
			      2);
		vdrv_set_desc(0, 2, STAT_GPA, 1, VIRTQ_DESC_F_WRITE, 0);
	} else {
		vdrv_set_desc(0, 0, HDR_GPA, 16, VIRTQ_DESC_F_NEXT, 1);
		vdrv_set_desc(0, 1, STAT_GPA, 1, VIRTQ_DESC_F_WRITE, 0);
	}
	u = run_chain();
	if (used)
		*used = u;
	return ram[STAT_GPA];
}

static uint8_t *image(void)
{
	uint8_t *b = malloc(IMG_BYTES);
	int fd = open(img, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, b, IMG_BYTES, 0), IMG_BYTES);
	close(fd);
	return b;
}

START_TEST(test_config_space)
{
	uint64_t cap = vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF, 8);

	ck_assert_uint_eq(cap, IMG_BYTES / 512);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 20, 4), 512); /* blk_size */
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 34, 2), 2);   /* num_queues */
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 12, 4),
			  VIRTQ_MAX_SEGS - 2); /* seg_max */
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_NUM_QUEUES, 2), 2);
	vdrv_bar_w(VIRTIO_PCI_DFSELECT, 0, 4);
	/* MQ, FLUSH, DISCARD, WRITE_ZEROES offered, RO not */
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DF, 4) & (1u << 12 | 1u << 9 | 1u << 13 | 1u << 14),
			  1u << 12 | 1u << 9 | 1u << 13 | 1u << 14);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DF, 4) & 1u << 5, 0);
	/* reads past the structure are zero */
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DEVCFG_OFF + 60, 4), 0);
}
END_TEST

START_TEST(test_write_read_flush)
{
	uint8_t *b;
	uint32_t used;

	for (unsigned i = 0; i < 8192; i++)
		ram[BUF_GPA + i] = (uint8_t)(0xa5 ^ i);
	ck_assert_uint_eq(request(T_OUT, 8, 8192, &used), S_OK);
	ck_assert_uint_eq(used, 1);
	memset(ram + BUF_GPA, 0, 8192);
	ck_assert_uint_eq(request(T_IN, 8, 8192, &used), S_OK);
	ck_assert_uint_eq(used, 8193);
	for (unsigned i = 0; i < 8192; i++)
		ck_assert_uint_eq(ram[BUF_GPA + i], (uint8_t)(0xa5 ^ i));
	ck_assert_uint_eq(request(T_FLUSH, 0, 0, NULL), S_OK);
	b = image();
	for (unsigned i = 0; i < 8192; i++)
		ck_assert_uint_eq(b[4096 + i], (uint8_t)(0xa5 ^ i));
	/* the rest of the image untouched */
	ck_assert_uint_eq(b[4095], (uint8_t)(4095 * 7 + (4095 >> 9)));
	free(b);
	/* the last sector, read */
	ck_assert_uint_eq(request(T_IN, IMG_BYTES / 512 - 1, 512, NULL), S_OK);
	ck_assert_uint_eq(ram[BUF_GPA],
			  (uint8_t)((IMG_BYTES - 512) * 7 + ((IMG_BYTES - 512) >> 9)));
}
END_TEST

START_TEST(test_get_id)
{
	uint32_t used;

	memset(ram + BUF_GPA, 0x55, 64);
	ck_assert_uint_eq(request(T_GET_ID, 0, 20, &used), S_OK);
	ck_assert_uint_eq(used, 21);
	ck_assert_mem_eq(ram + BUF_GPA, "lvmm-serial-0001\0\0\0\0", 20);
	/* a buffer shorter than the 20 bytes the spec gives the serial */
	ck_assert_uint_eq(request(T_GET_ID, 0, 8, NULL), S_IOERR);
}
END_TEST

START_TEST(test_hostile_requests)
{
	uint32_t used;

	/* past the end, straddling the end, a sector number that overflows */
	ck_assert_uint_eq(request(T_IN, IMG_BYTES / 512, 512, NULL), S_IOERR);
	ck_assert_uint_eq(request(T_OUT, IMG_BYTES / 512 - 1, 1024, NULL), S_IOERR);
	ck_assert_uint_eq(request(T_IN, ~0ULL - 1, 1024, NULL), S_IOERR);
	/* not a whole number of sectors */
	ck_assert_uint_eq(request(T_IN, 0, 100, &used), S_IOERR);
	ck_assert_uint_eq(used, 1);
	/* unknown types, one above 255 */
	ck_assert_uint_eq(request(99, 0, 0, NULL), S_UNSUPP);
	ck_assert_uint_eq(request(0x100 | T_IN, 0, 512, NULL), S_UNSUPP);
	/* a header shorter than 16 bytes */
	vdrv_set_desc(0, 0, HDR_GPA, 8, VIRTQ_DESC_F_NEXT, 1);
	vdrv_set_desc(0, 1, STAT_GPA, 1, VIRTQ_DESC_F_WRITE, 0);
	ram[STAT_GPA] = 0xee;
	run_chain();
	ck_assert_uint_eq(ram[STAT_GPA], S_IOERR);
	/* no writable byte for a status: returned with nothing written */
	vdrv_set_desc(0, 0, HDR_GPA, 16, 0, 0);
	ck_assert_uint_eq(run_chain(), 0);
	/* the device still serves after all that */
	ck_assert_uint_eq(request(T_IN, 0, 512, NULL), S_OK);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_STATUS, 1) & VIRTIO_STATUS_NEEDS_RESET, 0);
}
END_TEST

static void put_seg(unsigned i, uint64_t sector, uint32_t num, uint32_t flags)
{
	memcpy(ram + BUF_GPA + 16 * i, &sector, 8);
	memcpy(ram + BUF_GPA + 16 * i + 8, &num, 4);
	memcpy(ram + BUF_GPA + 16 * i + 12, &flags, 4);
}

START_TEST(test_discard_write_zeroes)
{
	uint8_t *b;

	put_seg(0, 2, 4, 0);
	put_seg(1, 100, 1, 1); /* unmap */
	ck_assert_uint_eq(request(T_WRITE_ZEROES, 0, 32, NULL), S_OK);
	b = image();
	for (unsigned i = 1024; i < 3072; i++)
		ck_assert_uint_eq(b[i], 0);
	for (unsigned i = 100 * 512; i < 101 * 512; i++)
		ck_assert_uint_eq(b[i], 0);
	ck_assert_uint_ne(b[1023] | b[3072] | b[101 * 512], 0);
	free(b);
	put_seg(0, 10, 8, 0);
	ck_assert_uint_eq(request(T_DISCARD, 0, 16, NULL), S_OK);
	/* discard takes no flags; past the end; a table that is not whole segments */
	put_seg(0, 10, 8, 1);
	ck_assert_uint_eq(request(T_DISCARD, 0, 16, NULL), S_UNSUPP);
	put_seg(0, IMG_BYTES / 512 - 1, 2, 0);
	ck_assert_uint_eq(request(T_WRITE_ZEROES, 0, 16, NULL), S_IOERR);
	ck_assert_uint_eq(request(T_WRITE_ZEROES, 0, 20, NULL), S_UNSUPP);
}
END_TEST

START_TEST(test_read_only)
{
	uint8_t *b;

	vdrv_bar_w(VIRTIO_PCI_DFSELECT, 0, 4);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_DF, 4) & (1u << 5 | 1u << 13 | 1u << 14), 1u << 5);
	memset(ram + BUF_GPA, 0x11, 4096);
	ck_assert_uint_eq(request(T_OUT, 0, 4096, NULL), S_IOERR);
	put_seg(0, 0, 8, 0);
	ck_assert_uint_ne(request(T_WRITE_ZEROES, 0, 16, NULL), S_OK);
	ck_assert_uint_ne(request(T_DISCARD, 0, 16, NULL), S_OK);
	ck_assert_uint_eq(request(T_IN, 0, 4096, NULL), S_OK);
	b = image();
	ck_assert_mem_eq(ram + BUF_GPA, b, 4096);
	ck_assert_uint_eq(b[1], 7);
	free(b);
}
END_TEST

/* A device reset with a request taken: nothing comes back for it afterwards, and the queue
 * set up again serves from the start. */
START_TEST(test_reset)
{
	ck_assert_uint_eq(request(T_IN, 0, 512, NULL), S_OK);
	vdrv_bar_w(VIRTIO_PCI_STATUS, 0, 1);
	ck_assert_uint_eq(vdrv_bar_r(VIRTIO_PCI_STATUS, 1), 0);
	memset(ram + USED_GPA, 0, 4 + 8 * QSIZE);
	driver_init();
	ck_assert_uint_eq(request(T_IN, 0, 512, NULL), S_OK);
	ck_assert_uint_eq(ram[BUF_GPA + 1], 7);
}
END_TEST

/* One writer per image: a second writer and a reader beside it are refused; readers share. */
START_TEST(test_image_lock)
{
	void *other;

	ck_assert_int_eq(blk_open(img, false, &other), -EBUSY);
	ck_assert_msg(strstr(err, "in use"), "%s", err);
	ck_assert_int_eq(blk_open(img, true, &other), -EBUSY);
}
END_TEST

START_TEST(test_image_lock_readers)
{
	void *other;

	void *writer;

	ck_assert_msg(blk_open(img, true, &other) == 0, "%s", err);
	ck_assert_int_eq(blk_open(img, false, &writer), -EBUSY);
	virtio_blk_model.destroy(other);
	/* and a missing image says so */
	ck_assert_int_lt(blk_open("/nonexistent/disk.img", false, &other), 0);
	ck_assert_msg(strstr(err, "/nonexistent/disk.img"), "%s", err);
}
END_TEST

/* Live migration: the paused disk lets its image go (another user may lock it, what was written
 * is there) and takes it back, refused while another holds it, or when the path now names
 * another file or the file changed size; the disk serves again once taken back. */
START_TEST(test_release_reclaim)
{
	char moved[160];
	void *other;
	uint8_t *b;

	ck_assert_int_eq(virtio_blk_model.reclaim(dev, err, sizeof(err)), 0); /* nothing to do */
	ck_assert_int_eq(virtio_blk_model.release(dev, err, sizeof(err)), -EBUSY);
	ck_assert_msg(strstr(err, "not paused"), "%s", err);
	memset(ram + BUF_GPA, 0x3c, 4096);
	ck_assert_uint_eq(request(T_OUT, 16, 4096, NULL), S_OK);
	virtio_blk_model.pause(dev);
	ck_assert_int_eq(virtio_blk_model.release(dev, err, sizeof(err)), 0);
	b = image();
	ck_assert_uint_eq(b[16 * 512], 0x3c);
	ck_assert_uint_eq(b[16 * 512 + 4095], 0x3c);
	free(b);
	/* the lock is gone: another writer takes it, and the reclaim is refused meanwhile */
	ck_assert_msg(blk_open(img, false, &other) == 0, "%s", err);
	ck_assert_int_eq(virtio_blk_model.reclaim(dev, err, sizeof(err)), -EBUSY);
	ck_assert_msg(strstr(err, "in use"), "%s", err);
	virtio_blk_model.destroy(other);
	/* another file at the path, then the same file at another size */
	snprintf(moved, sizeof(moved), "%s.moved", img);
	ck_assert_int_eq(rename(img, moved), 0);
	testutil_write_file(img, "x", 1, 0600);
	ck_assert_int_eq(truncate(img, IMG_BYTES), 0);
	ck_assert_int_eq(virtio_blk_model.reclaim(dev, err, sizeof(err)), -ESTALE);
	ck_assert_msg(strstr(err, "no longer the file"), "%s", err);
	ck_assert_int_eq(rename(moved, img), 0);
	ck_assert_int_eq(truncate(img, 2 * IMG_BYTES), 0);
	ck_assert_int_eq(virtio_blk_model.reclaim(dev, err, sizeof(err)), -ESTALE);
	ck_assert_msg(strstr(err, "2097152 bytes, the VM had 1048576"), "%s", err);
	ck_assert_int_eq(truncate(img, IMG_BYTES), 0);
	ck_assert_msg(virtio_blk_model.reclaim(dev, err, sizeof(err)) == 0, "%s", err);
	/* held again, and serving once resumed */
	ck_assert_int_eq(blk_open(img, true, &other), -EBUSY);
	virtio_blk_model.resume(dev);
	memset(ram + BUF_GPA, 0, 4096);
	ck_assert_uint_eq(request(T_IN, 16, 4096, NULL), S_OK);
	ck_assert_uint_eq(ram[BUF_GPA + 100], 0x3c);
	ck_assert_uint_eq(request(T_FLUSH, 0, 0, NULL), S_OK);
}
END_TEST

/* Released and never taken back (the destination took over): destroyed cleanly. */
START_TEST(test_release_destroy)
{
	virtio_blk_model.pause(dev);
	ck_assert_int_eq(virtio_blk_model.release(dev, err, sizeof(err)), 0);
	ck_assert_int_eq(virtio_blk_model.release(dev, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_disk_flag)
{
	struct virtio_blk_config c;

	ck_assert_int_eq(config_parse_disk("path=/a.img", &c, err, sizeof(err)), 0);
	ck_assert_str_eq(c.path, "/a.img");
	ck_assert(!c.readonly && !c.direct && !c.num_queues && !c.queue_size && !c.id[0]);
	ck_assert_int_eq(config_parse_disk("path=/b.img,readonly=on,direct=on,num_queues=4,"
					   "queue_size=256,id=data,serial=S1",
					   &c, err, sizeof(err)),
			 0);
	ck_assert(c.readonly && c.direct);
	ck_assert_uint_eq(c.num_queues, 4);
	ck_assert_uint_eq(c.queue_size, 256);
	ck_assert_str_eq(c.id, "data");
	ck_assert_str_eq(c.serial, "S1");
	ck_assert_int_eq(config_parse_disk("readonly=on", &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "no path"));
	ck_assert_int_eq(config_parse_disk("path=/a,num_queues=9", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_disk("path=/a,queue_size=1", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(config_parse_disk("path=/a,vhost_user=on", &c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "vhost_user"));
	ck_assert_int_eq(config_parse_disk("path=/a,id=../x", &c, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(
	    config_parse_disk("path=/a,serial=123456789012345678901", &c, err, sizeof(err)),
	    -EINVAL);
	ck_assert_int_eq(config_parse_disk("path=/a,readonly=maybe", &c, err, sizeof(err)),
			 -EINVAL);
}
END_TEST

static int json_disk(const char *text, struct virtio_blk_config *c)
{
	json_t *j = json_loads(text, 0, NULL);
	int r;

	ck_assert_ptr_nonnull(j);
	r = api_json_to_disk(j, "disks[0]", c, err, sizeof(err));
	json_decref(j);
	return r;
}

START_TEST(test_disk_json)
{
	struct virtio_blk_config c;
	json_t *o;

	ck_assert_int_eq(json_disk("{\"path\": \"/i\", \"readonly\": true, \"num_queues\": 2,"
				   " \"queue_size\": 64, \"id\": \"d1\", \"serial\": \"x\","
				   " \"iommu\": false, \"vhost_user\": false, \"pci_segment\": 0}",
				   &c),
			 0);
	ck_assert(c.readonly);
	ck_assert_uint_eq(c.num_queues, 2);
	ck_assert_uint_eq(c.queue_size, 64);
	o = api_disk_to_json(&c);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "queue_size")), 64);
	ck_assert_str_eq(json_string_value(json_object_get(o, "id")), "d1");
	json_decref(o);
	ck_assert_int_ne(json_disk("{\"readonly\": true}", &c), 0);
	ck_assert_ptr_nonnull(strstr(err, "disks[0].path"));
	ck_assert_int_ne(json_disk("{\"path\": \"/i\", \"vhost_user\": true}", &c), 0);
	ck_assert_ptr_nonnull(strstr(err, "disks[0].vhost_user"));
	ck_assert_int_ne(json_disk("{\"path\": \"/i\", \"disable_io_uring\": true}", &c), 0);
	ck_assert_ptr_nonnull(strstr(err, "disable_io_uring"));
	ck_assert_int_ne(json_disk("{\"path\": \"/i\", \"queue_size\": 100}", &c), 0);
	ck_assert_ptr_nonnull(strstr(err, "power of two"));
	ck_assert_int_ne(json_disk("{\"path\": \"/i\", \"num_queues\": 9}", &c), 0);
	ck_assert_int_ne(json_disk("{\"path\": \"/i\", \"pci_segment\": 1}", &c), 0);
	ck_assert_int_ne(json_disk("{\"path\": \"/i\", \"id\": \"a/b\"}", &c), 0);
	ck_assert_int_ne(json_disk("[1]", &c), 0);
}
END_TEST

/* Ids are unique across device models: a disk may not take a vNVMe's or the rng's. */
START_TEST(test_ids_across_models)
{
	struct vm_config c;

	config_defaults(&c);
	snprintf(c.kernel, sizeof(c.kernel), "/bin/sh");
	c.ndisks = 2;
	ck_assert_int_eq(config_parse_disk("path=/a", &c.disks[0], err, sizeof(err)), 0);
	ck_assert_int_eq(config_parse_disk("path=/b", &c.disks[1], err, sizeof(err)), 0);
	ck_assert_msg(config_validate(&c, err, sizeof(err)) == 0, "%s", err); /* disk0, disk1 */
	snprintf(c.disks[1].id, sizeof(c.disks[1].id), "disk0");
	ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "device id 'disk0' is used twice"));
	snprintf(c.disks[1].id, sizeof(c.disks[1].id), "nvme0");
	c.nvnvme = 1;
	ck_assert_int_eq(config_parse_vnvme("file=/x.img", &c.vnvme[0], err, sizeof(err)), 0);
	ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "(vnvme and virtio-blk)"));
	ck_assert_str_eq(devices_config_id_owner(&c, "nvme0"), "vnvme");
	ck_assert_str_eq(devices_config_id_owner(&c, "disk0"), "virtio-blk");
	ck_assert_ptr_null(devices_config_id_owner(&c, "rng0"));
}
END_TEST

static Suite *virtio_blk_suite(void)
{
	Suite *s = suite_create("virtio_blk");
	TCase *tc = tcase_create("device");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_config_space);
	tcase_add_test(tc, test_write_read_flush);
	tcase_add_test(tc, test_get_id);
	tcase_add_test(tc, test_hostile_requests);
	tcase_add_test(tc, test_discard_write_zeroes);
	tcase_add_test(tc, test_reset);
	tcase_add_test(tc, test_image_lock);
	tcase_add_test(tc, test_release_reclaim);
	tcase_add_test(tc, test_release_destroy);
	suite_add_tcase(s, tc);
	tc = tcase_create("readonly");
	tcase_add_checked_fixture(tc, setup_ro, teardown);
	tcase_add_test(tc, test_read_only);
	tcase_add_test(tc, test_image_lock_readers);
	suite_add_tcase(s, tc);
	tc = tcase_create("config");
	tcase_add_test(tc, test_disk_flag);
	tcase_add_test(tc, test_disk_json);
	tcase_add_test(tc, test_ids_across_models);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return testutil_run_suite(virtio_blk_suite());
}
