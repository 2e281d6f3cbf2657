/* afile — a file that appears complete or not at all: writes go to
 * "PATH.tmp.PID" and afile_commit() flushes, fsyncs and renames it over PATH,
 * so a reader (or a crash) never sees half a summary.json. */
#ifndef DDP_AFILE_H
#define DDP_AFILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct afile afile_t;

/* Opens the temporary file. NULL with a reason in why on failure. */
afile_t *afile_new(const char *path, char *why, size_t whylen);
/* The stream to write to (owned by the afile). */
FILE *afile_stream(afile_t *self);
/* The temporary path, for writers that want a file name (cairo). */
const char *afile_tmp_path(const afile_t *self);
/* Flush, fsync, close, rename over the final path; destroys *self_p either
 * way. 0, or -1 with a reason (any write error on the stream is caught here,
 * and the temporary file removed). */
int afile_commit(afile_t **self_p, char *why, size_t whylen);
/* Abandon: close and remove the temporary file. NULL-safe. */
void afile_destroy(afile_t **self_p);

/* Whole file in one call. */
int afile_write_all(const char *path, const void *data, size_t len, char *why, size_t whylen);

/* Rename src over dst after fsyncing src (for files written by a library
 * under afile_tmp_path-style names). 0 or -1 with a reason. */
int afile_publish(const char *src, const char *dst, char *why, size_t whylen);

/* mkdir -p. 0 or -1 with a reason. */
int afile_mkdirs(const char *dir, char *why, size_t whylen);

#endif
