/* Files a client names (serial file, kernel, initramfs, disk images): opened without following
 * symlinks, never blocking, only of the kind meant, optionally confined beneath one directory. */
#ifndef LVMM_FSUTIL_H
#define LVMM_FSUTIL_H

#include <stdbool.h>
#include <sys/types.h>

enum fsutil_kind {
	FSUTIL_REGULAR,		 /* kernel, initramfs, serial file */
	FSUTIL_REGULAR_OR_BLOCK, /* disk images: a block device is a disk too */
	/* virtio-rng's source: the kernel's random, urandom or hwrng character device only.
	 * Any other file would hand the guest host data (a regular file, /dev/mem) as entropy. */
	FSUTIL_ENTROPY,
	FSUTIL_SOCKET, /* a Unix socket lvmm listens at (vsock): a stale one is replaced */
};

/* Holds root (an absolute directory) open for the process's life: every later fsutil_open and
 * fsutil_check naming the same root string walks from this fd, so the path swapped for a
 * symlink or another directory changes nothing. The fd (O_PATH, O_CLOEXEC; a jail keeps it
 * open), or a negative errno with err set. */
int fsutil_hold_root(const char *root, char *err, unsigned errlen);

/* For files root opens on its own behalf (the jail): the directory holding the absolute path's
 * last component, walked from / with no component a symlink, "." or ".."; *last points at
 * that component in path. A directory fd (O_CLOEXEC) or a negative errno with err set. */
int fsutil_open_parent(const char *what, const char *path, const char **last, char *err,
		       unsigned errlen);

/* A directory a client names (a snapshot's), opened O_RDONLY | O_DIRECTORY for *at calls: with a
 * root, walked from the held root as fsutil_open walks, no component a symlink; without one,
 * opened as named. The fd or a negative errno with err set. */
int fsutil_open_dir(const char *root, const char *what, const char *path, char *err,
		    unsigned errlen);

/* Opens path for a client. root (NULL or "" for none) is an absolute directory every path must
 * lie beneath: path is absolute and under it, no component below it may be "." or ".." or a
 * symlink. Without root only the last component must not be a symlink. A regular file with
 * more than one link is never opened for writing. O_TRUNC in flags truncates (after the
 * checks, not by open). Returns the
 * fd (O_CLOEXEC) or a negative errno with err naming what and path. */
int fsutil_open(const char *root, const char *what, const char *path, int flags, mode_t mode,
		enum fsutil_kind kind, char *err, unsigned errlen);

/* The same checks without keeping the file open: it must exist, or (may_create) its directory
 * must. 0 or a negative errno with err set. */
int fsutil_check(const char *root, const char *what, const char *path, bool may_create,
		 enum fsutil_kind kind, char *err, unsigned errlen);

/* A disk image for one VM: an open-file-description lock on the whole file, shared for a
 * read-only user, exclusive for a writer, so that a second lvmm (or QEMU, which takes the same
 * kind of lock) writing the image is refused, and readers are refused while one writes. Held
 * until fd is closed. 0, or -EBUSY (held elsewhere) / another negative errno with err set. */
int fsutil_lock_image(int fd, bool write, const char *what, const char *path, char *err,
		      unsigned errlen);

#endif
