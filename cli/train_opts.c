#include "cli/train_opts.h"
#include "cli/daemon_defaults.h"

#include "common/errbuf.h"
#include "common/flags.h"
#include "common/safetensors.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void train_usage(FILE *f)
{
    fprintf(f,
        "usage: ddpipe train --data PATH --model ARCH --out DIR [options]\n"
        "data and model\n"
        "  --data PATH             training set: ImageFolder directory or idx:PREFIX\n"
        "  --val PATH              validation set (eval transform); without it the run\n"
        "                          stops by --epochs only\n"
        "  --model ARCH            wideresnet | resnet18 | densenet121\n"
        "  --weights FILE          initial weights (default: seeded PyTorch-default init)\n"
        "  --channels a,b,c,d      WideResNet widths (default 16,160,320,640)\n"
        "  --in-channels N --num-classes N\n"
        "  --resize N --crop N     transform sizes (default: the model's)\n"
        "  --mean a,b,c --std a,b,c | --normalize none|imagenet\n"
        "  --augment none|flip|crop-flip   train augmentation (default: the dataset's)\n"
        "  --rotate DEG            RandomRotation(+-DEG) on train samples\n"
        "  --limit N               use only the first N training samples\n"
        "schedule\n"
        "  --epochs N              epochs to train at most (default 1)\n"
        "  --workers W             gpud processes (default 1)\n"
        "  --batch-size B          per worker, as in DDP: global batch B*W (default 64)\n"
        "  --global-batch-size G   fix the global batch instead: the same weights for any W\n"
        "  --optimizer sgd|adam|adamw|novograd   (default sgd)\n"
        "  --lr X                  base learning rate (default 0.1 for sgd, 0.001 otherwise)\n"
        "  --momentum X            (sgd, default 0.9)   --nesterov   --dampening X\n"
        "  --weight-decay X        (default 0; adamw 0.01)\n"
        "  --betas a,b --eps X --grad-averaging   (adam, adamw, novograd)\n"
        "  --lr-schedule none|step|cosine  (--step-size N --gamma X | --t-max N --eta-min X)\n"
        "  --warmup-epochs N --warmup-start-factor X   linear warm-up\n"
        "  --label-smoothing X     cross-entropy label smoothing\n"
        "  --sync-bn               batch statistics over the global batch (SyncBatchNorm)\n"
        "  --freeze PREFIX --freeze-bn PREFIX   keep parameters / BatchNorm fixed\n"
        "  --target-accuracy A     early stop once val top-1 >= A for --patience epochs\n"
        "  --patience P            (default 1)\n"
        "  --seed S                data order, augmentation, dropout, init (default 0)\n"
        "run\n"
        "  --out DIR               run directory: metrics.csv, plots, checkpoint.safetensors,\n"
        "                          model.safetensors (final weights), logs/\n"
        "  --overwrite             remove a previous run's outputs from --out first (else\n"
        "                          refused; --resume into the same --out keeps them)\n"
        "  --resume DIR            continue from DIR/checkpoint.safetensors\n"
        "  --checkpoint-every N    checkpoint after every N epochs (default 1)\n"
        "  --device cpu            compute backend (default cpu)\n"
        "  --threads N             compute threads per worker (default: cores / workers)\n"
        "  --loader-threads N      decode threads (default: cores)\n"
        "  --timeout S             fail the job when no sample is accounted for in S seconds,\n"
        "                          naming what is missing; heartbeats do not count (default\n"
        "                          600, 0 off)\n"
        "  --max-time S            stop the job after S seconds of wall time (default: none)\n"
        "  --worker-timeout S      declare a silent worker dead after S seconds (default 10)\n"
        "  --ring-timeout S        all-reduce peer timeout (default 60)\n"
        "  --metrics-http H:P      Prometheus metrics at http://H:P/metrics\n"
        "  --tap ENDPOINT          publish the live event tap there (default: private ipc)\n"
        "  --curve-dir DIR         CURVE on every tcp:// socket ('ddpipe keygen DIR'; default\n"
        "                          $DDPIPE_CURVE_DIR), passed on to every daemon\n"
        "  --insecure              allow a non-loopback tcp:// listen without CURVE (warned)\n"
        "  --quiet | --verbose\n"
        "test hooks\n"
        "  --fault RANK:STEP       gpud RANK kills itself before optimizer step STEP\n");
}

