/* ipcdir — the private folder of a job's ipc:// sockets.
 *
 * Always a fresh mkdtemp folder (mode 0700, owned by the user), never a
 * predictable name: OUT/.ipc-XXXXXX when the socket paths fit there, else
 * $XDG_RUNTIME_DIR/ddpipe-XXXXXX, else $TMPDIR/ddpipe-XXXXXX, else
 * /tmp/ddpipe-XXXXXX. A socket path must fit IPCDIR_PATH_MAX (the limit
 * common/zsockopt.c enforces, under sun_path's 107 bytes).
 *
 * Removal touches only what the job made: the socket files of the names it
 * handed out, unlinked relative to a descriptor of the folder it created
 * (no path is resolved again, no symlink followed), then that folder, if
 * empty, relative to a descriptor of its parent.
 *
 *   ipcdir_t *d = ipcdir_new("runs/x", err, sizeof err);
 *   ipcdir_endpoint(d, "reducer", ep, sizeof ep);   // "ipc:///.../reducer"
 *   ipcdir_destroy(&d);
 */
#ifndef DDP_CLI_IPCDIR_H
#define DDP_CLI_IPCDIR_H

#include <stddef.h>

#define IPCDIR_PATH_MAX 100 /* longest socket path (zs_prepare_ipc) */
#define IPCDIR_NAME_MAX 15  /* longest socket name ("ring-1023" and room) */

typedef struct ipcdir ipcdir_t;

/* Creates the folder for a job whose run directory is RUN_DIR (existing).
 * NULL with every candidate's reason in ERR. */
ipcdir_t *ipcdir_new(const char *run_dir, char *err, size_t errlen);
/* Removes the sockets it handed out and the folder; warns when the folder
 * holds anything else (it is then left in place). */
void ipcdir_destroy(ipcdir_t **pd);

const char *ipcdir_path(const ipcdir_t *d);
/* "ipc://DIR/NAME" into BUF and NAME remembered for removal. 0, or -1 when
 * NAME is empty, longer than IPCDIR_NAME_MAX or has a '/' (BUF is then ""). */
int ipcdir_endpoint(ipcdir_t *d, const char *name, char *buf, size_t len);

#endif
