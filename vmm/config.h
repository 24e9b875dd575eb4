/* A VM's configuration: what `lvmm run` flags and the API's vm.create JSON both produce.
 * Field meanings follow cloud-hypervisor's VmConfig where they overlap. */
#ifndef LVMM_CONFIG_H
#define LVMM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme-lightiov/vnvme.h"
#include "vfio/vfio_pci.h"
#include "virtio/virtio_blk.h"
#include "virtio/virtio_fs.h"
#include "virtio/virtio_net.h"
#include "virtio/virtio_vsock.h"

#define CONFIG_MAX_VNVME   8
#define CONFIG_MAX_DISKS   8
#define CONFIG_MAX_NETS	   4
#define CONFIG_MAX_FS	   4
#define CONFIG_MAX_DEVICES 8
#define CONFIG_PATH_MAX	   4096

enum serial_mode { SERIAL_STDIO, SERIAL_FILE, SERIAL_OFF, SERIAL_NULL };

struct vm_config {
	unsigned cpus;	   /* boot_vcpus, >= 1 */
	unsigned max_cpus; /* max_vcpus, >= cpus */
	uint64_t memory;   /* bytes */
	char kernel[CONFIG_PATH_MAX];
	char initramfs[CONFIG_PATH_MAX]; /* empty: none */
	char cmdline[4096];
	enum serial_mode serial;
	char serial_file[CONFIG_PATH_MAX];
	uint64_t serial_limit; /* File mode: bytes the file may hold, 0 = no limit */
	bool serial_truncate;  /* File mode: empty an existing file at boot (else append) */
	/* Set by the API server, never by a client: every path a client names lies beneath. */
	char allowed_dir[CONFIG_PATH_MAX];
	/* Set by vm.restore and `lvmm run --restore` (cloud-hypervisor's memory_restore_mode),
	 * never by a config: how the snapshot's RAM comes back (vm_snapshot.c). */
	enum config_mem_restore {
		CONFIG_MEM_RESTORE_AUTO, /* mapped when no device needs the RAM memfd, else copied
					  */
		CONFIG_MEM_RESTORE_COPY, /* copied into the RAM memfd */
		CONFIG_MEM_RESTORE_ONDEMAND, /* mapped (copy-on-write), or the restore refused */
	} mem_restore;
	bool mem_prefault; /* the mapped file's pages read in at the restore (prefault) */
	unsigned nvnvme;
	struct vnvme_config vnvme[CONFIG_MAX_VNVME];
	/* virtio-rng's entropy source (cloud-hypervisor's rng.src); empty: no rng device. Only
	 * the kernel's random character devices are taken (fsutil's FSUTIL_ENTROPY). */
	char rng_src[CONFIG_PATH_MAX];
	/* virtio-blk disks (cloud-hypervisor's disks / --disk) */
	unsigned ndisks;
	struct virtio_blk_config disks[CONFIG_MAX_DISKS];
	/* virtio-net devices (cloud-hypervisor's net / --net); their fds belong to whoever
	 * opened them (main.c for --net, the VM for vm.add-net's, the config for a migration's:
	 * fds_owned) */
	unsigned nnets;
	struct virtio_net_config nets[CONFIG_MAX_NETS];
	/* virtio-vsock (cloud-hypervisor's vsock / --vsock), one at most */
	bool has_vsock;
	struct virtio_vsock_config vsock;
	/* virtio-fs shares (cloud-hypervisor's fs / --fs) */
	unsigned nfs;
	struct virtio_fs_config fs[CONFIG_MAX_FS];
	/* passed-through host PCI functions (cloud-hypervisor's devices / --device) */
	unsigned ndevices;
	struct vfio_pci_config devices[CONFIG_MAX_DEVICES];
	/* platform.num_pci_segments: PCI segments the ACPI tables describe, 1..96; 0 reads as 1.
	 * Every device sits on segment 0; the others are empty host bridges. */
	unsigned num_pci_segments;
	/* Set by the VMM once the boot devices are placed, never by a client: the 64-bit PCI
	 * window's size for the firmware tables (0 reads as LAYOUT_MMIO64_SIZE). */
	uint64_t mmio64_size;
};

#define CONFIG_DEFAULT_CPUS	    1
#define CONFIG_DEFAULT_MEMORY	    (256ULL << 20)
#define CONFIG_MIN_MEMORY	    (16ULL << 20)
#define CONFIG_DEFAULT_SERIAL_LIMIT (64ULL << 20)

void config_defaults(struct vm_config *c);

/* "512M", "2G", "1048576", "4k" -> bytes. Binary units (K=1024). 0 on success, -EINVAL on a bad
 * suffix, junk or overflow. err gets a one-line message naming the input. */