enum {
    O_DATA = 256, O_VAL, O_MODEL, O_WEIGHTS, O_OUT, O_DEVICE, O_RESUME, O_CHANNELS, O_MEAN, O_STD,
    O_NORMALIZE, O_CROP, O_FAULT, O_HTTP, O_OPTIM, O_SCHED, O_AUGMENT, O_BETAS, O_FREEZE,
    O_FREEZE_BN, O_WORKERS, O_BATCH, O_GLOBAL, O_EPOCHS, O_THREADS, O_LTHREADS, O_RESIZE,
    O_IN_CH, O_NCLASS, O_LIMIT, O_WINDOW, O_SEED, O_PATIENCE, O_CKPT_EVERY, O_STEP_SIZE,
    O_TIMEOUT, O_MAXTIME, O_WTIMEOUT, O_RTIMEOUT, O_TMAX, O_LR, O_MOMENTUM, O_WD, O_DAMP, O_EPS, O_GAMMA,
    O_ETA_MIN, O_WARMUP, O_WARMUP_SF, O_SMOOTH, O_TARGET, O_ROTATE, O_NESTEROV, O_SYNC_BN,
    O_GRAD_AVG, O_VERBOSE, O_QUIET, O_HELP, O_OVERWRITE, O_TAP
};

static const struct option s_longopts[] = {
    {"data", 1, 0, O_DATA}, {"val", 1, 0, O_VAL}, {"model", 1, 0, O_MODEL},
    {"weights", 1, 0, O_WEIGHTS}, {"out", 1, 0, O_OUT}, {"device", 1, 0, O_DEVICE},
    {"resume", 1, 0, O_RESUME}, {"channels", 1, 0, O_CHANNELS}, {"mean", 1, 0, O_MEAN},
    {"std", 1, 0, O_STD}, {"normalize", 1, 0, O_NORMALIZE}, {"crop", 1, 0, O_CROP},
    {"fault", 1, 0, O_FAULT}, {"metrics-http", 1, 0, O_HTTP}, {"optimizer", 1, 0, O_OPTIM},
    {"lr-schedule", 1, 0, O_SCHED}, {"augment", 1, 0, O_AUGMENT}, {"betas", 1, 0, O_BETAS},
    {"freeze", 1, 0, O_FREEZE}, {"freeze-bn", 1, 0, O_FREEZE_BN}, {"workers", 1, 0, O_WORKERS},
    {"batch-size", 1, 0, O_BATCH}, {"global-batch-size", 1, 0, O_GLOBAL},
    {"epochs", 1, 0, O_EPOCHS}, {"threads", 1, 0, O_THREADS},
    {"loader-threads", 1, 0, O_LTHREADS}, {"resize", 1, 0, O_RESIZE},
    {"in-channels", 1, 0, O_IN_CH}, {"num-classes", 1, 0, O_NCLASS}, {"limit", 1, 0, O_LIMIT},
    {"window", 1, 0, O_WINDOW}, {"seed", 1, 0, O_SEED}, {"patience", 1, 0, O_PATIENCE},
    {"checkpoint-every", 1, 0, O_CKPT_EVERY}, {"step-size", 1, 0, O_STEP_SIZE},
    {"timeout", 1, 0, O_TIMEOUT}, {"max-time", 1, 0, O_MAXTIME},
    {"worker-timeout", 1, 0, O_WTIMEOUT},
    {"ring-timeout", 1, 0, O_RTIMEOUT}, {"t-max", 1, 0, O_TMAX}, {"lr", 1, 0, O_LR},
    {"momentum", 1, 0, O_MOMENTUM}, {"weight-decay", 1, 0, O_WD}, {"dampening", 1, 0, O_DAMP},
    {"eps", 1, 0, O_EPS}, {"gamma", 1, 0, O_GAMMA}, {"eta-min", 1, 0, O_ETA_MIN},
    {"warmup-epochs", 1, 0, O_WARMUP}, {"warmup-start-factor", 1, 0, O_WARMUP_SF},
    {"label-smoothing", 1, 0, O_SMOOTH}, {"target-accuracy", 1, 0, O_TARGET},
    {"rotate", 1, 0, O_ROTATE}, {"nesterov", 0, 0, O_NESTEROV}, {"sync-bn", 0, 0, O_SYNC_BN},
    {"grad-averaging", 0, 0, O_GRAD_AVG}, {"verbose", 0, 0, O_VERBOSE}, {"quiet", 0, 0, O_QUIET},
    {"help", 0, 0, O_HELP}, {"overwrite", 0, 0, O_OVERWRITE}, {"tap", 1, 0, O_TAP},
    {0, 0, 0, 0}};

