/* Legacy platform devices: reset control (0xcf9), i8042 reset line, ACPI PM1a poweroff, CMOS RTC
 * with the shutdown status byte, and a sink for the POST/delay port 0x80. */
#include <string.h>
#include <time.h>

#include "layout.h"
#include "legacy.h"

#define PM1_CNT_SCI_EN	      0x0001
#define PM1_CNT_SLP_TYP_SHIFT 10
#define PM1_CNT_SLP_EN	      (1u << 13)

#define CMOS_PORT_INDEX	     0x70
#define CMOS_SHUTDOWN_STATUS 0x0f
#define I8042_DATA_PORT	     0x60
#define I8042_CMD_RESET	     0xfe
#define POST_PORT	     0x80

void legacy_init(struct legacy *l, void (*event)(void *, enum legacy_event, const char *),
		 void (*warm_reset)(void *, uint8_t), void *opaque)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	l->event = event;
	l->warm_reset = warm_reset;
	l->opaque = opaque;
	l->pm1_cnt = PM1_CNT_SCI_EN; /* hardware-reduced style: always in ACPI mode */
	l->cmos[0x0a] = 0x26;	     /* 32.768 kHz time base, 1024 Hz rate, no update in progress */
	l->cmos[0x0b] = 0x02;	     /* 24-hour, BCD */
	l->cmos[0x0d] = 0x80;	     /* battery good */
}

static void legacy_fire(struct legacy *l, enum legacy_event ev, const char *how)
{
	if (l->event)
		l->event(l->opaque, ev, how);
}

static void put_le(void *data, unsigned len, uint32_t v)
{
	uint8_t *d = data;
	unsigned i;

	for (i = 0; i < len; i++)
		d[i] = i < 4 ? (uint8_t)(v >> (8 * i)) : 0;
}

static uint32_t get_le(const void *data, unsigned len)
{
	const uint8_t *d = data;
	uint32_t v = 0;
	unsigned i;

	for (i = 0; i < len && i < 4; i++)
		v |= (uint32_t)d[i] << (8 * i);
	return v;
}

/* ---- ACPI PM1a event (status + enable) and control blocks ---- */

static void pm1_evt_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct legacy *l = opaque;
	uint32_t v;

	pthread_mutex_lock(&l->lock);
	v = (uint32_t)l->pm1_sts | ((uint32_t)l->pm1_en << 16);
	pthread_mutex_unlock(&l->lock);
	put_le(data, len, v >> (8 * off));
}

static void pm1_evt_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct legacy *l = opaque;
	uint64_t i;
	uint32_t v = get_le(data, len);

	pthread_mutex_lock(&l->lock);
	for (i = 0; i < len && off + i < 4; i++) {
		uint8_t b = (uint8_t)(v >> (8 * i));

		if (off + i < 2) /* status bits are write-one-to-clear */
			l->pm1_sts &= (uint16_t) ~((uint16_t)b << (8 * (off + i)));
		else
			l->pm1_en = (uint16_t)((l->pm1_en & ~(0xff << (8 * (off + i - 2)))) |
					       (b << (8 * (off + i - 2))));
	}
	pthread_mutex_unlock(&l->lock);
}

static void pm1_cnt_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct legacy *l = opaque;

	put_le(data, len, (uint32_t)l->pm1_cnt >> (8 * off));
}

static void pm1_cnt_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct legacy *l = opaque;
	uint32_t v = get_le(data, len) << (8 * off);
	unsigned typ;

	if (off == 1)
		v |= l->pm1_cnt & 0xff;
	else if (len == 1)
		v |= l->pm1_cnt & 0xff00;
	v &= 0xffff;
	typ = (v >> PM1_CNT_SLP_TYP_SHIFT) & 7;
	/* SLP_EN is write-only: the register keeps the rest. */
	l->pm1_cnt = (uint16_t)((v & ~PM1_CNT_SLP_EN) | PM1_CNT_SCI_EN);
	if ((v & PM1_CNT_SLP_EN) && typ == LAYOUT_ACPI_S5_TYP)
		legacy_fire(l, LEGACY_EV_POWEROFF, "ACPI S5");
}

static const struct bus_ops pm1_evt_ops = {.read = pm1_evt_read, .write = pm1_evt_write};
static const struct bus_ops pm1_cnt_ops = {.read = pm1_cnt_read, .write = pm1_cnt_write};

/* ---- i8042: only the parts firmware and Linux touch to reset ---- */

static void i8042_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	/* Status 0: no output byte, input buffer empty, so probes conclude "no controller". */
	memset(data, 0, len);
}

static void i8042_cmd_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	if (*(const uint8_t *)data == I8042_CMD_RESET)
		legacy_fire(opaque, LEGACY_EV_RESET, "i8042 reset");
}

static const struct bus_ops i8042_data_ops = {.read = i8042_read};
static const struct bus_ops i8042_cmd_ops = {.read = i8042_read, .write = i8042_cmd_write};

/* ---- CMOS / RTC ---- */

