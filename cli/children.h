/* children — what every daemon of a job gets from the job itself, filled
 * into the daemon's own options struct (its table's defaults, the job's
 * endpoints, the run directory), and the spawn of a daemon from that
 * struct through its table (options_emit): `ddpipe eval` and `ddpipe
 * train` add only what their mode sets. */
#ifndef DDP_CLI_CHILDREN_H
#define DDP_CLI_CHILDREN_H

#include "cli/job.h"
#include "gpud/options.h"
#include "loaderd/options.h"
#include "reducerd/options.h"
#include "reporterd/options.h"

/* Each fills *opts with its table's defaults and the job's endpoints; 0, or
 * -1 (a bug in a table, said on stderr). */
int children_reducer(job_t *j, reducer_options_t *r, long workers, long worker_timeout_s,
                     long stall_timeout_s, int verbose);
int children_reporter(job_t *j, reporter_options_t *r, const char *out,
                      const char *metrics_http);
int children_loader(job_t *j, loader_options_t *l, const char *data, long threads,
                    long worker_timeout_s, long prefetch, int verbose);
int children_gpud(job_t *j, gpud_options_t *g, const char *backend, long threads, long rank,
                  long window, int verbose);

/* Spawns program prog as the job's child `name`, its argv emitted from
 * opts (the struct of prog's table). 0, or -1. */
int children_spawn(job_t *j, const char *name, const char *prog, const option_table_t *table,
                   const void *opts);

#endif
