/* What the two files of the VFIO library share. */
#ifndef LVMM_VFIO_INTERNAL_H
#define LVMM_VFIO_INTERNAL_H

/* err (errlen bytes, may be NULL) gets the message; rc comes back, so a failure is one return. */
__attribute__((format(printf, 4, 5))) int vfio_err(int rc, char *err, unsigned errlen,
						   const char *fmt, ...);

#endif
