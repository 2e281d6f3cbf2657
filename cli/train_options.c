#include "cli/train_options.h"
#include "cli/child_defaults.h"
#include "cli/classes.h"
#include "cli/job_options.h"
#include "cli/launcher.h"

#include "common/errbuf.h"
#include "common/safetensors.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define T train_options_t
static const option_t s_rows[] = {
    OPTION_STRING(T, data, "data", "PATH", NULL,
                  "training set: ImageFolder directory or idx:PREFIX"),
    OPTION_STRING(T, val, "val", "PATH", NULL,
                  "validation set (eval transform); without it the run stops by --epochs only"),
    OPTION_STRING(T, model, "model", "resnet18|resnet34|resnet50|densenet121|wideresnet", NULL,
                  "the architecture (ddpipe models lists them)"),
    OPTION_STRING(T, weights, "weights", "FILE", NULL,
                  "initial weights (default: seeded PyTorch-default init)"),
    OPTION_STRING(T, out, "out", "DIR", NULL,
                  "run directory: metrics.csv, plots, checkpoint.safetensors, model.safetensors "
                  "(final weights), logs/"),
    OPTION_FLAG(T, overwrite, "overwrite",
                "remove a previous run's outputs from --out first (else refused; --resume into "
                "the same --out keeps them)"),
    OPTION_STRING(T, resume_dir, "resume", "DIR", NULL,
                  "continue from DIR/checkpoint.safetensors"),
    OPTION_SECTION("data and model input:"),
    JOB_MODEL_OPTIONS(T),
    OPTION_STRING(T, classes, "classes", "FILE|numeric", NULL,
                  "map the class folders of --data and --val to model outputs, as ddpipe eval "
                  "--classes (the report covers the classes present)"),
    OPTION_STRING(T, augment, "augment", "none|flip|crop-flip", NULL,
                  "train augmentation (default: the dataset's)"),
    OPTION_STRING(T, cache, "cache", "memory|DIR", NULL,
                  "keep the train samples decoded before the random transforms, so epochs "
                  "after the first decode no file (DIR: kept for the next run too); the same "
                  "pixels as without it"),
    OPTION_LONG(T, cache_size_mb, "cache-size", "MB", 4096, 1, 1L << 24,
                "the most pixel data --cache keeps"),
    OPTION_DOUBLE(T, rotate, "rotate", "DEG", NAN, 0, 180,
                  "RandomRotation(+-DEG) on train samples"),
    OPTION_LONG(T, limit, "limit", "N", 0, 1, 1L << 40,
                "use only the first N samples of --data, and of --val unless --val-limit says "
                "otherwise"),
    OPTION_LONG(T, val_limit, "val-limit", "N", -1, 0, 1L << 40,
                "use only the first N samples of --val; 0: all of them (default: --limit's N)"),
    OPTION_STRING(T, wire, "wire", "uint8|jpeg", "uint8",
                  "what loaderd sends: decoded uint8 pixels, or the original files (jpeg), "
                  "decoded and augmented by gpud with the same results (not with --cache)"),
    OPTION_LONG(T, decode_threads, "decode-threads", "N", 0, 1, 1024,
                "--wire jpeg: decode threads per gpud (default: --threads)"),
    OPTION_STRING(T, decode, "decode", "cpu|gpu", "cpu",
                  "--wire jpeg: where gpud decodes the files: cpu (PIL's pixels) or gpu "
                  "(--device cuda: nvJPEG, the random crop, resize and flip on the GPU; a "
                  "rotation's batches on the CPU; not with --chunk; docs/CUDA.md \"Decoding "
                  "on the GPU\")"),
    OPTION_SECTION("schedule:"),
    GPUD_TRAINING_OPTIONS(T),
    OPTION_LONG(T, epochs, "epochs", "N", 1, 1, 1000000, "epochs to train at most"),
    OPTION_LONG(T, batch_size, "batch-size", "B", 0, 1, 65536,
                "per worker, as in DDP: global batch B*W (default 64; with --global-batch-size "
                "it sets the validation batch only)"),
    OPTION_LONG(T, global_batch, "global-batch-size", "G", 0, 1, 1L << 24,
                "fix the global batch instead: the same weights for any W"),
    OPTION_DOUBLE(T, lr, "lr", "X", NAN, 0, 1e6,
                  "base learning rate (default 0.1 for sgd, 0.001 otherwise)"),
    OPTION_DOUBLE(T, momentum, "momentum", "X", NAN, 0, 1, "sgd momentum (default 0.9)"),
    OPTION_DOUBLE(T, dampening, "dampening", "X", NAN, 0, 1, "sgd dampening (default 0)"),
    OPTION_DOUBLE(T, weight_decay, "weight-decay", "X", NAN, 0, 1e6,
                  "(default 0; adamw 0.01)"),
    OPTION_DOUBLE(T, gamma, "gamma", "X", NAN, 0, 1e6, "step schedule: factor per step"),
    OPTION_DOUBLE(T, eta_min, "eta-min", "X", NAN, 0, 1e6, "cosine schedule: the lowest lr"),
    OPTION_DOUBLE(T, warmup_start_factor, "warmup-start-factor", "X", NAN, 0, 1,
                  "linear warm-up: the first epoch's lr factor"),
    OPTION_STRING(T, freeze, "freeze", "PREFIX", NULL, "keep parameters under PREFIX fixed"),
    OPTION_STRING(T, freeze_bn, "freeze-bn", "PREFIX", NULL,
                  "keep BatchNorm layers under PREFIX in eval mode"),
    OPTION_DOUBLE(T, target_accuracy, "target-accuracy", "A", 0, 0, 1,
                  "early stop once val top-1 >= A for --patience epochs; 0 off"),
    OPTION_LONG(T, patience, "patience", "P", 1, 1, 1000000,
                "epochs in a row at the target before stopping"),
    OPTION_LONG(T, seed, "seed", "S", -1, 0, 1L << 40,
                "data order, augmentation, dropout, init (default 0, or the checkpoint's)"),
    OPTION_SECTION("run:"),
    JOB_RUN_OPTIONS(T),
    OPTION_LONG(T, min_workers, "min-workers", "N", 1, 1, 4096,
                "a rank lost mid-training costs its step, not the job, while at least N ranks "
                "are left (docs/ELASTIC.md); below N the job stops with a resumable checkpoint"),
    OPTION_LONG(T, max_workers, "max-workers", "N", 0, 1, 4096,
                "gpuds started later with --join (the same settings) enter the running job "
                "while fewer than N ranks train (default: --workers; docs/ELASTIC.md)"),
    OPTION_LONG(T, rejoin_timeout_s, "rejoin-timeout", "S", 60, 0, 86400,
                "below --min-workers training pauses up to S s for gpuds to join (--join), "
                "then stops with a resumable checkpoint (0: stop at once)"),
    OPTION_LONG(T, loaders, "loaders", "N", 1, 1, 64,
                "loaderd processes, each loading a shard of the dataset (ids % N; loaderd --shard "
                "i/N); every gpud merges each step's parts in one loaderd's order"),
    JOB_LAUNCH_OPTIONS(T),
    OPTION_SECTION("test hooks:"),
    OPTION_STRING(T, fault, "fault", "RANK:STEP[,...]", NULL,
                  "gpud RANK kills itself before optimizer step STEP (a comma-separated list: "
                  "several ranks)"),
    OPTION_STRING(T, fault_hold_epoch, "fault-hold-epoch", "RANK:E", NULL,
                  "gpud RANK leaves reducerd's EPOCH(E) unhandled until a rank was lost"),
    OPTION_LONG(T, fault_in_checkpoint, "fault-in-checkpoint", "RANK", -1, 0, 4096,
                "gpud RANK (the checkpoint writer, 0) dies inside its first checkpoint write"),
    OPTION_LONG(T, pause_at_step, "pause-at-step", "S", -1, 0, 1L << 40,
                "training pauses before step S until one more gpud joined (--join)"),
    OPTION_END};
