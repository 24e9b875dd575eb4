/* The x86 Linux boot protocol's zero page (struct boot_params), its setup header and E820 map,
 * laid out at the protocol's byte offsets; plus the boot helpers that fill guest memory. */
#ifndef LVMM_BOOTPARAM_H
#define LVMM_BOOTPARAM_H

#include <stddef.h>
#include <stdint.h>

#include "guest_mem.h"

#define E820_RAM	 1
#define E820_RESERVED	 2
#define E820_ACPI	 3
#define E820_MAX_ENTRIES 128

struct e820_entry {
	uint64_t addr;
	uint64_t size;
	uint32_t type;
} __attribute__((packed));

/* Offsets relative to the start of the zero page; the header itself starts at 0x1f1. */
struct setup_header {
	uint8_t setup_sects;
	uint16_t root_flags;
	uint32_t syssize;
	uint16_t ram_size;
	uint16_t vid_mode;
	uint16_t root_dev;
	uint16_t boot_flag;
	uint16_t jump;
	uint32_t header;
	uint16_t version;
	uint32_t realmode_swtch;
	uint16_t start_sys_seg;
	uint16_t kernel_version;
	uint8_t type_of_loader;
	uint8_t loadflags;
	uint16_t setup_move_size;
	uint32_t code32_start;
	uint32_t ramdisk_image;
	uint32_t ramdisk_size;
	uint32_t bootsect_kludge;
	uint16_t heap_end_ptr;
	uint8_t ext_loader_ver;
	uint8_t ext_loader_type;
	uint32_t cmd_line_ptr;
	uint32_t initrd_addr_max;
	uint32_t kernel_alignment;
	uint8_t relocatable_kernel;
	uint8_t min_alignment;
	uint16_t xloadflags;
	uint32_t cmdline_size;
	uint32_t hardware_subarch;
	uint64_t hardware_subarch_data;
	uint32_t payload_offset;
	uint32_t payload_length;
	uint64_t setup_data;
	uint64_t pref_address;
	uint32_t init_size;
	uint32_t handover_offset;
	uint32_t kernel_info_offset;
} __attribute__((packed));

/* An entry of the zero page's setup_data list; SETUP_RNG_SEED's data is a seed the kernel mixes
 * into its entropy pool (credited when it trusts the boot loader) and then wipes. */
struct setup_data {
	uint64_t next;
	uint32_t type;
	uint32_t len;
	uint8_t data[];
} __attribute__((packed));

#define SETUP_RNG_SEED	   9
#define BOOT_RNG_SEED_SIZE 32

struct boot_params {
	uint8_t screen_info[0x40];	 /* 0x000 */
	uint8_t apm_bios_info[0x14];	 /* 0x040 */
	uint8_t pad2[4];		 /* 0x054 */
	uint64_t tboot_addr;		 /* 0x058 */
	uint8_t ist_info[0x10];		 /* 0x060 */
	uint64_t acpi_rsdp_addr;	 /* 0x070 */
	uint8_t pad3[8];		 /* 0x078 */
	uint8_t hd0_info[16];		 /* 0x080 */
	uint8_t hd1_info[16];		 /* 0x090 */
	uint8_t sys_desc_table[0x10];	 /* 0x0a0 */
	uint8_t olpc_ofw_header[0x10];	 /* 0x0b0 */
	uint32_t ext_ramdisk_image;	 /* 0x0c0 */
	uint32_t ext_ramdisk_size;	 /* 0x0c4 */
	uint32_t ext_cmd_line_ptr;	 /* 0x0c8 */
	uint8_t pad4[112];		 /* 0x0cc */
	uint32_t cc_blob_address;	 /* 0x13c */
	uint8_t edid_info[0x80];	 /* 0x140 */
	uint8_t efi_info[0x20];		 /* 0x1c0 */
	uint32_t alt_mem_k;		 /* 0x1e0 */
	uint32_t scratch;		 /* 0x1e4 */
	uint8_t e820_entries;		 /* 0x1e8 */
	uint8_t eddbuf_entries;		 /* 0x1e9 */
	uint8_t edd_mbr_sig_buf_entries; /* 0x1ea */
	uint8_t kbd_status;		 /* 0x1eb */
	uint8_t secure_boot;		 /* 0x1ec */
	uint8_t pad5[2];		 /* 0x1ed */
	uint8_t sentinel;		 /* 0x1ef */
	uint8_t pad6[1];		 /* 0x1f0 */
	struct setup_header hdr;	 /* 0x1f1 */
	uint8_t pad7[0x290 - 0x1f1 - sizeof(struct setup_header)];
	uint32_t edd_mbr_sig_buffer[16];		/* 0x290 */
	struct e820_entry e820_table[E820_MAX_ENTRIES]; /* 0x2d0 */
	uint8_t pad8[48];				/* 0xcd0 */
	uint8_t eddbuf[0x1ec];				/* 0xd00 */
	uint8_t pad9[276];				/* 0xeec */
} __attribute__((packed));

