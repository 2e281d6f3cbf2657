/* train_options — the flags of `ddpipe train`: parsing, defaults, checks, the
 * resume state read from a checkpoint's metadata and the seed course's CSV
 * name. Kept apart from the launcher so each can be read on its own. */
#ifndef DDP_CLI_TRAIN_OPTS_H
#define DDP_CLI_TRAIN_OPTS_H
#include <stdbool.h>
#include <stddef.h>

#include "common/options.h"

/* Where a run continues: from DIR/checkpoint.safetensors's metadata. */
typedef struct {
    char file[1024];            /* the checkpoint gpud loads */
    long epoch;                 /* ckpt.epoch: the epoch the run continues with */
    long step;                  /* ckpt.step: optimizer steps done */
    long streak;                /* ckpt.streak */
    long global_batch;          /* ckpt.global_batch */
    long steps_per_epoch;       /* ckpt.steps_per_epoch */
    long start_step;            /* step - epoch * steps_per_epoch: steps of `epoch` already done */
    long seed;                  /* ckpt.seed, -1 absent */
    long chunk;                 /* ckpt.chunk (--chunk, 0 off), -1 absent (an older build) */
} train_resume_t;

typedef struct {
    const char *data, *val, *model, *weights, *out, *device, *resume_dir;
    const char *precision;      /* --precision fp32|bf16|fp16 (gpud's row) */
    option_ints_t channels;     /* gpud's rows (GPUD_INPUT_OPTIONS, GPUD_TRAINING_OPTIONS) */
    option_doubles_t mean, std, betas;
    const char *normalize, *crop, *fault, *fault_hold_epoch, *metrics_http, *tap, *tensorboard;
    const char *launcher, *host;  /* where the gpuds run (JOB_LAUNCH_OPTIONS) */
    long port, start_timeout_s;
    const char *cache;          /* --cache memory|DIR (loaderd) */
    const char *classes;        /* --classes FILE|numeric (common/classmap.h) */
    long outputs;               /* derived with --classes: the model's outputs */
    long cache_size_mb;
    const char *optimizer, *lr_schedule, *augment, *freeze, *freeze_bn;
    const char *wire;          /* uint8|jpeg: loaderd's --wire */
    long decode_threads;       /* gpud's --decode-threads; 0: --threads */
    const char *decode;        /* gpud's --decode: "cpu" | "gpu" */
    long workers, batch_size, global_batch, epochs, threads, loader_threads, resize;
    long in_channels, num_classes, limit, window, seed, patience, checkpoint_every, step_size;
    long timeout_s, max_time_s, worker_timeout_s, ring_timeout_s, t_max, warmup_epochs;
    long val_limit;             /* -1: --limit's; 0: the whole --val set */
    long min_workers;           /* elastic: fewer ranks left fail the job (docs/ELASTIC.md) */
    long max_workers;           /* elastic: joiners enter while fewer ranks train (0: workers) */
    long rejoin_timeout_s;      /* elastic: a pause below min_workers lasts at most this */
    long pause_at_step;         /* test hook: pause before this step for a joiner; -1 off */
    long fault_in_checkpoint;   /* test hook: this rank dies inside its first checkpoint write */
    long chunk;                 /* --chunk: bitwise training (gpud's row); 0 off */
    long loaders;               /* loaderd shards (docs/SCALE.md "Several loaderds") */
    double lr, momentum, weight_decay, dampening, eps, gamma, eta_min;
    double warmup_start_factor, label_smoothing, target_accuracy, rotate;
    double loss_scale;          /* --precision fp16 (gpud's rows) */
    long loss_scale_growth;
    int nesterov, sync_bn, grad_averaging, verbose, quiet, overwrite;  /* flags */
    /* given on the command line: from the sentinel defaults, after parsing */
    bool set_batch, set_global, set_lr, set_momentum, set_wd, set_seed, set_dampening;
    bool set_warmup_sf, set_gamma, set_eta_min;
    long val_batch;             /* validation batch per worker */
    bool resuming;
    train_resume_t resume;
} train_options_t;

/* The table train_options_parse reads (also for the man page and completion). */
extern const option_table_t train_options_table;
/* Parse argv (argv[0] = "train"); prints the reason and returns -1 on a bad
 * flag, 1 after --help or --version, 0 when o is ready (defaults applied,
 * resume read). */
int train_options_parse(int argc, char **argv, train_options_t *o);

/* Read DIR/checkpoint.safetensors (or DIR itself when it is a file). 0, or
 * -1 with the reason in err. */
int train_resume_read(const char *dir, train_resume_t *r, char *err, size_t errlen);

/* Python's str(float): 0.1 -> "0.1", 0.0 -> "0.0", 1e-05 -> "1e-05". */
void py_float_str(double x, char *buf, size_t len);

/* The seed course's "{W}ranks-{bs}bs-{lr}lr-{m}m-{w}w.csv": bs per rank,
 * lr, momentum and w (warm-up epochs) as Python's str(float) prints them
 * (reporterd/seed_csv.h: "2ranks-16bs-0.1lr-0.9m-5.0w.csv"). */
void train_seed_csv_name(const train_options_t *o, char *buf, size_t len);
/* The --fault list ("RANK:STEP[,RANK:STEP...]"): *step is rank's STEP
 * (-1 none); -1 when the list is malformed or names a rank >= workers. */
int train_fault_step(const char *spec, long rank, long workers, long *step);

#endif
