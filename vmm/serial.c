/* 8250/16550A UART register model (COM1), its output writer and the host terminal's raw mode.
 * Transmit is immediate (THR always empty); receive goes through a small FIFO fed from stdin. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "seccomp_filter.h"
#include "serial.h"

#define UART_RBR 0
#define UART_IER 1
#define UART_IIR 2
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define UART_MSR 6
#define UART_SCR 7

#define IER_RDI	     0x01
#define IER_THRI     0x02
#define IIR_NO_INT   0x01
#define IIR_THRI     0x02
#define IIR_RDI	     0x04
#define IIR_FIFO     0xc0
#define LCR_DLAB     0x80
#define MCR_LOOP     0x10
#define MCR_OUT2     0x08
#define LSR_DR	     0x01
#define LSR_THRE     0x20
#define LSR_TEMT     0x40
#define MSR_DCD	     0x80
#define MSR_DSR	     0x20
#define MSR_CTS	     0x10
#define FCR_ENABLE   0x01
#define FCR_CLEAR_RX 0x02

static void serial_update_irq(struct serial *s)
{
	bool level = ((s->ier & IER_RDI) && s->rx_count) || ((s->ier & IER_THRI) && s->thr_irq);

	if (level != s->irq_level) {
		s->irq_level = level;
		if (s->set_irq)
			s->set_irq(s->irq_opaque, level);
	}
}

/* ---- output writer ---- */

/* Small chunks: poll() reporting a pipe or terminal writable promises room for about this much,
 * so the writer seldom blocks in write(2) and sees a stop request soon. */
#define SERIAL_OUT_CHUNK   512
#define SERIAL_OUT_POLL_MS 100

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Forgets what the ring holds, counted as dropped (o->lock held). */
static void out_drop_all(struct serial_out *o)
{
	o->dropped += o->count;
	o->head = (o->head + o->count) % SERIAL_OUT_RING;
	o->count = 0;
}

static void *serial_out_thread(void *arg)
{
	struct serial_out *o = arg;
	uint8_t buf[SERIAL_OUT_CHUNK];
	uint64_t deadline = 0;

	pthread_setname_np(pthread_self(), "lvmm-console");
	/* What the guest prints is written here: device-I/O calls only. */
	if (seccomp_thread_install(SECCOMP_IO, (char *)buf, sizeof(buf)))
		fprintf(stderr, "lvmm: console output: %s\n", (char *)buf);
	pthread_mutex_lock(&o->lock);
	for (;;) {
		struct pollfd p = {.fd = o->fd, .events = POLLOUT};
		unsigned n, i;
		ssize_t w = 0;
		int r;

		while (!o->count && !o->stop)
			pthread_cond_wait(&o->cond, &o->lock);
		if (!o->count)
			break;
		if (o->stop && !deadline)
			deadline = now_ms() + o->drain_ms;
		if (o->stop && now_ms() >= deadline) {
			out_drop_all(o);
			break;
		}
		if (o->limit && o->written >= o->limit) {
			/* The file is full: what the guest sends from now on is counted, not kept.
			 */
			out_drop_all(o);
			continue;
		}
		n = o->count < sizeof(buf) ? o->count : (unsigned)sizeof(buf);
		if (o->limit && n > o->limit - o->written)
			n = (unsigned)(o->limit - o->written);
		for (i = 0; i < n; i++)
			buf[i] = o->ring[(o->head + i) % SERIAL_OUT_RING];
		pthread_mutex_unlock(&o->lock);
		r = poll(&p, 1, SERIAL_OUT_POLL_MS);
		if (r > 0 && (p.revents & POLLOUT))
			w = write(o->fd, buf, n);
		else if (r > 0)
			w = -1; /* POLLERR/POLLHUP: nothing will ever take these bytes */
		if (w < 0 && (r <= 0 || errno == EINTR || errno == EAGAIN))
			w = 0;
		pthread_mutex_lock(&o->lock);
		if (w < 0) {
			/* A console that fails (EPIPE, EIO, ENOSPC) drops output instead of
			 * spinning. */
			out_drop_all(o);
		} else if (w > 0) {
			o->head = (o->head + (unsigned)w) % SERIAL_OUT_RING;
			o->count -= (unsigned)w;
			o->written += (uint64_t)w;
			if (o->limit && o->written >= o->limit && !o->limit_noted) {
				o->limit_noted = true;
				fprintf(
				    stderr,
				    "serial: console file reached its limit of %llu bytes; further "
				    "output is dropped\n",
				    (unsigned long long)o->limit);
			}
		}
	}
	pthread_mutex_unlock(&o->lock);
	return NULL;
}

int serial_out_start(struct serial *s, int fd, uint64_t limit, uint64_t already)
{
	struct serial_out *o = &s->out;
	int r;

	if (o->started)
		return -EBUSY;
	memset(o, 0, sizeof(*o));
	pthread_mutex_init(&o->lock, NULL);
	pthread_cond_init(&o->cond, NULL);
	o->fd = fd;
	o->limit = limit;
	o->written = already;
	o->limit_noted = limit && already >= limit;
	r = pthread_create(&o->thread, NULL, serial_out_thread, o);
	if (r)
		return -r;
	o->started = true;
	return 0;
}