int config_parse_size(const char *s, uint64_t *out, char *err, unsigned errlen);

/* A decimal count in min..max (no sign): 0, or -EINVAL when it is not one. */
int config_parse_count(const char *s, unsigned min, unsigned max, unsigned *out);

/* --vnvme argument: "file=PATH[,size=SIZE][,readonly=on][,serial=STR][,queues=N]" or
 * "NAME[:SIZE][,vol=NAME][,mode=passthrough|isolated|emulate][,doorbell=poll|eventfd]
 * [,queues=N]" (an ssd; no SIZE needs vol=; the mode defaults to isolated). */
int config_parse_vnvme(const char *s, struct vnvme_config *out, char *err, unsigned errlen);

/* SSD and volume names: the backend's limit (LIO_NAME_MAX, with the NUL). */
#define CONFIG_SSD_NAME_MAX 32
/* A plain name of len bytes (< max): [A-Za-z0-9_.-], not "." or "..". SSD names, volumes and
 * device ids from the command line and the API alike; an SSD name becomes a socket or device
 * path, so nothing else may pass. */
bool config_vnvme_name_ok(const char *s, size_t len, size_t max);

/* --serial argument: "stdio", "off" or "file=PATH[,truncate=on|off][,limit=SIZE]" (options are
 * taken from the end, so a PATH may itself hold commas). limit=0 lifts the size limit. */
int config_parse_serial(const char *s, struct vm_config *c, char *err, unsigned errlen);

/* --disk argument, cloud-hypervisor's syntax: "path=IMG[,readonly=on][,direct=on]
 * [,num_queues=N][,queue_size=N][,id=ID][,serial=S]" (a path with commas is not supported). */
int config_parse_disk(const char *s, struct virtio_blk_config *out, char *err, unsigned errlen);

/* --net argument, cloud-hypervisor's syntax: "tap=NAME[,mac=MAC][,num_queues=N]
 * [,queue_size=N][,mtu=N][,id=ID]" or "fd=N[:N...]" in place of tap= (taps opened by the
 * caller). */
int config_parse_net(const char *s, struct virtio_net_config *out, char *err, unsigned errlen);
/* The checks of one net configuration the command line, vm.create and vm.add-net share. */
int config_validate_net(const struct virtio_net_config *n, char *err, unsigned errlen);
/* "52:54:00:12:34:56" -> 6 bytes: 0, or -EINVAL. */
int config_parse_mac(const char *s, uint8_t mac[6]);

/* --vsock argument, cloud-hypervisor's syntax: "cid=N,socket=PATH[,id=ID]". */
int config_parse_vsock(const char *s, struct virtio_vsock_config *out, char *err, unsigned errlen);
/* The checks of a vsock configuration the command line, vm.create and vm.add-vsock share. */
int config_validate_vsock(const struct virtio_vsock_config *v, char *err, unsigned errlen);

/* --fs argument, cloud-hypervisor's syntax: "tag=TAG,socket=PATH[,num_queues=N][,queue_size=N]
 * [,id=ID]". */
int config_parse_fs(const char *s, struct virtio_fs_config *out, char *err, unsigned errlen);
/* The checks of one share the command line, vm.create and vm.add-fs share. */
int config_validate_fs(const struct virtio_fs_config *f, char *err, unsigned errlen);

/* --device argument, cloud-hypervisor's syntax: "path=/sys/bus/pci/devices/BDF[,id=ID]
 * [,iommu=on|off][,pci_segment=N]" (iommu=on and a segment other than 0 are refused). */
int config_parse_device(const char *s, struct vfio_pci_config *out, char *err, unsigned errlen);
/* The checks of one device the command line, vm.create and vm.add-device share. */
int config_validate_device(const struct vfio_pci_config *d, char *err, unsigned errlen);

/* --rng argument: "" (no value) or "src=PATH"; the source defaults to CONFIG_DEFAULT_RNG_SRC. */
#define CONFIG_DEFAULT_RNG_SRC "/dev/urandom"
int config_parse_rng(const char *s, struct vm_config *c, char *err, unsigned errlen);

/* The fds a config owns (a migration's hand-over: virtio_net_config.fds_owned,
 * virtio_vsock_config.listen_owned). config_fds_dup replaces each with a duplicate (vm_create:
 * the VM's copy of a config owns its own; on failure the rest are -1 and -errno returned);
 * config_fds_check: every net that took fds has all of them; config_fds_close closes them. */
int config_fds_dup(struct vm_config *c);
int config_fds_check(const struct vm_config *c, char *err, unsigned errlen);
void config_fds_close(struct vm_config *c);

/* Whole-config sanity check (cpus, memory bounds, kernel present, ...). */
int config_validate(const struct vm_config *c, char *err, unsigned errlen);

#endif
