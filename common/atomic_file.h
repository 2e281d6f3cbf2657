/* atomic_file — a file that appears complete or not at all. Every file
 * ddpipe writes (run directory, plots, checkpoints, weights) goes through it,
 * so a reader, a crash or a full disk never leaves half a summary.json or a
 * truncated checkpoint under the final name.
 *
 * Writes go to a new temporary file "PATH.tmp.PID.N" in the same directory
 * (created with O_EXCL, mode 0666 less the umask, like fopen); commit
 * flushes and fsyncs it, renames it over PATH and fsyncs the directory so
 * the rename itself survives a power cut. Errors name the path and errno.
 *
 *   char err[256];
 *   atomic_file_t *f = atomic_file_new("out/summary.json", err, sizeof err);
 *   fputs(text, atomic_file_stream(f));
 *   if (atomic_file_commit(&f, err, sizeof err) != 0) ...   // f is NULL either way
 */
#ifndef DDP_ATOMIC_FILE_H
#define DDP_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct atomic_file atomic_file_t;

/* Creates the temporary file. NULL with the reason in err on failure. */
atomic_file_t *atomic_file_new(const char *path, char *err, size_t errlen);
/* The stream to write to (owned by the atomic_file). */
FILE *atomic_file_stream(atomic_file_t *self);
/* The temporary file's name (for messages). */
const char *atomic_file_tmp_path(const atomic_file_t *self);
/* Flush, fsync, close, rename over the final path, fsync the directory;
 * destroys *self_p either way. 0, or -1 with the reason in err (a write
 * error on the stream is caught here and the temporary file removed). */
int atomic_file_commit(atomic_file_t **self_p, char *err, size_t errlen);
/* Abandon: close and remove the temporary file. NULL-safe. */
void atomic_file_destroy(atomic_file_t **self_p);

/* The whole file in one call. 0, or -1 with the reason in err. */
int atomic_file_write(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* Test hook (gpud --fault-in-checkpoint): the next commit SIGKILLs the
 * process once the temporary file is written and synced, before the
 * rename — a death in the middle of a write, for the tests that check
 * nobody ever sees half a file. */
void atomic_file_fault_before_rename(void);

#endif