void serial_out_stop(struct serial *s, unsigned drain_ms)
{
	struct serial_out *o = &s->out;

	if (!o->started)
		return;
	pthread_mutex_lock(&o->lock);
	o->stop = true;
	o->drain_ms = drain_ms;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->lock);
	pthread_join(o->thread, NULL);
	o->started = false;
}

void serial_get_stats(struct serial *s, struct serial_stats *st)
{
	struct serial_out *o = &s->out;

	/* Also after serial_out_stop(): the counters stay; a zeroed lock is a valid one. */
	pthread_mutex_lock(&o->lock);
	st->tx = o->tx;
	st->written = o->written;
	st->dropped = o->dropped;
	pthread_mutex_unlock(&o->lock);
}

/* From the vCPU path: queue one byte, never block on the console. */
static void out_put(struct serial_out *o, uint8_t c)
{
	pthread_mutex_lock(&o->lock);
	o->tx++;
	if (o->count < SERIAL_OUT_RING && !o->stop) {
		o->ring[(o->head + o->count) % SERIAL_OUT_RING] = c;
		if (!o->count++)
			pthread_cond_signal(&o->cond);
	} else {
		o->dropped++;
	}
	pthread_mutex_unlock(&o->lock);
}

/* ---- UART ---- */

void serial_init(struct serial *s, int out_fd, void (*set_irq)(void *, bool), void *opaque)
{
	if (out_fd < 0)
		memset(s, 0, sizeof(*s));
	else
		memset(s, 0, offsetof(struct serial, out));
	pthread_mutex_init(&s->lock, NULL);
	s->out_fd = out_fd;
	s->set_irq = set_irq;
	s->irq_opaque = opaque;
	s->mcr = MCR_OUT2;
	s->dll = 12; /* 9600 baud, what firmware leaves behind */
	if (out_fd >= 0 && !s->out.started && serial_out_start(s, out_fd, 0, 0))
		s->out_fd = -1; /* no writer thread: output is discarded rather than blocking */
}

static void serial_tx(struct serial *s, uint8_t c)
{
	if (s->mcr & MCR_LOOP) {
		if (s->rx_count < SERIAL_RX_FIFO) {
			s->rx[(s->rx_head + s->rx_count) % SERIAL_RX_FIFO] = c;
			s->rx_count++;
		}
		return;
	}
	if (s->out.started)
		out_put(&s->out, c);
}

