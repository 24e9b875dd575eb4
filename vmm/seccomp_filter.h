/* System-call filters of lvmm (libseccomp): one for the process, stacked ones per thread kind
 * (vCPU, device I/O) that narrow it further; a forbidden call kills the whole process. */
#ifndef LVMM_SECCOMP_FILTER_H
#define LVMM_SECCOMP_FILTER_H

#include <stdbool.h>

/* Which filter a thread runs under. MAIN is the process-wide one: the main thread serves the
 * REST API and creates VMs for it, so the API kind is MAIN. The others are stacked on MAIN. */
enum seccomp_kind {
	SECCOMP_MAIN,
	SECCOMP_VCPU, /* KVM_RUN and the device models it calls into */
	SECCOMP_IO,   /* vNVMe file I/O, console output, BAR remapping, console input */
	SECCOMP_SOCK, /* IO's calls plus accepting and connecting Unix sockets (vsock) */
	SECCOMP_NKINDS,
};

enum seccomp_mode {
	SECCOMP_MODE_KILL, /* default: a call outside the filter ends the process */
	SECCOMP_MODE_LOG,  /* the call is allowed and logged by the kernel (audit, dmesg) */
	SECCOMP_MODE_OFF,
};

/* --seccomp=kill|log|off; LVMM_SECCOMP=kill|log|off in the environment does the same when no
 * mode was set. A string of neither: -EINVAL. */
int seccomp_mode_parse(const char *s, enum seccomp_mode *mode);
void seccomp_mode_set(enum seccomp_mode mode);
enum seccomp_mode seccomp_mode_get(void);
const char *seccomp_kind_name(enum seccomp_kind kind);

/* Loads the MAIN filter on all threads of the process (threads created later inherit it).
 * 0 or a negative errno with a message in err. A no-op when the mode is off, and in
 * AddressSanitizer builds (LeakSanitizer stops the world with ptrace at exit). */
int seccomp_install(char *err, unsigned errlen);
/* Stacks the filter of kind on the calling thread only (it keeps the MAIN one too). */
int seccomp_thread_install(enum seccomp_kind kind, char *err, unsigned errlen);
/* The same for SECCOMP_IO, in the shape of dev_host.io_thread (device.h). */
int seccomp_io_thread_install(char *err, unsigned errlen);
/* The same for SECCOMP_SOCK (dev_host.sock_thread). */
int seccomp_sock_thread_install(char *err, unsigned errlen);
/* True when the mode is off. */
bool seccomp_disabled(void);

#endif
