/* The counters of the backend ABI, listed once. Each list is an X-macro: LIST(X) expands
 * X(name, what) for every counter, in the order its fields have in the ABI's structs
 * (include/lightiov/uapi.h generates them from here) and in every backend's own (lightiov.ko's
 * struct lio_ctr, softssd's struct ssd_counters). Sums, copies and name tables are generated
 * from the same lists, so a counter added here reaches all of them. */
#ifndef LIGHTIOV_COUNTERS_H
#define LIGHTIOV_COUNTERS_H

#ifdef __KERNEL__
#include <linux/compiler.h>
#endif

/* What struct lio_session_info reports of a session. */
#define LIO_COUNTERS_SESSION(X)                                                                    \
	X(cmds, "commands completed")                                                              \
	X(read_bytes, "bytes read")                                                                \
	X(write_bytes, "bytes written")                                                            \
	X(errors, "completions with a non-zero status")                                            \
	X(rejected, "isolated mode: commands the checker refused")

/* What struct lio_qp_stats and struct lio_ssd_stats report: those, and the worker's. */
#define LIO_COUNTERS(X)                                                                            \
	LIO_COUNTERS_SESSION(X)                                                                    \
	X(polls, "doorbell polls that found work")                                                 \
	X(sleeps, "times the serving worker went idle on this queue")                              \
	X(irqs, "irq_fd signals")

/* What a backend keeps per queue pair: those, and the syncs LIO_OP_SESSION_SET reports. */
#define LIO_COUNTERS_KEPT(X)                                                                       \
	LIO_COUNTERS(X)                                                                            \
	X(syncs, "writes made durable for LIO_SESSION_WRITE_THROUGH")

/* X for a struct's fields: one uint64_t per counter. */
#define LIO_COUNTER_FIELD(name, what) uint64_t name;

/* X for statements between two structs with the fields of a list, named by the pointers lio_to
 * and lio_from the caller declares: copy or add each counter. The _ONCE forms read each of
 * *lio_from once, untorn (a worker updates them meanwhile). */
#ifdef __KERNEL__
#define LIO_COUNTER_LOAD(x) READ_ONCE(x)
#else
#define LIO_COUNTER_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#endif
#define LIO_COUNTER_COPY(name, what)	  lio_to->name = lio_from->name;
#define LIO_COUNTER_ADD(name, what)	  lio_to->name += lio_from->name;
#define LIO_COUNTER_COPY_ONCE(name, what) lio_to->name = LIO_COUNTER_LOAD(lio_from->name);
#define LIO_COUNTER_ADD_ONCE(name, what)  lio_to->name += LIO_COUNTER_LOAD(lio_from->name);

/* X for a name table: { "name", offsetof(type, name) } per counter, type named LIO_COUNTER_T
 * by the caller. */
#define LIO_COUNTER_NAME(name, what) {#name, __builtin_offsetof(LIO_COUNTER_T, name)},

#endif
