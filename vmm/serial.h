/* 8250/16550A UART model for COM1: guest output to a file descriptor, host input from stdin,
 * interrupts on a legacy IRQ line. */
#ifndef LVMM_SERIAL_H
#define LVMM_SERIAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define SERIAL_RX_FIFO 64

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
};

void serial_init(struct serial *s, int out_fd, void (*set_irq)(void *, bool), void *opaque);
/* Register access at offset 0..7 from the base port. */
uint8_t serial_read(struct serial *s, unsigned off);
void serial_write(struct serial *s, unsigned off, uint8_t val);
/* Queues host input; returns how many bytes fit in the receive FIFO. */
unsigned serial_receive(struct serial *s, const uint8_t *buf, unsigned len);
/* Free space in the receive FIFO. */
unsigned serial_rx_room(struct serial *s);

/* Host terminal: raw mode on stdin while the guest owns the console, restored on every exit path
 * (also from signal handlers: async-signal-safe). */
int serial_term_raw(void);
void serial_term_restore(void);

#endif