/* String-valued flags: where each one goes. */
static const char **str_slot(train_opts_t *o, int c)
{
    switch (c) {
    case O_DATA: return &o->data;
    case O_VAL: return &o->val;
    case O_MODEL: return &o->model;
    case O_WEIGHTS: return &o->weights;
    case O_OUT: return &o->out;
    case O_DEVICE: return &o->device;
    case O_RESUME: return &o->resume_dir;
    case O_CHANNELS: return &o->channels;
    case O_MEAN: return &o->mean;
    case O_STD: return &o->std;
    case O_NORMALIZE: return &o->normalize;
    case O_CROP: return &o->crop;
    case O_FAULT: return &o->fault;
    case O_HTTP: return &o->metrics_http;
    case O_TAP: return &o->tap;
    case O_OPTIM: return &o->optimizer;
    case O_SCHED: return &o->lr_schedule;
    case O_AUGMENT: return &o->augment;
    case O_BETAS: return &o->betas;
    case O_FREEZE: return &o->freeze;
    case O_FREEZE_BN: return &o->freeze_bn;
    default: return NULL;
    }
}

/* Integer flags: name, range, slot and the "given" mark (may be NULL). */
static int parse_long_flag(train_opts_t *o, int c, const char *v)
{
    const long big = 1L << 40;
    switch (c) {
    case O_WORKERS: return flags_long("workers", v, 1, 1024, &o->workers);
    case O_BATCH: o->set_batch = true; return flags_long("batch-size", v, 1, 65536, &o->batch_size);
    case O_GLOBAL: o->set_global = true; return flags_long("global-batch-size", v, 1, 1L << 24, &o->global_batch);
    case O_EPOCHS: return flags_long("epochs", v, 1, 1000000, &o->epochs);
    case O_THREADS: return flags_long("threads", v, 1, 1024, &o->threads);
    case O_LTHREADS: return flags_long("loader-threads", v, 1, 1024, &o->loader_threads);
    case O_RESIZE: return flags_long("resize", v, 1, 16384, &o->resize);
    case O_IN_CH: return flags_long("in-channels", v, 1, 3, &o->in_channels);
    case O_NCLASS: return flags_long("num-classes", v, 1, 100000, &o->num_classes);
    case O_LIMIT: return flags_long("limit", v, 1, big, &o->limit);
    case O_WINDOW: return flags_long("window", v, 1, 64, &o->window);
    case O_SEED: o->set_seed = true; return flags_long("seed", v, 0, big, &o->seed);
    case O_PATIENCE: return flags_long("patience", v, 1, 1000000, &o->patience);
    case O_CKPT_EVERY: return flags_long("checkpoint-every", v, 1, 1000000, &o->checkpoint_every);
    case O_STEP_SIZE: o->set_step_size = true; return flags_long("step-size", v, 1, 1000000, &o->step_size);
    case O_TIMEOUT: return flags_long("timeout", v, 0, 86400 * 30, &o->timeout_s);
    case O_MAXTIME: return flags_long("max-time", v, 1, 86400 * 365, &o->max_time_s);
    case O_WTIMEOUT: return flags_long("worker-timeout", v, 1, 86400, &o->worker_timeout_s);
    case O_RTIMEOUT: return flags_long("ring-timeout", v, 1, 86400, &o->ring_timeout_s);
    case O_WARMUP: return flags_long("warmup-epochs", v, 0, 1000000, &o->warmup_epochs);
    case O_TMAX: o->set_t_max = true; return flags_long("t-max", v, 1, 1000000, &o->t_max);
    default: return 1; /* not an integer flag */
    }
}

