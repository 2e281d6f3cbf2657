/* launcher — `--launcher local|slurm` and the worker count it implies,
 * checked while the flags are parsed (a mistake exits 2 before anything
 * starts). Header-only: train_options.c is also linked alone into a unit
 * test. */
#ifndef DDP_CLI_LAUNCHER_H
#define DDP_CLI_LAUNCHER_H
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline bool dd_launcher_is_slurm(const char *launcher)
{
    return launcher && strcmp(launcher, "slurm") == 0;
}

/* A positive count from the environment variable name; 0 when unset. */
static inline long dd_env_count(const char *name, bool *bad)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 1) {
        *bad = true;
        return 0;
    }
    return n;
}

/* --launcher is local or slurm; slurm only inside an allocation (the job's
 * nodes come from Slurm's environment). *workers 0 (--workers not given):
 * 1 here; with slurm the allocation's task count (SLURM_NTASKS, else one per
 * node). 0, or -1 with the reason on stderr. */
static inline int dd_launcher_check(const char *cmd, const char *launcher, long *workers)
{
    bool slurm = dd_launcher_is_slurm(launcher);
    if (!slurm && strcmp(launcher, "local") != 0) {
        fprintf(stderr, "%s: --launcher %s is not known; choose local or slurm\n", cmd, launcher);
        return -1;
    }
    if (slurm && !getenv("SLURM_JOB_ID")) {
        fprintf(stderr, "%s: --launcher slurm runs inside a Slurm allocation, and SLURM_JOB_ID is "
                "not set: submit the job with sbatch (compose/slurm/) or run it under salloc; "
                "without Slurm, leave out --launcher\n", cmd);
        return -1;
    }
    if (*workers)
        return 0;
    *workers = 1;
    if (!slurm)
        return 0;
    bool bad = false;
    long n = dd_env_count("SLURM_NTASKS", &bad);
    if (!n && !bad)
        n = dd_env_count("SLURM_JOB_NUM_NODES", &bad);
    if (bad || n > 1024) {
        fprintf(stderr, "%s: SLURM_NTASKS=%s / SLURM_JOB_NUM_NODES=%s is not a task count of "
                "1 to 1024: give --workers N\n", cmd, getenv("SLURM_NTASKS") ? getenv("SLURM_NTASKS") : "",
                getenv("SLURM_JOB_NUM_NODES") ? getenv("SLURM_JOB_NUM_NODES") : "");
        return -1;
    }
    if (n)
        *workers = n;
    return 0;
}
#endif
