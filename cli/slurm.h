/* slurm — `ddpipe eval|train --launcher slurm` inside a Slurm allocation:
 * reducerd, loaderd and reporterd run on this node, bound on tcp at its
 * address, and the W gpuds run as one srun step (one task each, on the
 * allocated nodes), each task `ddpipe __slurm-task gpud ...` (its rank and
 * name from SLURM_PROCID and the node, its ring on the node's address),
 * connecting back to this node by host name. docs/SLURM.md.
 *
 *   slurm_t s;
 *   slurm_prepare(&s, "eval", o->host, o->port);   // endpoints, srun's path
 *   job_cfg_t cfg = {..., .reducer_ep = s.reducer, .loader_ep = s.loader, .step = &s.step};
 *   ... start reducerd, reporterd, loaderd as usual ...
 *   slurm_spawn_gpuds(j, &s, workers, &gpud_options);
 */
#ifndef DDP_CLI_SLURM_H
#define DDP_CLI_SLURM_H

#include "cli/job.h"
#include "gpud/options.h"

#include <stddef.h>

/* The job's child that is the srun step (its log: OUT/logs/gpud-srun.log). */
#define SLURM_STEP_CHILD "gpud-srun"

typedef struct slurm {
    char host[256];                  /* the name the gpuds connect to */
    char addr[64];                   /* what it resolves to here: the daemons bind it */
    char reducer[320], loader[320];  /* tcp://ADDR:P for the daemons on this node */
    char gpud_reducer[320], gpud_loader[320];  /* tcp://HOST:P for the gpuds */
    char nodes[1024];                /* SLURM_JOB_NODELIST, for messages */
    char srun[4096];                 /* srun's path */
    job_step_t step;                 /* what job.c asks of the step (SLURM_STEP_CHILD) */
} slurm_t;

/* Resolves host (NULL: this node's host name) to the address the daemons
 * bind, picks two free ports (or port and port + 1), finds srun, fills in
 * s->step (slurm_where, slurm_print_errors). S must not move after. 0, or -1
 * with the reason and the fix on stderr (cmd names the command). */
int slurm_prepare(slurm_t *s, const char *cmd, const char *host, long port);

/* What `--launcher` and its flags asked for (the eval and train tables
 * share them, cli/job_options.h). */
typedef struct {
    const char *cmd;          /* "eval" or "train", for messages */
    const char *launcher, *host;
    long port, workers, start_timeout_s, loaders;
} slurm_request_t;

/* With --launcher slurm: this node's endpoints and s->step into cfg (slurm_prepare),
 * the step's worker count and start timeout; 0, 1 when preparing failed,
 * 2 when the request cannot run under Slurm (said on stderr). Without it:
 * 0, nothing touched. */
int slurm_configure(slurm_t *s, job_cfg_t *cfg, const slurm_request_t *r);

/* Starts `srun --ntasks=W --kill-on-bad-exit=1 --label ddpipe __slurm-task
 * gpud OPTIONS` as the job's child SLURM_STEP_CHILD, OPTIONS emitted from g
 * (its endpoints replaced by the gpuds'; rank, name and, for training, the
 * ring endpoint are each task's own). 0, or -1. */
int slurm_spawn_gpuds(job_t *j, const slurm_t *s, long workers, gpud_options_t *g);

/* Where rank's task was started, from the step's log (each task's first
 * line, written by `ddpipe __slurm-task`): "node NAME" or, when srun started
 * none, "no node: srun started no task R (the allocation's nodes: ...)". */
void slurm_where(const slurm_t *s, const char *step_log, long rank, char *buf, size_t len);

/* srun's own error lines from the step's log to stderr ("srun: error:
 * NODE: task R: Exited with exit code 1"): they name the node. The number
 * printed. */
int slurm_print_errors(const char *step_log);

/* `ddpipe __slurm-task gpud ARGS...`: what each srun task runs. */
int cmd_slurm_task(int argc, char **argv);
#endif