static int parse_double_flag(train_opts_t *o, int c, const char *v)
{
    switch (c) {
    case O_LR: o->set_lr = true; return flags_double("lr", v, 0, 1e6, &o->lr);
    case O_MOMENTUM: o->set_momentum = true; return flags_double("momentum", v, 0, 1, &o->momentum);
    case O_WD: o->set_wd = true; return flags_double("weight-decay", v, 0, 1e6, &o->weight_decay);
    case O_DAMP: o->set_dampening = true; return flags_double("dampening", v, 0, 1, &o->dampening);
    case O_EPS: o->set_eps = true; return flags_double("eps", v, 0, 1, &o->eps);
    case O_GAMMA: o->set_gamma = true; return flags_double("gamma", v, 0, 1e6, &o->gamma);
    case O_ETA_MIN: o->set_eta_min = true; return flags_double("eta-min", v, 0, 1e6, &o->eta_min);
    case O_WARMUP_SF: o->set_warmup_sf = true; return flags_double("warmup-start-factor", v, 0, 1, &o->warmup_start_factor);
    case O_SMOOTH: return flags_double("label-smoothing", v, 0, 1, &o->label_smoothing);
    case O_TARGET: return flags_double("target-accuracy", v, 0, 1, &o->target_accuracy);
    case O_ROTATE: o->set_rotate = true; return flags_double("rotate", v, 0, 180, &o->rotate);
    default: return 1;
    }
}

static int parse_one(train_opts_t *o, int c, const char *v)
{
    const char **slot = str_slot(o, c);
    if (slot) {
        *slot = v;
        return 0;
    }
    int rc = parse_long_flag(o, c, v);
    if (rc <= 0)
        return rc;
    rc = parse_double_flag(o, c, v);
    if (rc <= 0)
        return rc;
    switch (c) {
    case O_NESTEROV: o->nesterov = true; return 0;
    case O_SYNC_BN: o->sync_bn = true; return 0;
    case O_GRAD_AVG: o->grad_averaging = true; return 0;
    case O_VERBOSE: o->verbose = true; return 0;
    case O_QUIET: o->quiet = true; return 0;
    case O_OVERWRITE: o->overwrite = true; return 0;
    default: return -1;
    }
}

static bool one_of(const char *v, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (strcmp(v, *allowed) == 0)
            return true;
    return false;
}

/* Names the daemons also check; here so a typo fails before anything starts. */
static int check_choices(const train_opts_t *o)
{
    static const char *const optims[] = {"sgd", "adam", "adamw", "novograd", NULL};
    static const char *const scheds[] = {"none", "step", "cosine", NULL};
    static const char *const augs[] = {"none", "flip", "crop-flip", NULL};
    if (!one_of(o->optimizer, optims)) {
        fprintf(stderr, "ddpipe train: --optimizer %s: choose sgd, adam, adamw or novograd\n", o->optimizer);
        return -1;
    }
    if (!one_of(o->lr_schedule, scheds)) {
        fprintf(stderr, "ddpipe train: --lr-schedule %s: choose none, step or cosine\n", o->lr_schedule);
        return -1;
    }
    if (o->augment && !one_of(o->augment, augs)) {
        fprintf(stderr, "ddpipe train: --augment %s: choose none, flip or crop-flip\n", o->augment);
        return -1;
    }
    if (strcmp(o->device, "cpu") != 0) {
        fprintf(stderr, "ddpipe train: --device %s: this build has only the cpu backend\n", o->device);
        return -1;
    }
    if (o->target_accuracy > 0 && !o->val) {
        fprintf(stderr, "ddpipe train: --target-accuracy needs a validation set (--val PATH)\n");
        return -1;
    }
    long fr, fs;
    char tail;
    if (o->fault && (sscanf(o->fault, "%ld:%ld%c", &fr, &fs, &tail) != 2 || fr < 0 ||
                     fr >= o->workers || fs < 0)) {
        fprintf(stderr, "ddpipe train: --fault %s: want RANK:STEP with 0 <= RANK < --workers\n", o->fault);
        return -1;
    }
    return 0;
}

/* Batch sizes: G = B*W unless --global-batch-size; validation batches per worker. */
static int apply_batch(train_opts_t *o)
{
    if (!o->set_global)
        o->global_batch = o->batch_size * o->workers;
    if (o->global_batch < o->workers) {
        fprintf(stderr, "ddpipe train: --global-batch-size %ld is smaller than --workers %ld: "
                "a rank would never get a sample\n", o->global_batch, o->workers);
        return -1;
    }
    o->val_batch = o->set_batch ? o->batch_size : (o->global_batch + o->workers - 1) / o->workers;
    return 0;
}

