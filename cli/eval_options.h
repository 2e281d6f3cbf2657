/* eval_options — the flags of `ddpipe eval`: one declared table (rows
 * shared with `ddpipe train` come from cli/job_options.h), parsing, the
 * checks and the defaults derived from other flags. */
#ifndef DDP_CLI_EVAL_OPTIONS_H
#define DDP_CLI_EVAL_OPTIONS_H

#include "common/options.h"

typedef struct {
    const char *data, *model, *weights, *out;
    int overwrite;
    /* the model's input (JOB_MODEL_OPTIONS) */
    option_ints_t channels;                 /* gpud's rows */
    option_doubles_t mean, std;
    const char *crop, *normalize;
    long in_channels, num_classes, resize;  /* 0: the model's */
    long batch_size;
    const char *predictions;                /* NULL | "topk" | "probs" | "all" */
    long limit;                             /* -1: every sample */
    int no_dct;
    const char *wire;                       /* "uint8" | "jpeg" (BATCH 'wire') */
    long decode_threads;                    /* gpud's --decode-threads; 0: --threads */
    const char *decode;                     /* gpud's --decode: "cpu" | "gpu" */
    const char *classes;                    /* class map: FILE | "numeric" (common/classmap.h) */
    long outputs;                           /* derived: the model's outputs (0: unknown) */
    /* where and how long (JOB_RUN_OPTIONS) */
    long workers, threads, loader_threads, window, timeout_s, max_time_s, worker_timeout_s;
    const char *device, *precision, *metrics_http, *tap, *tensorboard;
    int quiet, verbose;
    /* where the gpuds run (JOB_LAUNCH_OPTIONS) */
    const char *launcher, *host;
    long port, start_timeout_s;
    const char *fault;                      /* test hook: RANK:N */
    long loaders;                           /* loaderd shards (docs/SCALE.md "Several loaderds") */
} eval_options_t;

/* The most loaderds `ddpipe eval --loaders` starts on one host (loaderd
 * itself allows DDP_MAX_LOADERS shards over hosts). */
#define EVAL_MAX_LOADERS 64

extern const option_table_t eval_options_table;

/* argv[0] = "eval". 0 when o is ready (threads derived from the cores);
 * 1 after --help; -1 after the reason went to stderr. */
int eval_options_parse(eval_options_t *o, int argc, char **argv);

#endif