#undef T

const option_table_t train_options_table = {"ddpipe train",
                                       "--data PATH --model ARCH --out DIR [options]", s_rows};

static bool one_of(const char *v, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (strcmp(v, *allowed) == 0)
            return true;
    return false;
}

/* Names the daemons also check; here so a typo fails before anything starts. */
static int check_choices(const train_options_t *o)
{
    static const char *const optims[] = {"sgd", "adam", "adamw", "novograd", NULL};
    static const char *const augs[] = {"none", "flip", "crop-flip", NULL};
    if (!one_of(o->optimizer, optims)) {
        fprintf(stderr, "ddpipe train: --optimizer %s: choose sgd, adam, adamw or novograd\n", o->optimizer);
        return -1;
    }
    if (gpud_check_schedule("ddpipe train", o->lr_schedule, o->step_size, o->t_max) < 0)
        return -1;
    if (o->augment && !one_of(o->augment, augs)) {
        fprintf(stderr, "ddpipe train: --augment %s: choose none, flip or crop-flip\n", o->augment);
        return -1;
    }
    if (gpud_check_precision("ddpipe train", o->precision) < 0 ||
        gpud_check_loss_scale("ddpipe train", o->loss_scale) < 0)
        return -1;
    if (strcmp(o->wire, "uint8") != 0 && strcmp(o->wire, "jpeg") != 0) {
        fprintf(stderr, "ddpipe train: --wire %s: choose uint8 or jpeg\n", o->wire);
        return -1;
    }
    if (strcmp(o->wire, "jpeg") == 0 && o->loaders > 1) {
        fprintf(stderr, "ddpipe train: --wire jpeg with --loaders %ld: training with several "
                        "loaderds needs --wire uint8\n", o->loaders);
        return -1;
    }
    if (strcmp(o->wire, "jpeg") == 0 && o->cache) {
        fprintf(stderr, "ddpipe train: --wire jpeg and --cache: the cache keeps samples loaderd "
                        "decodes, with jpeg gpud decodes them; drop one of the two\n");
        return -1;
    }
    if (gpud_check_decode("ddpipe train", o->decode, o->device, o->wire, o->chunk) < 0)
        return -1;
    if (gpud_check_device("ddpipe train", "--device", o->device, o->precision, 1) < 0)
        return -1;
    if (o->target_accuracy > 0 && !o->val) {
        fprintf(stderr, "ddpipe train: --target-accuracy needs a validation set (--val PATH)\n");
        return -1;
    }
    if (o->val_limit >= 0 && !o->val) {
        fprintf(stderr, "ddpipe train: --val-limit needs a validation set (--val PATH)\n");
        return -1;
    }
    if (o->max_workers && o->max_workers < o->workers) {
        fprintf(stderr, "ddpipe train: --max-workers %ld is less than --workers %ld\n",
                o->max_workers, o->workers);
        return -1;
    }
    if (o->min_workers > o->workers) {
        fprintf(stderr, "ddpipe train: --min-workers %ld is more than --workers %ld\n",
                o->min_workers, o->workers);
        return -1;
    }
    long step;
    if (o->fault && train_fault_step(o->fault, -1, o->workers, &step) < 0) {
        fprintf(stderr, "ddpipe train: --fault %s: want RANK:STEP[,RANK:STEP...] with 0 <= RANK "
                        "< --workers\n", o->fault);
        return -1;
    }
    if (o->fault_hold_epoch && train_fault_step(o->fault_hold_epoch, -1, o->workers, &step) < 0) {
        fprintf(stderr, "ddpipe train: --fault-hold-epoch %s: want RANK:EPOCH[,...] with 0 <= "
                        "RANK < --workers\n", o->fault_hold_epoch);
        return -1;
    }
    return 0;
}

