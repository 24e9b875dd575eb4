/* softssd's volume manager: the backing's volume table in memory (named LBA windows), who has
 * which volume attached, and every table change written back crash-safe before it is reported.
 *
 * One struct ssd_volumes per open backing; every call takes its mutex, so the daemon's session
 * threads may call in concurrently. The table itself is the codec of lightiov/voltable.h; each
 * change is made on a scratch copy, written to the slot lio_vt_next_slot names, flushed
 * (fdatasync), and only then becomes the table in memory: a failed write changes nothing.
 *
 * Locking of the backing: ssd_volumes_open takes flock(LOCK_EX | LOCK_NB) on backing_fd and
 * refuses (-EBUSY) when another open file description holds it. The daemon holds it for its
 * whole life through its own open, so `lvmm ssd vol --backing` (which opens the file itself) is
 * refused behind a live daemon. The lock belongs to the fd's open file description: it is
 * released when the caller closes backing_fd (ssd_volumes_close leaves the fd to its caller).
 */
#ifndef SOFTSSD_VOLUMES_H
#define SOFTSSD_VOLUMES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lightiov/uapi.h"

/* lba_shift 0 asks ssd_volumes_open to take the table's own (offline tools that do not know
 * the daemon's); a blank backing is then formatted with this one. */
#define SSD_VOLUMES_DEFAULT_LBA_SHIFT 9

struct ssd_volumes;

/*
 * Loads the volume table of the backing open at backing_fd (capacity_bytes long, including the
 * reserved 1 MiB at its start; the caller's fd, read/write). A blank backing (the reserved area
 * all zero) is formatted when format_if_blank, else refused with -ENOENT; one that holds
 * something else, or a table of another SSD name, LBA size, or a larger device, is refused with
 * -EINVAL and never reformatted. A backing that grew since the table was written keeps its
 * volumes and gains the new space. 0 or a negative errno, with err naming what was refused.
 */
int ssd_volumes_open(struct ssd_volumes **out, int backing_fd, const char *ssd_name,
		     uint64_t capacity_bytes, uint32_t lba_shift, bool format_if_blank, char *err,
		     unsigned errlen);
/* The same on a struct ssd_dev: a controller's namespace 1 (softssd --vfio) takes no lock. */
struct ssd_dev;
int ssd_volumes_open_dev(struct ssd_volumes **out, const struct ssd_dev *dev, const char *ssd_name,
			 uint64_t capacity_bytes, uint32_t lba_shift, bool format_if_blank,
			 char *err, unsigned errlen);
void ssd_volumes_close(struct ssd_volumes *v);

/*
 * Attaches a volume for the session owner (a tag the daemon gives per session, never 0):
 *   LIO_ATTACH_ANON      a new anonymous volume of size_bytes ("anon-<owner>-<n>"), freed at its
 *                        detach or, after a daemon crash, by ssd_volumes_reclaim;
 *   LIO_ATTACH_CREATE    the named volume, created with size_bytes when absent (an existing one
 *                        is attached at its own size, reported back in size_bytes);
 *   LIO_ATTACH_READONLY  shared with other readers and at most one writer;
 *   (none of these)      the one writer: refused while another writer holds it;
 *   LIO_ATTACH_EXCL_ALL  alone: refused while anyone holds it, and keeps everyone else out.
 * Fills name, size_bytes, vol_id (the same for every holder of a volume), lba_start, lba_count.
 * -EBUSY when in use, -ENOENT when absent, -ENOSPC, -EINVAL (name, size, flags), -EMFILE.
 */
int ssd_volumes_attach(struct ssd_volumes *v, struct lio_vol_attach *a, uint64_t owner, char *err,
		       unsigned errlen);
/* Drops owner's hold on vol_id (one hold per call); the last detach of an anonymous volume
 * frees it. 0, or -ENOENT when owner does not hold vol_id, or the error of the table write. */
int ssd_volumes_detach(struct ssd_volumes *v, uint32_t vol_id, uint64_t owner);

/* A hand-over (`lvmm ssd upgrade`): the name of the volume owner holds as vol_id (-ENOENT), and
 * the same hold taken again by the successor: a->name, a->flags (as attached), a->vol_id and
 * a->lba_start/lba_count as the predecessor had them, each checked against this table and the
 * holds already adopted (-ENOENT, -EINVAL, -EBUSY with err naming the volume). */
