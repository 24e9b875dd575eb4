/* Linux guest boots for the tests in tests/linux: runs lvmm with the console in a file and its
 * output in a log, times console markers, stops a hung guest, and prints the tail on failure. */
#ifndef LVMM_LINUXBOOT_H
#define LVMM_LINUXBOOT_H

#include <stdbool.h>
#include <stddef.h>

#define LINUXBOOT_MARKS_MAX 8
/* The first line of each boot on the test kernel's console: its 8250 console does not replay what
 * was logged before it registered ("Linux version" included; tools/guest/patches/0003), so a
 * test that counts boots, or checks that a restored guest did not boot again, looks for this. */
#define LINUXBOOT_BANNER "console [ttyS0] enabled"

struct linuxboot {
	int status;    /* waitpid status of lvmm */
	bool killed;   /* stopped by the harness after its limit */
	char *console; /* serial output */
	char *log;     /* lvmm's own stdout and stderr */
	double t_exit; /* host seconds from exec to lvmm's exit */
	/* host seconds from exec to the first sighting of marks[i], < 0 when never seen */
	double t_mark[LINUXBOOT_MARKS_MAX];
};

/* $BUILD/guest/<name> into buf; fails the test (run make guest) when it is not readable. */
const char *linuxboot_guest_file(char *buf, size_t len, const char *name);

/*
 * Runs "$LVMM run <args> --serial file=<temp>" (args NULL-terminated, at most 24; the file is
 * given to --jail-uid UID when args hold it), polling the
 * console to time marks (NULL-terminated, at most LINUXBOOT_MARKS_MAX, may be NULL). Kills lvmm
 * after limit_s seconds, or after stall_s seconds of console silence when stall_s is not 0:
 * safety nets against a hung guest, not speed assertions.
 */
void linuxboot_run(struct linuxboot *b, char *const args[], const char *const marks[],
		   unsigned int limit_s, unsigned int stall_s);
/* The same, calling hook(console so far, arg) at every poll of the console while lvmm runs:
 * a test's host side acts on the guest's markers there (or starts a thread that does). */
void linuxboot_run_hook(struct linuxboot *b, char *const args[], const char *const marks[],
			unsigned int limit_s, unsigned int stall_s,
			void (*hook)(const char *console, void *arg), void *arg);
/* Kernel timestamp ("[  12.345678] ") of the first console line containing what, or -1. */
double linuxboot_printk_time(const char *console, const char *what);
/* lvmm's output and the last tail bytes of the console on stderr: what tells why a boot failed. */
void linuxboot_report(const struct linuxboot *b, size_t tail);
void linuxboot_free(struct linuxboot *b);

#endif