int train_fault_step(const char *spec, long rank, long workers, long *step)
{
    *step = -1;
    for (const char *p = spec; *p;) {
        long r, s;
        int used = 0;
        if (sscanf(p, "%ld:%ld%n", &r, &s, &used) != 2 || r < 0 || r >= workers || s < 0 ||
            (p[used] != ',' && p[used] != '\0'))
            return -1;
        if (r == rank)
            *step = s;
        p += used;
        if (*p == ',' && *++p == '\0')
            return -1;   /* a trailing comma */
    }
    return 0;
}

/* Batch sizes: G = B*W unless --global-batch-size; validation batches per worker. */
static int apply_batch(train_options_t *o)
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

/* --chunk N (bitwise training): the weights are a function of the global
 * batch, so it is given, not B x W (which would move with --workers); the
 * chunks are cut the same for any W (common/image/sampler.h), also over
 * several loaderds (gpud merges their parts into one loaderd's list) and
 * with --wire jpeg (the same shards, decoded by gpud). */
static int check_chunk(const train_options_t *o)
{
    if (!o->chunk)
        return 0;
    if (!o->set_global) {
        fprintf(stderr, "ddpipe train: --chunk %ld needs a fixed global batch: give "
                        "--global-batch-size G, a multiple of %ld (with --batch-size alone the "
                        "global batch is B x --workers, and the weights would change with "
                        "--workers)\n", o->chunk, o->chunk);
        return -1;
    }
    if (gpud_check_chunk("ddpipe train", o->device, o->chunk, o->global_batch) < 0)
        return -1;
    long chunks = o->global_batch / o->chunk;
    if (chunks < o->workers && !o->quiet)
        fprintf(stderr, "ddpipe train: note: --global-batch-size %ld is %ld chunk%s of %ld: "
                        "%ld of the %ld workers get no samples in a step\n", o->global_batch,
                chunks, chunks == 1 ? "" : "s", o->chunk, o->workers - chunks, o->workers);
    return 0;
}

