/* libFuzzer target for the SMP trampoline scan on kvm_pvm hosts: guest low memory (the
 * real_mode_header, trampoline and page tables it points at) and the warm-reset start address
 * are all the guest's; the scan must stay inside RAM and answer an error, never crash. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "guest_mem.h"
#include "smp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_RAM (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t ram[FZ_RAM];
	struct guest_mem gm;
	struct smp_target t;
	uint32_t start, ramsz;
	size_t n, off;

	if (size < 8)
		return 0;
	memcpy(&start, data, 4);
	memcpy(&ramsz, data + 4, 4);
	data += 8;
	size -= 8;
	/* RAM from a page up to 1 MiB: the scan meets its end at every size */
	ramsz = 4096 + ramsz % (FZ_RAM - 4096);
	memset(ram, 0, ramsz);
	/* the input lands where the trampoline lives, below the start address */
	off = (start % ramsz) / 2;
	n = size < ramsz - off ? size : ramsz - off;
	memcpy(ram + off, data, n);
	gmem_init_buffer(&gm, ram, ramsz);
	smp_find_target(&gm, start, &t);
	smp_find_target(&gm, start & 0xfffff, &t);
	return 0;
}
