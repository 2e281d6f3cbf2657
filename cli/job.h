/* job — what `ddpipe eval` and `ddpipe train` share: the run directory and
 * its private ipc endpoints, the daemons as children (cli/launch.h), the
 * tap subscription, the supervision loop (progress, dead workers, signals,
 * --timeout) and a shutdown that leaves no process behind.
 *
 *   job_cfg_t cfg = {.cmd = "eval", .out = "runs/x"};
 *   job_t *j = job_new(&cfg);                  // logs/, .ipc/, SIGINT/TERM/HUP handlers
 *   argv_t a; argv_init(&a, "reducerd"); argv_add(&a, "--bind", job_endpoints(j)->reducer);
 *   job_spawn(j, "reducerd", "reducerd", &a);  // ... loaderd, reporterd, gpud.R
 *   int rc = job_supervise(j);                 // 0 done, 1 failed, 130 interrupted
 *   job_wait(j, NULL, 15000); job_stop(j, NULL, 3000);
 *   job_destroy(&j);                           // stops leftovers, removes the sockets
 */
#ifndef DDP_CLI_JOB_H
#define DDP_CLI_JOB_H
#include "cli/argv.h"
#include "cli/failures.h"
#include "proto/event.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char reducer[600], pub[600], loader[600], tap[600], dir[512];
} job_endpoints_t;

/* Called for every decoded tap event after the built-in handling. */
typedef void(job_event_fn)(void *arg, const ddp_event_t *ev, bool tty);

/* A launcher that runs every gpud as one child of the job (--launcher
 * slurm's srun step, cli/slurm.h, fills it in): that child's name, and
 * what the job asks it when the step ends or a rank has not joined. The
 * job knows no launcher by name. */
typedef struct {
    const char *child;          /* the job's child that runs the gpuds */
    const void *self;           /* the launcher's state, handed to where */
    /* Where rank's task was started, read from the child's log. */
    void (*where)(const void *self, const char *log, long rank, char *buf, size_t len);
    /* The launcher's own error lines from the child's log to stderr; how many. */
    int (*print_errors)(const char *log);
} job_step_t;

typedef struct {
    const char *cmd;            /* "eval" | "train": names the command in messages */
    const char *out;            /* run directory */
    /* A run directory holding a previous run's outputs (cli/outdir.h) is
     * refused unless overwrite, which removes them first; keep lists nkeep
     * input files (NULL entries skipped) that are never removed; resume
     * (train --resume into the same directory) skips both. */
    bool overwrite, resume;
    const char *const *keep;
    size_t nkeep;
    const char *tap;            /* --tap endpoint for reporterd's tap; NULL: private ipc */
    long timeout_s;             /* fail the job after this long; 0: never */
    bool quiet;                 /* no progress lines */
    /* Training: a dead gpud costs its step while min_workers ranks are left
     * (reducerd re-forms the ring: a membership event; docs/ELASTIC.md),
     * else reducerd fails the job and names the rank; progress lines only
     * on a terminal (the caller prints one line per epoch). */
    bool train;
    long verdict_s;             /* train: how long reducerd may take to re-form or end the job after a gpud died */
    long min_workers;           /* train: the fewest ranks the job goes on with (>= 1) */
    long rejoin_timeout_s;      /* train: below min_workers, how long it waits for joiners */
    job_event_fn *on_event;     /* may be NULL */
    void *arg;
    /* --launcher slurm (cli/slurm.h): reducerd's and loaderd's tcp
     * endpoints on this node (NULL: private ipc); the gpuds are one step
     * (NULL: each its own child), all workers of which must have joined
     * within start_timeout_s of the start (else the job fails, naming the
     * missing ranks' nodes). */
    const char *reducer_ep, *loader_ep;
    const job_step_t *step;
    long workers, start_timeout_s;
} job_cfg_t;

typedef struct job job_t;

/* Clears (or refuses) a previous run's outputs in OUT, creates OUT/logs
 * and the private ipc folder (cli/ipcdir.h), installs the signal handlers
 * and subscribes to the tap. NULL with the reason printed. */
job_t *job_new(const job_cfg_t *cfg);
/* Stops whatever still runs (SIGTERM, then SIGKILL), removes the sockets
 * it handed out and the ipc folder. */
void job_destroy(job_t **pj);

const job_endpoints_t *job_endpoints(const job_t *j);
/* "ipc://DIR/NAME" in the job's private socket folder (e.g. "ring-1"; at
 * most IPCDIR_NAME_MAX characters); removed by job_destroy. 0 or -1. */
int job_ipc(job_t *j, const char *name, char *buf, size_t len);
/* The ROUTER of loaderd I: the job's loader socket, or with --loaders N
 * its own (loader1, loader2, ...). 0 or -1. */
int job_loader_endpoint(job_t *j, long i, char *buf, size_t len);
/* Starts bindir/prog logging to OUT/logs/NAME.log; frees a. 0 or -1. */
int job_spawn(job_t *j, const char *name, const char *prog, argv_t *a);
/* job_spawn, and the ddpipe flags that set prog's flags (a static table,
 * or NULL): the error the child gives when it fails is said with them. */
int job_spawn_as(job_t *j, const char *name, const char *prog, argv_t *a,
                 const flag_alias_t *aliases);

/* Runs until reporterd exits (0 when it finished the run directory, else
 * 1), a daemon other than a gpud fails (1), a training rank exits before
 * training started (1), a signal (130) or --timeout (1). */
int job_supervise(job_t *j);
/* The reason of reducerd's "end" event when its code was not 0, else "". */
const char *job_fail_reason(const job_t *j);
/* Who sent the signal that interrupted the job (0: none). */
int job_signal(const job_t *j);

/* Wait up to ms for the children whose name starts with prefix (NULL: all)
 * to exit by themselves; true when they did. */
bool job_wait(job_t *j, const char *prefix, int ms);
/* SIGTERM the children of prefix (NULL: all), SIGKILL after grace_ms. */
void job_stop(job_t *j, const char *prefix, int grace_ms);

/* "1:05", "1:02:03", or "?" for a negative or absurd value. */
void job_fmt_eta(double s, char *buf, size_t len);
/* mkdir -p; 0 or -1 with the reason printed. */
int job_mkdir_p(const char *dir);
#endif