/* Defaults that depend on other flags, as torch.optim's. */
static void apply_defaults(train_options_t *o)
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
static int apply_resume(train_options_t *o)
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
    /* the chunks are part of what the weights are a function of: another
     * --chunk would give neither the old run's bytes nor the new mode's */
    if (r->chunk >= 0 && r->chunk != o->chunk) {
        char how[64] = "without --chunk";
        if (r->chunk)
            snprintf(how, sizeof how, "with --chunk %ld", r->chunk);
        fprintf(stderr, "ddpipe train: --resume %s: the checkpoint was trained %s, this run "
                "has --chunk %ld; resume %s\n", o->resume_dir, how, o->chunk, how);
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
        fprintf(stderr, "ddpipe train: --resume %s: the checkpoint has finished %ld epoch%s; "
                "--epochs %ld leaves nothing to do (raise --epochs)\n", o->resume_dir, r->epoch,
                r->epoch == 1 ? "" : "s", o->epochs);
        return -1;
    }
    o->resuming = true;
    return 0;
}

static int check_required(const train_options_t *o)
{
    if (!o->data || !o->model || !o->out) {
        /* name what is missing, not the whole --help */
        fprintf(stderr, "ddpipe train: missing%s%s%s\nusage: ddpipe train %s\n(ddpipe train --help "
                "lists every option)\n", o->data ? "" : " --data", o->model ? "" : " --model",
                o->out ? "" : " --out", train_options_table.synopsis);
        return -1;
    }
    if (dd_check_model("ddpipe train", o->model) < 0)
        return -1;
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

/* The "given" marks and the values a sentinel default stands for
 * (common/options.h): what the checks and the launcher read. --eps,
 * --step-size and --t-max stay as parsed: gpud's rows, the same sentinels,
 * passed on as they are. */
static void resolve_sentinels(train_options_t *o)
{
    o->set_batch = o->batch_size != 0;
    o->set_global = o->global_batch != 0;
    o->set_seed = o->seed >= 0;
    if (!o->set_batch)
        o->batch_size = 64;
    if (!o->set_seed)
        o->seed = 0;
    struct {
        double *value;
        bool *given;   /* NULL: only the value is needed (loaderd's 0: none) */
    } doubles[] = {{&o->lr, &o->set_lr},           {&o->momentum, &o->set_momentum},
                   {&o->weight_decay, &o->set_wd}, {&o->dampening, &o->set_dampening},
                   {&o->gamma, &o->set_gamma},     {&o->eta_min, &o->set_eta_min},
                   {&o->warmup_start_factor, &o->set_warmup_sf}, {&o->rotate, NULL}};
    for (size_t i = 0; i < sizeof doubles / sizeof doubles[0]; i++) {
        bool given = !isnan(*doubles[i].value);
        if (doubles[i].given)
            *doubles[i].given = given;
        if (!given)
            *doubles[i].value = 0;
    }
}

int train_options_parse(int argc, char **argv, train_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->resume.seed = -1;
    o->resume.chunk = -1;
    int next = 0;
    int rc = options_parse(&train_options_table, argc, argv, o, &next);
    if (rc != 0)
        return rc;
    if (next < argc) {
        fprintf(stderr, "ddpipe train: unexpected argument '%s'\n", argv[next]);
        return -1;
    }
    resolve_sentinels(o);
    if (dd_launcher_check("ddpipe train", o->launcher, &o->workers) < 0)
        return -1;
    if (dd_launcher_is_slurm(o->launcher) && (o->fault || o->fault_in_checkpoint >= 0)) {
        fprintf(stderr, "ddpipe train: --fault and --fault-in-checkpoint are test hooks of the "
                "local launcher\n");
        return -1;
    }
    if (check_required(o) < 0 || check_choices(o) < 0 || apply_batch(o) < 0 ||
        check_chunk(o) < 0)
        return -1;
    apply_defaults(o);
    if (o->resume_dir && apply_resume(o) < 0)
        return -1;
    /* the head is the checkpoint's when resuming, the file's, else the
     * architecture's default */
    dd_classes_t c = {.cmd = "ddpipe train", .data = o->data, .val = o->val, .model = o->model,
                      .weights = o->resuming ? o->resume.file : o->weights,
                      .num_classes = o->num_classes, .classes = o->classes};
    if (o->classes && dd_check_classes(&c, &o->outputs) < 0)
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
    r->chunk = -1;
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
        long chunk;
        if (meta_long(st, "ckpt.chunk", &chunk, ignore, sizeof ignore) == 0)
            r->chunk = chunk;
        r->start_step = r->step - r->epoch * r->steps_per_epoch;
        /* 0 steps per epoch: a checkpoint of the first epoch by a build that
         * learned the count only at its end (or one written before the first
         * step); the steps done are then `step`, and loaderd checks them
         * against the count it plans */
        bool first_epoch = r->epoch == 0 && r->steps_per_epoch == 0;
        if ((r->steps_per_epoch < 1 && !first_epoch) || r->global_batch < 1 ||
            r->start_step < 0 || (!first_epoch && r->start_step >= r->steps_per_epoch))
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

void train_seed_csv_name(const train_options_t *o, char *buf, size_t len)
{
    char lr[40], m[40], w[40];
    py_float_str(o->lr, lr, sizeof lr);
    py_float_str(o->momentum, m, sizeof m);
    py_float_str((double)o->warmup_epochs, w, sizeof w);
    long bs = o->set_batch && !o->set_global ? o->batch_size
                                             : (o->global_batch + o->workers - 1) / o->workers;
    snprintf(buf, len, "%ldranks-%ldbs-%slr-%sm-%sw.csv", o->workers, bs, lr, m, w);
}
