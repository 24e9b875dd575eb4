/* Unit tests for the 8250 UART model (vmm/serial.c) and the legacy ports (vmm/legacy.c). */
#include <check.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "layout.h"
#include "legacy.h"
#include "serial.h"
#include "testutil.h"

static int irq_changes;
static bool irq_level;

static void on_irq(void *opaque, bool level)
{
	(void)opaque;
	irq_changes++;
	irq_level = level;
}

static void uart_setup(struct serial *s, int fds[2])
{
	ck_assert_int_eq(pipe(fds), 0);
	irq_changes = 0;
	irq_level = false;
	memset(s, 0, sizeof(*s));
	serial_init(s, fds[1], on_irq, NULL);
}

static void uart_done(struct serial *s, int fds[2])
{
	serial_out_stop(s, 1000);
	close(fds[0]);
	close(fds[1]);
}

START_TEST(test_tx_to_fd)
{
	struct serial s;
	int fds[2];
	char buf[8] = {0};

	uart_setup(&s, fds);
	serial_write(&s, 0, 'h');
	serial_write(&s, 0, 'i');
	serial_out_stop(&s, 1000); /* drains the ring */
	ck_assert_int_eq(read(fds[0], buf, sizeof(buf)), 2);
	ck_assert_str_eq(buf, "hi");
	/* LSR: transmitter always empty, no data ready. */
	ck_assert_uint_eq(serial_read(&s, 5) & 0x61, 0x60);
	uart_done(&s, fds);
}
END_TEST

START_TEST(test_rx_irq)
{
	struct serial s;
	int fds[2];

	uart_setup(&s, fds);
	ck_assert_uint_eq(serial_read(&s, 2) & 0x0f, 0x01); /* no interrupt pending */
	serial_write(&s, 1, 0x01);			    /* IER: receive data */
	ck_assert(!irq_level);
	ck_assert_uint_eq(serial_receive(&s, (const uint8_t *)"ab", 2), 2);
	ck_assert(irq_level);
	ck_assert_uint_eq(serial_read(&s, 5) & 0x01, 0x01);
	ck_assert_uint_eq(serial_read(&s, 2) & 0x0f, 0x04);
	ck_assert_uint_eq(serial_read(&s, 0), 'a');
	ck_assert(irq_level);
	ck_assert_uint_eq(serial_read(&s, 0), 'b');
	ck_assert(!irq_level);
	ck_assert_uint_eq(serial_read(&s, 5) & 0x01, 0);
	uart_done(&s, fds);
}
END_TEST

START_TEST(test_rx_fifo_full)
{
	struct serial s;
	uint8_t buf[SERIAL_RX_FIFO + 10];
	int fds[2];

	uart_setup(&s, fds);
	memset(buf, 'x', sizeof(buf));
	ck_assert_uint_eq(serial_receive(&s, buf, sizeof(buf)), SERIAL_RX_FIFO);
	ck_assert_uint_eq(serial_rx_room(&s), 0);
	serial_read(&s, 0);
	ck_assert_uint_eq(serial_rx_room(&s), 1);
	uart_done(&s, fds);
}
END_TEST

START_TEST(test_thre_irq_and_dlab)
{
	struct serial s;
	int fds[2];
	char c;

	uart_setup(&s, fds);
	serial_write(&s, 1, 0x02); /* IER: THR empty */
	ck_assert(irq_level);
	ck_assert_uint_eq(serial_read(&s, 2) & 0x0f, 0x02); /* reading IIR acknowledges */
	ck_assert(!irq_level);
	serial_write(&s, 0, 'z'); /* a transmit raises it again */
	ck_assert(irq_level);
	ck_assert_int_eq(read(fds[0], &c, 1), 1);
	/* With DLAB set, offsets 0/1 are the divisor, not data. */
	serial_write(&s, 3, 0x80);
	serial_write(&s, 0, 0x01);
	serial_write(&s, 1, 0x00);
	ck_assert_uint_eq(serial_read(&s, 0), 0x01);
	serial_write(&s, 3, 0x03);
	ck_assert_uint_eq(serial_read(&s, 3), 0x03);
	serial_write(&s, 7, 0x5a);
	ck_assert_uint_eq(serial_read(&s, 7), 0x5a);
	uart_done(&s, fds);
}
END_TEST

START_TEST(test_loopback)
{
	struct serial s;
	int fds[2];

	uart_setup(&s, fds);
	serial_write(&s, 4, 0x10 | 0x0a);		    /* loop, RTS, OUT2 */
	ck_assert_uint_eq(serial_read(&s, 6) & 0xf0, 0x90); /* CTS and DCD follow RTS and OUT2 */
	serial_write(&s, 0, 'q');
	ck_assert_uint_eq(serial_read(&s, 0), 'q');
	uart_done(&s, fds);
}
END_TEST

static enum legacy_event last_ev;
static int warm_status = -1;

static void on_event(void *opaque, enum legacy_event ev, const char *how)
{
	(void)opaque;
	(void)how;
	last_ev = ev;
}

static void on_warm(void *opaque, uint8_t status)
{
	(void)opaque;
	warm_status = status;
}

