/* 8250/16550A UART model for COM1: guest output through a bounded ring and a writer thread to a
 * file descriptor, host input from stdin, interrupts on a legacy IRQ line. */
#ifndef LVMM_SERIAL_H
#define LVMM_SERIAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define SERIAL_RX_FIFO	64
#define SERIAL_OUT_RING (64 * 1024)

/* Transmitted bytes wait here for the writer thread: a vCPU never calls write(2), so a slow or
 * blocked console (a full stdout pipe) costs the guest dropped bytes, never a stuck vCPU. */
struct serial_out {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t thread;
	bool started, stop, limit_noted;
	unsigned drain_ms; /* after stop, how long the writer still tries */
	int fd;
	uint64_t limit; /* bytes the writer may put into fd, 0 = no limit */
	uint8_t ring[SERIAL_OUT_RING];
	unsigned head, count;
	uint64_t tx, written, dropped; /* from the guest, into fd, lost (ring full or limit) */
};

struct serial_stats {
	uint64_t tx, written, dropped;
};

struct serial {
	pthread_mutex_t lock;
	uint8_t ier, lcr, mcr, scr, dll, dlm, fcr;
	bool thr_irq;	/* THR-empty interrupt pending (cleared by reading IIR) */
	bool irq_level; /* current level of the output line */
	uint8_t rx[SERIAL_RX_FIFO];
	unsigned rx_head, rx_count;
	int out_fd; /* -1: output discarded */
	/* Called with the lock held whenever the interrupt line changes. */
	void (*set_irq)(void *opaque, bool level);
	void *irq_opaque;
	struct serial_out out; /* last: serial_init() keeps it across UART resets */
};

/* Resets the UART. out_fd < 0 discards output (and clears the whole struct); otherwise output
 * goes to out_fd through the writer thread, started here unless serial_out_start() already did
 * (a reboot re-initialises the UART, not the console). Zero the struct before the first call. */
void serial_init(struct serial *s, int out_fd, void (*set_irq)(void *, bool), void *opaque);
/* Starts the writer on fd with a size limit (0: none) that counts the already bytes the file
 * holds; 0 or a negative errno. */
int serial_out_start(struct serial *s, int fd, uint64_t limit, uint64_t already);
/* Stops the writer: what the ring holds is written if fd takes it within drain_ms. */
void serial_out_stop(struct serial *s, unsigned drain_ms);
void serial_get_stats(struct serial *s, struct serial_stats *st);
/* Register access at offset 0..7 from the base port. */
uint8_t serial_read(struct serial *s, unsigned off);
void serial_write(struct serial *s, unsigned off, uint8_t val);
/* Queues host input; returns how many bytes fit in the receive FIFO. */
unsigned serial_receive(struct serial *s, const uint8_t *buf, unsigned len);
/* Free space in the receive FIFO. */
unsigned serial_rx_room(struct serial *s);

/* Snapshots: the UART's registers and receive FIFO (not the output ring: what the guest sent
 * before the pause is the console's). Restore checks the bytes and sets the IRQ line again. */
struct serial_state {
	uint8_t ier, lcr, mcr, scr, dll, dlm, fcr, thr_irq;
	uint32_t rx_count;
	uint8_t rx[SERIAL_RX_FIFO];
};
void serial_save(struct serial *s, struct serial_state *st);
int serial_restore(struct serial *s, const struct serial_state *st);

/* Host terminal: raw mode on stdin while the guest owns the console, restored on every exit path
 * (also from signal handlers: async-signal-safe). */
int serial_term_raw(void);
void serial_term_restore(void);
/* Before seccomp (it forks): a small process that restores the terminal if lvmm is killed in a
 * way no handler sees (SIGKILL, a seccomp kill). No-op when stdin is not a terminal. */
int serial_term_guard(void);

#endif