int ssd_volumes_hold_name(struct ssd_volumes *v, uint32_t vol_id, uint64_t owner,
			  char name[LIO_NAME_MAX]);
int ssd_volumes_adopt(struct ssd_volumes *v, const struct lio_vol_attach *a, uint64_t owner,
		      char *err, unsigned errlen);

/*
 * Who asks, for the calls that take it (the _by variants): a session of the daemon, by the uid its
 * peer credentials (SO_PEERCRED) gave at connect. NULL means the administrator: the offline CLI
 * (it holds the backing itself) and the plain variants.
 *   admin    root or the daemon's own uid: every volume, as the plain variants;
 *   else     creates volumes it then owns (the table records its uid, voltable.h
 *            LIO_VT_OWNER_UID); attaches, deletes and resizes only the named volumes it owns
 *            (-EACCES otherwise); lists only those and the anonymous volumes of its own session.
 * A named volume of a table written before owners were recorded (owner 0) belongs to root.
 */
struct ssd_vol_who {
	uid_t uid;
	bool admin;
	uint64_t session; /* the session's owner tag: its anonymous volumes are listed to it */
};

int ssd_volumes_attach_by(struct ssd_volumes *v, struct lio_vol_attach *a, uint64_t owner,
			  const struct ssd_vol_who *who, char *err, unsigned errlen);
int ssd_volumes_create_by(struct ssd_volumes *v, const struct lio_vol *req,
			  const struct ssd_vol_who *who, char *err, unsigned errlen);
int ssd_volumes_delete_by(struct ssd_volumes *v, const struct lio_vol *req,
			  const struct ssd_vol_who *who, char *err, unsigned errlen);
int ssd_volumes_resize_by(struct ssd_volumes *v, const struct lio_vol *req,
			  const struct ssd_vol_who *who, char *err, unsigned errlen);
/* Indices (first, count, total) count the volumes who may see, in table order. */
int ssd_volumes_list_by(struct ssd_volumes *v, struct lio_vol_list *l,
			const struct ssd_vol_who *who);

/* Named volume operations of the CLI and API. The LBAs a new or grown volume gets are zeroed
 * first: no volume ever shows data of one deleted before it. Delete and resize are refused with
 * -EBUSY while the volume is attached; resize grows only (-EINVAL to shrink; the same size is a
 * no-op), in place when the LBAs after it are free, else by copying the data to a free extent and
 * switching the table entry in one table write (a crash before it leaves the old copy in use). */
int ssd_volumes_create(struct ssd_volumes *v, const struct lio_vol *req, char *err,
		       unsigned errlen);
int ssd_volumes_delete(struct ssd_volumes *v, const struct lio_vol *req, char *err,
		       unsigned errlen);
int ssd_volumes_resize(struct ssd_volumes *v, const struct lio_vol *req, char *err,
		       unsigned errlen);

/* Up to LIO_VOL_LIST_MAX volumes from index l->first (in table order), with their users now. */
int ssd_volumes_list(struct ssd_volumes *v, struct lio_vol_list *l);

/* At daemon start, before any session: frees every anonymous volume (each belonged to a session
 * of a daemon that is gone, since the backing lock admits one daemon at a time). Returns how
 * many were freed, or a negative errno when the table write failed. */
int ssd_volumes_reclaim(struct ssd_volumes *v);

/* Fills capacity_lbas (the data area), free_lbas (largest free extent), nr_volumes, lba_shift. */
void ssd_volumes_identify(struct ssd_volumes *v, struct lio_identify *id);

/* The LBA window of an attached volume: 0, or -ENOENT when no session holds vol_id. */
int ssd_volumes_window(struct ssd_volumes *v, uint32_t vol_id, uint64_t *lba_start,
		       uint64_t *lba_count);

/* The LBA shift the table uses (after an open with lba_shift 0, the table's). */
uint32_t ssd_volumes_lba_shift(struct ssd_volumes *v);

/* A volume name as a request carries it (in: up to LIO_NAME_MAX bytes, maybe unterminated),
 * checked and NUL-terminated into out (LIO_NAME_MAX bytes): 0, or -EINVAL with err naming ssd
 * and the name. Every path (daemon, CLI, offline) refuses a name with this one message. */
int ssd_vol_name_check(const char *ssd, const char *in, char *out, char *err, unsigned errlen);

#endif