/* Defaults that depend on other flags, as torch.optim's. */
static void apply_defaults(train_opts_t *o)
{
    bool sgd = strcmp(o->optimizer, "sgd") == 0;
    if (!o->set_lr)
        o->lr = sgd ? 0.1 : 0.001;
    if (!o->set_momentum)
        o->momentum = sgd ? 0.9 : 0;
    if (!o->set_wd)
        o->weight_decay = strcmp(o->optimizer, "adamw") == 0 ? 0.01 : 0;
    dd_default_threads(o->workers, &o->threads, &o->loader_threads);
}

/* --resume: read the checkpoint and check it fits this run. */
static int apply_resume(train_opts_t *o)
{
    char err[512];
    if (train_resume_read(o->resume_dir, &o->resume, err, sizeof err) < 0) {
        fprintf(stderr, "ddpipe train: --resume %s: %s\n", o->resume_dir, err);
        return -1;
    }
    const train_resume_t *r = &o->resume;
    if (r->global_batch != o->global_batch) {
        fprintf(stderr, "ddpipe train: --resume %s: the checkpoint was trained with global batch %ld, "
                "this run has %ld (--workers %ld x --batch-size, or --global-batch-size); resume with "
                "--global-batch-size %ld\n", o->resume_dir, r->global_batch, o->global_batch,
                o->workers, r->global_batch);
        return -1;
    }
    if (r->seed >= 0 && o->set_seed && r->seed != o->seed) {
        fprintf(stderr, "ddpipe train: --resume %s: the checkpoint's seed is %ld, not --seed %ld "
                "(the data order would change mid-run)\n", o->resume_dir, r->seed, o->seed);
        return -1;
    }
    if (r->seed >= 0)
        o->seed = r->seed;
    if (r->epoch >= o->epochs) {
        fprintf(stderr, "ddpipe train: --resume %s: the checkpoint has finished %ld epochs; "
                "--epochs %ld leaves nothing to do (raise --epochs)\n", o->resume_dir, r->epoch, o->epochs);
        return -1;
    }
    o->resuming = true;
    return 0;
}

static int check_required(const train_opts_t *o)
{
    if (!o->data || !o->model || !o->out) {
        fprintf(stderr, "ddpipe train: --data, --model and --out are required\n");
        train_usage(stderr);
        return -1;
    }
    const char *files[] = {o->weights, o->val && strncmp(o->val, "idx:", 4) != 0 ? o->val : NULL};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (files[i] && access(files[i], R_OK) != 0) {
            fprintf(stderr, "ddpipe train: %s: %s\n", files[i], strerror(errno));
            return -1;
        }
    if (o->set_batch && o->set_global && o->batch_size * o->workers < o->global_batch)
        fprintf(stderr, "ddpipe train: note: --global-batch-size %ld fixes the training batch; "
                "--batch-size %ld applies to validation only\n", o->global_batch, o->batch_size);
    return 0;
}