static uint8_t bcd(int v)
{
	return (uint8_t)(((v / 10) << 4) | (v % 10));
}

static uint8_t cmos_value(struct legacy *l, uint8_t idx)
{
	struct tm tm;
	time_t now;

	if (idx > 9 && idx != 0x32)
		return l->cmos[idx];
	now = time(NULL);
	gmtime_r(&now, &tm);
	switch (idx) {
	case 0:
		return bcd(tm.tm_sec);
	case 2:
		return bcd(tm.tm_min);
	case 4:
		return bcd(tm.tm_hour);
	case 6:
		return bcd(tm.tm_wday + 1);
	case 7:
		return bcd(tm.tm_mday);
	case 8:
		return bcd(tm.tm_mon + 1);
	case 9:
		return bcd(tm.tm_year % 100);
	case 0x32:
		return bcd((tm.tm_year + 1900) / 100);
	}
	return l->cmos[idx]; /* alarm registers */
}

static void cmos_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct legacy *l = opaque;
	uint8_t v;

	pthread_mutex_lock(&l->lock);
	v = off == 0 ? l->cmos_index : cmos_value(l, l->cmos_index & 0x7f);
	pthread_mutex_unlock(&l->lock);
	memset(data, v, len);
}

static void cmos_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct legacy *l = opaque;
	uint8_t v = *(const uint8_t *)data, idx;

	pthread_mutex_lock(&l->lock);
	if (off == 0) {
		l->cmos_index = v; /* bit 7 is the NMI mask: kept, ignored */
		pthread_mutex_unlock(&l->lock);
		return;
	}
	idx = l->cmos_index & 0x7f;
	if (idx >= 0x0a) /* the clock itself follows the host; status and NVRAM bytes stick */
		l->cmos[idx] = v;
	pthread_mutex_unlock(&l->lock);
	if (idx == CMOS_SHUTDOWN_STATUS && l->warm_reset)
		l->warm_reset(l->opaque, v);
}

static const struct bus_ops cmos_ops = {.read = cmos_read, .write = cmos_write};

/* ---- POST / io_delay port: accepted and dropped ---- */

static void post_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	memset(data, 0xff, len);
}

static void post_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
}

static const struct bus_ops post_ops = {.read = post_read, .write = post_write};

bool legacy_reset_port_write(struct legacy *l, uint16_t port, unsigned len, uint8_t val)
{
	if (port != LAYOUT_RESET_PORT || len != 1)
		return false;
	l->reset_reg = val;
	/* Bit 2 starts the reset; bit 1 chooses hard vs soft, which a VM does not distinguish. */
	if (val & 0x04)
		legacy_fire(l, LEGACY_EV_RESET, "port 0xcf9 reset");
	return true;
}

int legacy_register(struct legacy *l, struct bus *pio)
{
	int ret;

	ret = bus_register(pio, LAYOUT_ACPI_PM1A_EVT, 4, &pm1_evt_ops, l, "acpi-pm1a-evt");
	if (!ret)
		ret = bus_register(pio, LAYOUT_ACPI_PM1A_CNT, 2, &pm1_cnt_ops, l, "acpi-pm1a-cnt");
	if (!ret)
		ret = bus_register(pio, I8042_DATA_PORT, 1, &i8042_data_ops, l, "i8042-data");
	if (!ret)
		ret = bus_register(pio, LAYOUT_I8042_PORT, 1, &i8042_cmd_ops, l, "i8042-cmd");
	if (!ret)
		ret = bus_register(pio, CMOS_PORT_INDEX, 2, &cmos_ops, l, "cmos");
	if (!ret)
		ret = bus_register(pio, POST_PORT, 1, &post_ops, l, "post");
	return ret;
}

/* ---- snapshots ---- */

void legacy_save(struct legacy *l, struct legacy_state *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&l->lock);
	st->cmos_index = l->cmos_index;
	st->reset_reg = l->reset_reg;
	st->pm1_sts = l->pm1_sts;
	st->pm1_en = l->pm1_en;
	st->pm1_cnt = l->pm1_cnt;
	memcpy(st->cmos, l->cmos, sizeof(st->cmos));
	pthread_mutex_unlock(&l->lock);
}

void legacy_restore(struct legacy *l, const struct legacy_state *st)
{
	pthread_mutex_lock(&l->lock);
	l->cmos_index = st->cmos_index;
	l->reset_reg = st->reset_reg;
	l->pm1_sts = st->pm1_sts;
	l->pm1_en = st->pm1_en;
	/* as a guest write leaves it: never sleeping, always in ACPI mode */
	l->pm1_cnt = (uint16_t)((st->pm1_cnt & ~PM1_CNT_SLP_EN) | PM1_CNT_SCI_EN);
	/* the clock bytes below 0x0a are the host's */
	memcpy(l->cmos + 0x0a, st->cmos + 0x0a, sizeof(l->cmos) - 0x0a);
	pthread_mutex_unlock(&l->lock);
}
