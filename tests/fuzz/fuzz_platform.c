/* libFuzzer target for the guest-facing platform models: UART, IOAPIC, legacy ports on the PIO
 * bus, and the emulation-failure decoder with its guest page walk. Every byte is guest input. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bus.h"
#include "hostcompat.h"
#include "ioapic.h"
#include "legacy.h"
#include "serial.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_irq(void *o, bool level)
{
	(void)o;
	(void)level;
}

static int on_msi(void *o, uint64_t addr, uint32_t val)
{
	(void)o;
	(void)addr;
	(void)val;
	return 0;
}

static void on_event(void *o, enum legacy_event ev, const char *how)
{
	(void)o;
	(void)ev;
	(void)how;
}

static void on_warm(void *o, uint8_t status)
{
	(void)o;
	(void)status;
}

static uint64_t take(const uint8_t **p, const uint8_t *end, unsigned n)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < n && *p < end; i++, (*p)++)
		v |= (uint64_t) * *p << (8 * i);
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t ram[64 * 1024] __attribute__((aligned(4096)));
	const uint8_t *p = data, *end = data + size;
	struct serial s;
	struct ioapic io;
	struct legacy l;
	struct bus pio;
	struct guest_mem gm;

	serial_init(&s, -1, on_irq, NULL);
	ioapic_init(&io, on_msi, NULL);
	legacy_init(&l, on_event, on_warm, NULL);
	bus_init(&pio);
	legacy_register(&l, &pio);
	memset(ram, 0, sizeof(ram));
	gmem_init_buffer(&gm, ram, sizeof(ram));

	while (p < end) {
		unsigned op = (unsigned)take(&p, end, 1);
		uint64_t a = take(&p, end, 2), v = take(&p, end, 4);
		unsigned len = 1u << (op >> 6); /* 1, 2, 4 or 8 */
		uint8_t buf[16];

		switch (op & 0x0f) {
		case 0:
			serial_write(&s, (unsigned)a & 7, (uint8_t)v);
			break;
		case 1:
			serial_read(&s, (unsigned)a & 7);
			break;
		case 2:
			serial_receive(&s, (const uint8_t *)&v, 4);
			break;
		case 3:
			ioapic_mmio_write(&io, a & 0xff, (uint32_t)v);
			break;
		case 4:
			ioapic_mmio_read(&io, a & 0xff);
			break;
		case 5:
			ioapic_set_irq(&io, (unsigned)a & 0x3f, v & 1);
			break;
		case 6:
			ioapic_eoi(&io, (uint8_t)v);
			break;
		case 7:
			memcpy(buf, &v, sizeof(v) < sizeof(buf) ? sizeof(v) : sizeof(buf));
			bus_access(&pio, a, buf, len, op & 0x10);
			break;
		case 8:
			legacy_reset_port_write(&l, (uint16_t)a, len, (uint8_t)v);
			break;
		case 9: {
			/* Guest memory the page walk reads: scribble, then translate and fetch. */
			uint64_t off = (a << 3) % (sizeof(ram) - 8);
			struct hostcompat_paging pg = {
			    .cr0 = (v & 1) ? 0x80000001ULL : 1,
			    .cr3 = take(&p, end, 3),
			    .cr4 = (v & 2 ? 0x20 : 0) | (v & 4 ? 0x1000 : 0) | (v & 8 ? 0x10 : 0),
			    .efer = v & 16 ? 0x500 : 0,
			};
			uint64_t gpa;
			unsigned n, ilen;

			memcpy(ram + off, &v, 4);
			memcpy(ram + off + 4, &a, 4);
			hostcompat_translate(&gm, &pg, take(&p, end, 8), &gpa);
			n = hostcompat_fetch(&gm, &pg, take(&p, end, 8), buf, sizeof(buf));
			hostcompat_decode(buf, n, &ilen);
			break;
		}
		default:
			hostcompat_decode((const uint8_t *)&v,
					  (unsigned)(a & 7) > 4 ? 4 : (unsigned)(a & 7), &len);
			break;
		}
	}
	return 0;
}
