/* The VM's console: COM1 on the PIO bus, where its output goes (stdout, a file opened at boot,
 * nowhere), and the thread that feeds host input into its receive FIFO. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "layout.h"
#include "seccomp_filter.h"
#include "vm_internal.h"

static void vm_serial_irq(void *opaque, bool level)
{
	vm_set_irq_line(opaque, LAYOUT_COM1_IRQ, level);
}

static void serial_pio_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct vm *vm = opaque;

	memset(data, 0, len);
	*(uint8_t *)data = serial_read(&vm->serial, (unsigned)off);
}

static void serial_pio_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct vm *vm = opaque;

	serial_write(&vm->serial, (unsigned)off, *(const uint8_t *)data);
}

static const struct bus_ops serial_pio_ops = {.read = serial_pio_read, .write = serial_pio_write};

/* The console file is opened by vm_boot(), not here: vm.create alone touches no file. It is
 * appended to (emptied only when asked), never followed through a symlink, never a FIFO or a
 * device, beneath the API's allowed directory when there is one, and capped in size. */
int vm_open_serial_file(struct vm *vm, char *err, unsigned errlen)
{
	struct stat st;
	int fd, ret;

	fd = fsutil_open(vm->cfg.allowed_dir, "serial file", vm->cfg.serial_file,
			 O_WRONLY | O_CREAT | O_APPEND | (vm->cfg.serial_truncate ? O_TRUNC : 0),
			 0644, FSUTIL_REGULAR, err, errlen);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st))
		st.st_size = 0;
	ret = serial_out_start(&vm->serial, fd, vm->cfg.serial_limit, (uint64_t)st.st_size);
	if (ret) {
		snprintf(err, errlen, "serial file %s: cannot start its writer: %s",
			 vm->cfg.serial_file, strerror(-ret));
		close(fd);
		return ret;
	}
	vm->serial_fd = fd;
	vm->serial_fd_owned = true;
	vm->serial_open = true;
	return 0;
}

int vm_open_serial(struct vm *vm, char *err, unsigned errlen)
{
	if (vm->serial_open)
		goto attach; /* a reboot keeps writing to the same console */
	vm->serial_fd = -1;
	switch (vm->cfg.serial) {
	case SERIAL_STDIO:
		vm->serial_fd = STDOUT_FILENO;
		vm->serial_open = true;
		break;
	case SERIAL_FILE:
		break; /* vm_boot() opens it */
	default:
		vm->serial_open = true;
		break;
	}
attach:
	serial_init(&vm->serial, vm->serial_fd, vm_serial_irq, vm);
	return bus_register(&vm->pio, LAYOUT_COM1_PORT, 8, &serial_pio_ops, vm, "com1");
}

void *vm_input_thread(void *arg)
{
	struct vm *vm = arg;
	bool eof = false;
	char err[160];

	pthread_setname_np(pthread_self(), "lvmm-stdin");
	if (seccomp_thread_install(SECCOMP_IO, err, sizeof(err)))
		fprintf(stderr, "lvmm: console input: %s\n", err);
	for (;;) {
		struct pollfd p[2] = {{.fd = vm->input_wake_fd, .events = POLLIN},
				      {.fd = eof ? -1 : STDIN_FILENO, .events = POLLIN}};
		uint8_t buf[SERIAL_RX_FIFO];
		unsigned room;
		ssize_t n;

		pthread_mutex_lock(&vm->lock);
		if (vm->stop_req) {
			pthread_mutex_unlock(&vm->lock);
			break;
		}
		pthread_mutex_unlock(&vm->lock);
		room = serial_rx_room(&vm->serial);
		if (!room)
			p[1].fd = -1; /* the guest has not drained the FIFO yet: wait */
		if (poll(p, 2, 50) <= 0 || p[0].revents)
			continue;
		if (!(p[1].revents & (POLLIN | POLLHUP)))
			continue;
		n = read(STDIN_FILENO, buf, room);
		if (n <= 0) {
			eof = n == 0 || (errno != EINTR && errno != EAGAIN);
			continue;
		}
		serial_receive(&vm->serial, buf, (unsigned)n);
	}
	return NULL;
}

void vm_console_flush(struct vm *vm)
{
	/* The vCPUs are joined, so nothing adds to the ring; vm_destroy's stop is then a no-op. */
	serial_out_stop(&vm->serial, 1000);
}

void vm_console_stats(struct vm *vm, struct serial_stats *st)
{
	serial_get_stats(&vm->serial, st);
}