int train_parse(int argc, char **argv, train_opts_t *o)
{
    *o = (train_opts_t){.workers = 1, .batch_size = 64, .epochs = 1, .device = "cpu",
                        .optimizer = "sgd", .lr_schedule = "none", .window = 2, .patience = 1,
                        .checkpoint_every = 1, .timeout_s = 600, .worker_timeout_s = 10,
                        .ring_timeout_s = 60,
                        .resume = {.seed = -1}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", s_longopts, NULL)) != -1) {
        if (c == O_HELP) {
            train_usage(stdout);
            return 1;
        }
        if (c == '?' || parse_one(o, c, optarg) < 0) {
            if (c == '?')
                train_usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ddpipe train: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (check_required(o) < 0 || check_choices(o) < 0 || apply_batch(o) < 0)
        return -1;
    apply_defaults(o);
    if (o->resume_dir && apply_resume(o) < 0)
        return -1;
    return 0;
}

/* A metadata value as a non-negative integer; -1 with err when absent or bad. */
static int meta_long(const safetensors_t *st, const char *key, long *out, char *err, size_t errlen)
{
    const char *v = safetensors_meta(st, key);
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || end == v || *end || errno || x < 0) {
        err_set(err, errlen, "%s: metadata %s is %s%s%s (a checkpoint written by ddpipe train "
                 "has it)", safetensors_path(st), key, v ? "'" : "missing", v ? v : "", v ? "'" : "");
        return -1;
    }
    *out = x;
    return 0;
}

int train_resume_read(const char *dir, train_resume_t *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->seed = -1;
    struct stat sb;
    if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(r->file, sizeof r->file, "%s/checkpoint.safetensors", dir);
    else
        snprintf(r->file, sizeof r->file, "%s", dir);
    safetensors_t *st = safetensors_open(r->file, err, errlen);
    if (!st)
        return -1;
    int rc = -1;
    if (meta_long(st, "ckpt.epoch", &r->epoch, err, errlen) == 0 &&
        meta_long(st, "ckpt.step", &r->step, err, errlen) == 0 &&
        meta_long(st, "ckpt.streak", &r->streak, err, errlen) == 0 &&
        meta_long(st, "ckpt.global_batch", &r->global_batch, err, errlen) == 0 &&
        meta_long(st, "ckpt.steps_per_epoch", &r->steps_per_epoch, err, errlen) == 0) {
        long seed;
        char ignore[8];
        if (meta_long(st, "ckpt.seed", &seed, ignore, sizeof ignore) == 0)
            r->seed = seed;
        r->start_step = r->step - r->epoch * r->steps_per_epoch;
        if (r->steps_per_epoch < 1 || r->global_batch < 1 || r->start_step < 0 ||
            r->start_step >= r->steps_per_epoch)
            err_set(err, errlen, "%s: inconsistent metadata: step %ld at epoch %ld with %ld steps per "
                     "epoch, global batch %ld", r->file, r->step, r->epoch, r->steps_per_epoch,
                     r->global_batch);
        else
            rc = 0;
    }
    safetensors_destroy(&st);
    return rc;
}

/* Split "d.ddde±XX" (printf %e) into digits without trailing zeros and the exponent. */
static void sci_parts(const char *s, char *digits, size_t len, int *exp10)
{
    size_t n = 0;
    const char *p = s;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && n + 1 < len)
            digits[n++] = *p;
    while (n > 1 && digits[n - 1] == '0')
        n--;
    digits[n] = 0;
    *exp10 = *p == 'e' ? atoi(p + 1) : 0;
}

void py_float_str(double x, char *buf, size_t len)
{
    if (!isfinite(x)) {
        snprintf(buf, len, "%s", isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
        return;
    }
    char sci[64];
    for (int prec = 1; prec <= 17; prec++) { /* the shortest repr that round-trips */
        snprintf(sci, sizeof sci, "%.*e", prec - 1, x);
        if (strtod(sci, NULL) == x)
            break;
    }
    char d[32];
    int e;
    sci_parts(sci, d, sizeof d, &e);
    const char *sign = signbit(x) ? "-" : "";
    int nd = (int)strlen(d);
    if (e < -4 || e >= 16) { /* repr switches to exponent notation */
        snprintf(buf, len, "%s%c%s%.*s%c%c%02d", sign, d[0], nd > 1 ? "." : "", nd - 1, d + 1,
                 'e', e < 0 ? '-' : '+', e < 0 ? -e : e);
    } else if (e < 0) {
        snprintf(buf, len, "%s0.%.*s%s", sign, -e - 1, "0000", d);
    } else if (nd <= e + 1) {
        snprintf(buf, len, "%s%s%.*s.0", sign, d, e + 1 - nd, "0000000000000000");
    } else {
        snprintf(buf, len, "%s%.*s.%s", sign, e + 1, d, d + e + 1);
    }
}

void train_seed_csv_name(const train_opts_t *o, char *buf, size_t len)
{
    char lr[40], m[40], w[40];
    py_float_str(o->lr, lr, sizeof lr);
    py_float_str(o->momentum, m, sizeof m);
    py_float_str((double)o->warmup_epochs, w, sizeof w);
    long bs = o->set_batch && !o->set_global ? o->batch_size
                                             : (o->global_batch + o->workers - 1) / o->workers;
    snprintf(buf, len, "%ldranks-%ldbs-%slr-%sm-%sw.csv", o->workers, bs, lr, m, w);
}