uint8_t serial_read(struct serial *s, unsigned off)
{
	uint8_t v = 0xff;

	pthread_mutex_lock(&s->lock);
	switch (off) {
	case UART_RBR:
		if (s->lcr & LCR_DLAB) {
			v = s->dll;
			break;
		}
		v = 0;
		if (s->rx_count) {
			v = s->rx[s->rx_head];
			s->rx_head = (s->rx_head + 1) % SERIAL_RX_FIFO;
			s->rx_count--;
		}
		break;
	case UART_IER:
		v = (s->lcr & LCR_DLAB) ? s->dlm : s->ier;
		break;
	case UART_IIR:
		if ((s->ier & IER_RDI) && s->rx_count) {
			v = IIR_RDI;
		} else if ((s->ier & IER_THRI) && s->thr_irq) {
			v = IIR_THRI;
			s->thr_irq = false; /* reading IIR acknowledges THR empty */
		} else {
			v = IIR_NO_INT;
		}
		if (s->fcr & FCR_ENABLE)
			v |= IIR_FIFO;
		break;
	case UART_LCR:
		v = s->lcr;
		break;
	case UART_MCR:
		v = s->mcr;
		break;
	case UART_LSR:
		v = LSR_THRE | LSR_TEMT | (s->rx_count ? LSR_DR : 0);
		break;
	case UART_MSR:
		/* In loopback the modem inputs mirror MCR; Linux's autoconfig checks that. */
		if (s->mcr & MCR_LOOP)
			v = (uint8_t)(((s->mcr & 0x0c) << 4) | ((s->mcr & 0x01) << 5) |
				      ((s->mcr & 0x02) << 3));
		else
			v = MSR_DCD | MSR_DSR | MSR_CTS;
		break;
	case UART_SCR:
		v = s->scr;
		break;
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return v;
}

void serial_write(struct serial *s, unsigned off, uint8_t val)
{
	pthread_mutex_lock(&s->lock);
	switch (off) {
	case UART_RBR:
		if (s->lcr & LCR_DLAB) {
			s->dll = val;
			break;
		}
		serial_tx(s, val);
		/* The byte left at once: THR is empty again, which is a fresh interrupt edge. */
		s->thr_irq = false;
		serial_update_irq(s);
		s->thr_irq = true;
		break;
	case UART_IER:
		if (s->lcr & LCR_DLAB) {
			s->dlm = val;
			break;
		}
		/* Enabling THRI while THR is empty raises it immediately, as on a real 16550. */
		if ((val & IER_THRI) && !(s->ier & IER_THRI))
			s->thr_irq = true;
		s->ier = val & 0x0f;
		break;
	case UART_IIR:
		s->fcr = val;
		if (val & FCR_CLEAR_RX)
			s->rx_count = 0;
		break;
	case UART_LCR:
		s->lcr = val;
		break;
	case UART_MCR:
		s->mcr = val & 0x1f;
		break;
	case UART_SCR:
		s->scr = val;
		break;
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

unsigned serial_rx_room(struct serial *s)
{
	unsigned room;

	pthread_mutex_lock(&s->lock);
	room = SERIAL_RX_FIFO - s->rx_count;
	pthread_mutex_unlock(&s->lock);
	return room;
}

unsigned serial_receive(struct serial *s, const uint8_t *buf, unsigned len)
{
	unsigned i;

	pthread_mutex_lock(&s->lock);
	for (i = 0; i < len && s->rx_count < SERIAL_RX_FIFO; i++) {
		s->rx[(s->rx_head + s->rx_count) % SERIAL_RX_FIFO] = buf[i];
		s->rx_count++;
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return i;
}

static struct termios term_saved;
static volatile int term_is_raw;

int serial_term_raw(void)
{
	struct termios t;

	if (!isatty(STDIN_FILENO))
		return 0;
	if (tcgetattr(STDIN_FILENO, &term_saved))
		return -errno;
	t = term_saved;
	cfmakeraw(&t);
	/* Keep ^C as SIGINT: an operator expects it to stop the VM (cleanly, see main.c). */
	t.c_lflag |= ISIG;
	if (tcsetattr(STDIN_FILENO, TCSANOW, &t))
		return -errno;
	term_is_raw = 1;
	return 0;
}

void serial_term_restore(void)
{
	if (term_is_raw) {
		tcsetattr(STDIN_FILENO, TCSANOW, &term_saved);
		term_is_raw = 0;
	}
}

/* Write end of the guard's pipe; only lvmm holds it (close-on-exec). */
static int term_guard_fd = -1;

/* The guard process: holds the terminal's modes as they were when lvmm started and puts them
 * back when the pipe reaches end-of-file without the all-clear byte, i.e. lvmm died without
 * running its own restore (SIGKILL, seccomp's kill-process, the OOM killer). */
static void __attribute__((noreturn)) term_guard_main(int rfd, const struct termios *saved)
{
	static const int quiet[] = {SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGPIPE};
	ssize_t n;
	unsigned i;
	char c;

	/* In lvmm's process group, so ^C reaches it too: it must outlive lvmm's clean exit. */
	for (i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++)
		signal(quiet[i], SIG_IGN);
	prctl(PR_SET_NAME, "lvmm-ttyguard");
	/* Nothing of lvmm's (sockets, locks, pipes a caller waits on) may outlive it here. */
	if (rfd > 3)
		close_range(3, (unsigned)rfd - 1, 0);
	close_range((unsigned)rfd + 1, ~0U, 0);
	close(STDOUT_FILENO);
	close(STDERR_FILENO);
	do
		n = read(rfd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		tcsetattr(STDIN_FILENO, TCSANOW, saved);
	_exit(0);
}

static void serial_term_guard_release(void)
{
	if (term_guard_fd >= 0) {
		/* The all-clear, once lvmm has put the terminal back itself. */
		serial_term_restore();
		if (write(term_guard_fd, "", 1) != 1)
			return; /* the guard is gone; nothing to tell */
		close(term_guard_fd);
		term_guard_fd = -1;
	}
}

int serial_term_guard(void)
{
	struct termios saved;
	int p[2], e;
	pid_t pid;

	if (term_guard_fd >= 0 || !isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved))
		return 0;
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		e = -errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
	if (!pid) {
		close(p[1]);
		term_guard_main(p[0], &saved);
	}
	close(p[0]);
	term_guard_fd = p[1];
	atexit(serial_term_guard_release);
	return 0;
}

/* ---- snapshots ---- */

void serial_save(struct serial *s, struct serial_state *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&s->lock);
	st->ier = s->ier;
	st->lcr = s->lcr;
	st->mcr = s->mcr;
	st->scr = s->scr;
	st->dll = s->dll;
	st->dlm = s->dlm;
	st->fcr = s->fcr;
	st->thr_irq = s->thr_irq;
	st->rx_count = s->rx_count;
	for (unsigned i = 0; i < s->rx_count; i++)
		st->rx[i] = s->rx[(s->rx_head + i) % SERIAL_RX_FIFO];
	pthread_mutex_unlock(&s->lock);
}

int serial_restore(struct serial *s, const struct serial_state *st)
{
	if (st->rx_count > SERIAL_RX_FIFO || st->thr_irq > 1)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	s->ier = st->ier & 0x0f;
	s->lcr = st->lcr;
	s->mcr = st->mcr & 0x1f;
	s->scr = st->scr;
	s->dll = st->dll;
	s->dlm = st->dlm;
	s->fcr = st->fcr;
	s->thr_irq = st->thr_irq;
	s->rx_head = 0;
	s->rx_count = st->rx_count;
	memcpy(s->rx, st->rx, sizeof(s->rx));
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return 0;
}