START_TEST(test_legacy_ports)
{
	struct legacy l;
	struct bus pio;
	uint16_t v16;
	uint8_t v8;

	bus_init(&pio);
	legacy_init(&l, on_event, on_warm, NULL);
	ck_assert_int_eq(legacy_register(&l, &pio), 0);
	last_ev = LEGACY_EV_NONE;

	/* SLP_EN with S3's type does nothing; with S5 it powers off. */
	v16 = (3 << 10) | (1 << 13);
	bus_access(&pio, LAYOUT_ACPI_PM1A_CNT, &v16, 2, true);
	ck_assert_int_eq(last_ev, LEGACY_EV_NONE);
	v16 = (LAYOUT_ACPI_S5_TYP << 10) | (1 << 13);
	bus_access(&pio, LAYOUT_ACPI_PM1A_CNT, &v16, 2, true);
	ck_assert_int_eq(last_ev, LEGACY_EV_POWEROFF);
	bus_access(&pio, LAYOUT_ACPI_PM1A_CNT, &v16, 2, false);
	ck_assert_uint_eq(v16 & 1, 1); /* SCI_EN: ACPI mode */

	last_ev = LEGACY_EV_NONE;
	ck_assert(!legacy_reset_port_write(&l, 0xcf8, 1, 0x06));
	ck_assert(!legacy_reset_port_write(&l, LAYOUT_RESET_PORT, 4, 0x06));
	ck_assert(legacy_reset_port_write(&l, LAYOUT_RESET_PORT, 1, 0x02));
	ck_assert_int_eq(last_ev, LEGACY_EV_NONE);
	ck_assert(legacy_reset_port_write(&l, LAYOUT_RESET_PORT, 1, 0x06));
	ck_assert_int_eq(last_ev, LEGACY_EV_RESET);

	last_ev = LEGACY_EV_NONE;
	v8 = 0xfe;
	bus_access(&pio, LAYOUT_I8042_PORT, &v8, 1, true);
	ck_assert_int_eq(last_ev, LEGACY_EV_RESET);

	/* CMOS: shutdown status byte reaches the warm-reset hook; the clock reads as BCD. */
	v8 = 0x0f;
	bus_access(&pio, 0x70, &v8, 1, true);
	v8 = 0x0a;
	bus_access(&pio, 0x71, &v8, 1, true);
	ck_assert_int_eq(warm_status, 0x0a);
	bus_access(&pio, 0x71, &v8, 1, false);
	ck_assert_uint_eq(v8, 0x0a);
	v8 = 0x00;
	bus_access(&pio, 0x70, &v8, 1, true);
	bus_access(&pio, 0x71, &v8, 1, false);
	ck_assert_uint_le(v8 >> 4, 5);
	ck_assert_uint_le(v8 & 0xf, 9);
}
END_TEST

/* The console reader never reads (a blocked stdout pipe): the vCPU path still returns at once,
 * the excess is counted as dropped, and stopping the console does not hang either. */
START_TEST(test_blocked_console_never_blocks_vcpu)
{
	static struct serial s;
	struct serial_stats st;
	char fill[4096];
	unsigned i;
	double t0;
	int fds[2];

	uart_setup(&s, fds);
	fcntl(fds[1], F_SETPIPE_SZ, 4096);
	fcntl(fds[1], F_SETFL, O_NONBLOCK);
	memset(fill, 'f', sizeof(fill));
	while (write(fds[1], fill, sizeof(fill)) > 0)
		;
	fcntl(fds[1], F_SETFL, 0); /* the writer meets a full, blocking pipe */
	t0 = testutil_now_s();
	for (i = 0; i < 300000; i++)
		serial_write(&s, 0, 'x');
	ck_assert_double_lt(testutil_now_s() - t0, 2.0);
	serial_get_stats(&s, &st);
	ck_assert_uint_eq(st.tx, 300000);
	ck_assert_uint_eq(st.written, 0);
	ck_assert_uint_ge(st.dropped, 300000 - SERIAL_OUT_RING);
	t0 = testutil_now_s();
	serial_out_stop(&s, 200);
	ck_assert_double_lt(testutil_now_s() - t0, 2.0);
	close(fds[0]);
	close(fds[1]);
}
END_TEST

/* A console file stops growing at its limit; the rest is counted as dropped. */
START_TEST(test_console_file_limit)
{
	static struct serial s;
	struct serial_stats st;
	char path[] = "/tmp/lvmm-serial-XXXXXX";
	struct stat sb;
	unsigned i;
	int fd;

	testutil_tmpfile(path);
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(serial_out_start(&s, fd, 1000, 0), 0);
	serial_init(&s, fd, on_irq, NULL);
	for (i = 0; i < 5000; i++) {
		serial_write(&s, 0, (uint8_t)('a' + i % 26));
		if (i % 1000 == 999)
			testutil_sleep_ms(20); /* let the writer run between bursts */
	}
	serial_out_stop(&s, 1000);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	ck_assert_int_eq(sb.st_size, 1000);
	serial_get_stats(&s, &st);
	ck_assert_uint_eq(st.tx, 5000);
	ck_assert_uint_eq(st.written, 1000);
	ck_assert_uint_eq(st.dropped, 4000);
	close(fd);
	unlink(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("serial");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_tx_to_fd);
	tcase_add_test(tc, test_rx_irq);
	tcase_add_test(tc, test_rx_fifo_full);
	tcase_add_test(tc, test_thre_irq_and_dlab);
	tcase_add_test(tc, test_loopback);
	tcase_add_test(tc, test_legacy_ports);
	tcase_add_test(tc, test_blocked_console_never_blocks_vcpu);
	tcase_add_test(tc, test_console_file_limit);
	suite_add_tcase(s, tc);
	return testutil_run_suite(s);
}
