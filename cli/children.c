/* children — the job's part of every daemon's options. */
#include "cli/children.h"

#include "cli/argv.h"

#include <string.h>

/* The daemons' flags that ddpipe sets from a flag of another name (the
 * fields children_* and the commands fill): a daemon's error that says
 * "use --backend cpu" reaches the console as "use --device cpu". */
static const flag_alias_t s_gpud_flags[] = {{"--backend", "--device"}, {NULL, NULL}};
static const flag_alias_t s_loader_flags[] = {
    {"--threads", "--loader-threads"}, {"--channels", "--in-channels"}, {"--shard", "--loaders"},
    {NULL, NULL}};
static const flag_alias_t s_reducer_flags[] = {
    {"--stall-timeout", "--timeout"}, {"--resume-dir", "--out"}, {NULL, NULL}};

static const flag_alias_t *cli_flags_of(const char *prog)
{
    if (strcmp(prog, "gpud") == 0)
        return s_gpud_flags;
    if (strcmp(prog, "loaderd") == 0)
        return s_loader_flags;
    if (strcmp(prog, "reducerd") == 0)
        return s_reducer_flags;
    return NULL;
}

int children_reducer(job_t *j, reducer_options_t *r, long workers, long worker_timeout_s,
                     long stall_timeout_s, int verbose)
{
    const job_endpoints_t *e = job_endpoints(j);
    if (options_defaults(&reducer_options_table, r) < 0)
        return -1;
    r->bind = e->reducer;
    r->pub = e->pub;
    r->workers = workers;
    r->worker_timeout_s = worker_timeout_s;
    r->stall_timeout_s = stall_timeout_s;
    /* Writing the run directory (a 1000-class confusion chart on a loaded
     * machine: over a minute) is bounded like any other progress: by the
     * job's --timeout, not by reducerd's 60 s default. */
    if (stall_timeout_s > r->done_timeout_s)
        r->done_timeout_s = stall_timeout_s < 86400 ? stall_timeout_s : 86400;
    r->verbose = verbose;
    return 0;
}

int children_reporter(job_t *j, reporter_options_t *r, const char *out,
                      const char *metrics_http)
{
    const job_endpoints_t *e = job_endpoints(j);
    if (options_defaults(&reporter_options_table, r) < 0)
        return -1;
    r->sub = e->pub;
    r->reducer = e->reducer;
    r->out = out;
    r->tap = e->tap;
    r->metrics_http = metrics_http;
    return 0;
}

int children_loader(job_t *j, loader_options_t *l, const char *data, long threads,
                    long worker_timeout_s, long prefetch, int verbose)
{
    const job_endpoints_t *e = job_endpoints(j);
    if (options_defaults(&loader_options_table, l) < 0)
        return -1;
    l->data = data;
    l->bind = e->loader;
    l->reducer = e->reducer;
    l->threads = threads;
    l->worker_timeout_s = worker_timeout_s;
    l->prefetch = prefetch;
    l->verbose = verbose;
    return 0;
}

int children_gpud(job_t *j, gpud_options_t *g, const char *backend, long threads, long rank,
                  long window, int verbose)
{
    const job_endpoints_t *e = job_endpoints(j);
    if (options_defaults(&gpud_options_table, g) < 0)
        return -1;
    g->loader = e->loader;
    g->reducer = e->reducer;
    g->backend = backend;
    g->threads = threads;
    g->rank = rank;
    g->window = window;
    g->verbose = verbose;
    return 0;
}

int children_spawn(job_t *j, const char *name, const char *prog, const option_table_t *table,
                   const void *opts)
{
    argv_t a;
    argv_init(&a, prog);
    if (argv_add_options(&a, table, opts) < 0) {
        argv_free(&a);
        return -1;
    }
    return job_spawn_as(j, name, prog, &a, cli_flags_of(prog));
}