_Static_assert(sizeof(struct e820_entry) == 20, "e820 entry is 20 bytes");
_Static_assert(sizeof(struct setup_header) == 0x7b, "setup header spans 0x1f1..0x26c");
_Static_assert(sizeof(struct boot_params) == 4096, "zero page is one page");
_Static_assert(offsetof(struct boot_params, acpi_rsdp_addr) == 0x070, "acpi_rsdp_addr");
_Static_assert(offsetof(struct boot_params, ext_ramdisk_image) == 0x0c0, "ext_ramdisk_image");
_Static_assert(offsetof(struct boot_params, cc_blob_address) == 0x13c, "cc_blob_address");
_Static_assert(offsetof(struct boot_params, e820_entries) == 0x1e8, "e820_entries");
_Static_assert(offsetof(struct boot_params, sentinel) == 0x1ef, "sentinel");
_Static_assert(offsetof(struct boot_params, hdr) == 0x1f1, "setup header");
_Static_assert(offsetof(struct boot_params, hdr.boot_flag) == 0x1fe, "boot_flag");
_Static_assert(offsetof(struct boot_params, hdr.header) == 0x202, "HdrS magic");
_Static_assert(offsetof(struct boot_params, hdr.type_of_loader) == 0x210, "type_of_loader");
_Static_assert(offsetof(struct boot_params, hdr.ramdisk_image) == 0x218, "ramdisk_image");
_Static_assert(offsetof(struct boot_params, hdr.cmd_line_ptr) == 0x228, "cmd_line_ptr");
_Static_assert(offsetof(struct boot_params, hdr.kernel_alignment) == 0x230, "kernel_alignment");
_Static_assert(offsetof(struct boot_params, hdr.xloadflags) == 0x236, "xloadflags");
_Static_assert(offsetof(struct boot_params, hdr.cmdline_size) == 0x238, "cmdline_size");
_Static_assert(offsetof(struct boot_params, hdr.payload_offset) == 0x248, "payload_offset");
_Static_assert(offsetof(struct boot_params, hdr.pref_address) == 0x258, "pref_address");
_Static_assert(offsetof(struct boot_params, hdr.init_size) == 0x260, "init_size");
_Static_assert(offsetof(struct boot_params, edd_mbr_sig_buffer) == 0x290, "edd_mbr_sig_buffer");
_Static_assert(offsetof(struct boot_params, e820_table) == 0x2d0, "e820_table");
_Static_assert(offsetof(struct boot_params, eddbuf) == 0xd00, "eddbuf");

#define BOOT_HDR_OFFSET		  0x1f1
#define BOOT_HDR_MAGIC		  0x53726448 /* "HdrS" */
#define BOOT_FLAG_MAGIC		  0xaa55
#define BOOT_LOADER_UNDEFINED	  0xff
#define BOOT_LOADFLAG_LOADED_HIGH 0x01
#define BOOT_XLF_KERNEL_64	  0x01
#define BOOT_MIN_PROTOCOL	  0x020c /* 2.12: 64-bit entry and xloadflags */
/* Used for ELF kernels, which carry no header: Linux reads the values we fill in. */
#define BOOT_ELF_PROTOCOL	0x020f
#define BOOT_DEFAULT_INITRD_MAX 0x7fffffffULL
/* x86 Linux's COMMAND_LINE_SIZE is 2048 including the terminating NUL. */
#define BOOT_ELF_CMDLINE_MAX 2047

/* E820 map for the RAM slots of gm: the legacy holes below 1 MiB and the ECAM window are
 * reserved. Returns the number of entries written (at most max) or -ENOSPC. */
int boot_build_e820(const struct guest_mem *gm, struct e820_entry *tab, unsigned max);

/* End of the RAM that contains 1 MiB, capped at the 32-bit MMIO hole: the ceiling for the
 * kernel, the initramfs and anything else that needs a 32-bit address. 0 when no such RAM. */
uint64_t boot_low_ram_end(const struct guest_mem *gm);

/* Identity map of the first 4 GiB with 2 MiB pages at LAYOUT_PML4; returns the CR3 value. */
int boot_setup_pagetables(struct guest_mem *gm, uint64_t *cr3);

/* Highest page-aligned start for size bytes in [lo, hi); -ENOSPC when it does not fit. */
int boot_place_initrd(uint64_t lo, uint64_t hi, uint64_t size, uint64_t *start);

#endif
