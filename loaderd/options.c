/* loaderd's option table and the checks across its options. */
#include "loaderd/options.h"

#include "common/cpus.h"
#include "common/flags.h"
#include "common/zsecurity.h"
#include "proto/messages.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define T loader_options_t
static const option_t s_rows[] = {
    OPTION_STRING(T, data, "data", "PATH", NULL,
                  "ImageFolder directory or idx:PREFIX (training: the train set)"),
    OPTION_STRING(T, bind, "bind", "EP", NULL, "ROUTER the gpud workers connect to"),
    OPTION_STRING(T, reducer, "reducer", "EP", NULL,
                  "reducerd's ROUTER (plan and failed samples go there)"),
    OPTION_LONG(T, batch_size, "batch-size", "N", 64, 1, DDP_MAX_BATCH,
                "samples per batch (training: per worker)"),
    OPTION_LONG(T, threads, "threads", "N", 0, 1, 1024,
                "decode threads (default: every CPU it may use)"),
    OPTION_LONG(T, prefetch, "prefetch", "N", 4, 1, LOADER_MAX_READY,
                "batches decoded ahead (bounds memory)"),
    OPTION_LONG(T, resize, "resize", "N", 0, 1, 16384,
                "resize the shorter side to N (PIL bilinear + antialias)"),
    OPTION_STRING(T, crop, "crop", "N|HxW", NULL,
                  "center crop (training: also the RandomResizedCrop size)"),
    OPTION_LONG(T, channels, "channels", "1|3", 0, 1, 3,
                "channels the model wants (gray<->RGB as torchvision; default 1 for idx:, else "
                "3)"),
    OPTION_FLAG(T, no_dct_scaling, "no-dct-scaling",
                "decode JPEGs at full size before resizing (exact PIL parity)"),
    OPTION_STRING(T, wire, "wire", "uint8|jpeg", NULL,
                  "what a batch carries: uint8 decoded pixels (default), or jpeg: each "
                  "sample's original file (any format) and the transform, decoded by gpud "
                  "(fewer bytes across hosts; eval only; idx: falls back to uint8)"),
    OPTION_LONG(T, limit, "limit", "N", -1, 0, (long)1 << 40,
                "use only the first N samples of the dataset(s)"),
    OPTION_FLAG(T, predictions, "predictions",
                "send sample paths to reducerd (for predictions.csv)"),
    OPTION_STRING(T, classes, "classes", "FILE|numeric", NULL,
                  "map class folders to model outputs: 'folder index [label]' lines, a list "
                  "of folders in model order (LOC_synset_mapping.txt), or numeric folder "
                  "names (needs --outputs)"),
    OPTION_LONG(T, outputs, "outputs", "N", 0, 1, DDP_MAX_CLASSES,
                "with --classes: the model's output count (the plan's classes)"),
    OPTION_LONG(T, worker_timeout_s, "worker-timeout", "S", 10, 1, 86400,
                "a gpud that leaves a batch unanswered this long (heartbeats do not count) or is "
                "silent this long is dropped and its batches go to the others"),
    OPTION_STRING(T, shard, "shard", "I/N", NULL,
                  "one of N loaderds of the dataset: hand out the samples whose id % N == I "
                  "(docs/SCALE.md \"Several loaderds\"); training: this shard's samples of each "
                  "rank's list, which gpud merges in order"),
    OPTION_FLAG(T, verbose, "verbose", NULL),
    OPTION_SECTION("training (docs/TRAINING.md):"),
    OPTION_FLAG(T, train, "train", "train: epochs of global steps sharded over the ranks"),
    OPTION_STRING(T, val, "val", "PATH", NULL, "validation set, eval transform, after each epoch"),
    OPTION_LONG(T, val_limit, "val-limit", "N", -1, 0, (long)1 << 40,
                "use only the first N samples of --val; 0: all of them (default: --limit's)"),
    OPTION_LONG(T, workers, "workers", "W", 1, 1, 4096, "ranks"),
    OPTION_LONG(T, global_batch, "global-batch-size", "G", 0, 1, (long)1 << 40,
                "samples per global step (default --batch-size * W)"),
    OPTION_LONG(T, chunk, "chunk", "N", 0, 0, DDP_MAX_BATCH,
                "bitwise training (gpud --chunk N, the same N): each rank's shard is a run of "
                "whole chunks of N consecutive samples of the step, cut the same for any W "
                "(ranks past the chunk count get none); the global batch must be a multiple of "
                "N; 0: off (docs/TRAINING.md \"Bitwise training\")"),
    OPTION_LONG(T, epochs, "epochs", "E", 1, 1, 1000000, "most epochs (reducerd decides the stop)"),
    OPTION_LONG(T, seed, "seed", "S", 0, 0, LONG_MAX, "shuffle and augmentation seed"),
    OPTION_STRING(T, augment, "augment", "none|flip|crop-flip", NULL,
                  "train transforms (default crop-flip, none for idx:)"),
    OPTION_DOUBLE(T, rotate, "rotate", "DEG", 0, 0, 360,
                  "RandomRotation((-DEG, DEG)) after the other transforms"),
    OPTION_STRING(T, cache, "cache", "memory|DIR", NULL,
                  "keep train samples decoded (before the random transforms) so later epochs "
                  "decode no file: in memory, or in DIR/samples.cache for the next run too"),
    OPTION_LONG(T, cache_size_mb, "cache-size", "MB", 4096, 1, 1L << 24,
                "the most pixel data --cache keeps (MiB); a full cache takes no more samples"),
    OPTION_LONG(T, start_epoch, "start-epoch", "E", 0, 0, 1000000, "resume: first epoch"),
    OPTION_LONG(T, start_step, "start-step", "K", 0, 0, (long)1 << 40,
                "resume: first global step of the first epoch"),
    ZS_SECURITY_OPTIONS,
    OPTION_END};
#undef T

const option_table_t loader_options_table = {
    "loaderd", "--data PATH --bind ENDPOINT --reducer ENDPOINT [options]", s_rows};

/* The options that mean something only with --train. */
static const char *const s_training_only[] = {"val",  "workers", "global-batch-size", "chunk",
                                              "epochs", "seed", "augment", "rotate",
                                              "start-epoch", "start-step", NULL};

static int read_crop(loader_options_t *self)
{
    int h, w;
    char extra;
    const char *v = self->crop;
    if (sscanf(v, "%dx%d%c", &h, &w, &extra) == 2 && h > 0 && w > 0 && h <= 16384 && w <= 16384) {
        self->crop_h = h;
        self->crop_w = w;
        return 0;
    }
    long side;
    if (flags_long("crop", v, 1, 16384, &side) < 0)
        return -1;
    self->crop_h = self->crop_w = (int)side;
    return 0;
}

static int read_augment(loader_options_t *self)
{
    static const char *names[] = {"none", "flip", "crop-flip"};
    for (int i = 0; i < 3; i++)
        if (strcmp(self->augment, names[i]) == 0) {
            self->augment_mode = (loader_augment_t)i;
            return 0;
        }
    fprintf(stderr, "loaderd: --augment: '%s' is not one of none, flip, crop-flip\n",
            self->augment);
    return -1;
}

/* --shard I/N: 0 <= I < N <= DDP_MAX_LOADERS; one line naming what is wrong. */
static int read_shard(loader_options_t *self)
{
    long i, n;
    int used = 0;
    if (sscanf(self->shard, "%ld/%ld%n", &i, &n, &used) != 2 || self->shard[used] != '\0') {
        fprintf(stderr, "loaderd: --shard '%s': want I/N, e.g. 0/3\n", self->shard);
        return -1;
    }
    if (n < 1 || n > DDP_MAX_LOADERS || i < 0 || i >= n) {
        fprintf(stderr, "loaderd: --shard %ld/%ld is out of range: want 0 <= I < N <= %d "
                        "(shards are numbered from 0)\n", i, n, DDP_MAX_LOADERS);
        return -1;
    }
    self->shard_index = (uint32_t)i;
    self->shard_count = (uint32_t)n;
    return 0;
}

/* --wire: uint8 (decoded pixels) or jpeg (the files, decoded by gpud). */
static int read_wire(loader_options_t *self)
{
    self->wire_encoded = 0;
    if (!self->wire || strcmp(self->wire, "uint8") == 0)
        return 0;
    if (strcmp(self->wire, "jpeg") != 0) {
        fprintf(stderr, "loaderd: --wire: '%s' is not one of uint8, jpeg\n", self->wire);
        return -1;
    }
    /* the cache keeps decoded train samples: with jpeg nothing is decoded here */
    if (self->cache) {
        fprintf(stderr, "loaderd: --wire jpeg and --cache: the cache keeps samples loaderd "
                        "decodes, with jpeg gpud decodes them; drop one of the two\n");
        return -1;
    }
    /* gpud merges the parts of several loaderds' train steps as pixels */
    if (self->train && self->shard_count > 1) {
        fprintf(stderr, "loaderd: --wire jpeg with --train and --shard %u/%u: training with "
                        "several loaderds needs --wire uint8\n", self->shard_index,
                self->shard_count);
        return -1;
    }
    self->wire_encoded = 1;
    return 0;
}

/* The values the table cannot check alone. */
static int read_values(loader_options_t *self)
{
    self->shard_index = 0;
    self->shard_count = 1;
    if (self->shard && read_shard(self) < 0)
        return -1;
    self->crop_h = self->crop_w = 0;
    if (read_wire(self) < 0)
        return -1;
    self->augment_mode = LOADER_AUGMENT_DEFAULT;
    if (self->crop && read_crop(self) < 0)
        return -1;
    if (!self->classes != !self->outputs) {
        fprintf(stderr, "loaderd: --classes and --outputs go together\n");
        return -1;
    }
    if (self->channels == 2) {
        fprintf(stderr, "--channels: 1 or 3\n");
        return -1;
    }
    return self->augment ? read_augment(self) : 0;
}

/* The row an argv word "--name[=V]" names, as getopt_long matches it:
 * the exact name, else the row it is a prefix of (unique: parsed already). */
static const option_t *row_named(const char *name, size_t len)
{
    const option_t *prefix_of = NULL;
    for (const option_t *opt = s_rows; opt->type != OPTION_TYPE_END; opt++) {
        if (opt->type == OPTION_TYPE_SECTION || strncmp(opt->name, name, len) != 0)
            continue;
        if (strlen(opt->name) == len)
            return opt;
        prefix_of = opt;
    }
    return prefix_of;
}

static bool training_only(const char *name)
{
    for (const char *const *t = s_training_only; *t; t++)
        if (strcmp(*t, name) == 0)
            return true;
    return false;
}

/* How many training-only options argv gives, whatever their value (argv
 * parsed already: each "--" word is an option, a value follows it). */
static int training_options_given(int argc, char **argv)
{
    int given = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strncmp(argv[i], "--", 2) != 0)
            continue;
        const char *name = argv[i] + 2;
        size_t len = strcspn(name, "=");
        const option_t *opt = row_named(name, len);
        if (!opt)
            continue; /* --help */
        if (opt->type != OPTION_TYPE_FLAG && name[len] != '=')
            i++; /* its value */
        given += training_only(opt->name);
    }
    return given;
}

/* The training options, given without --train, are a mistake worth naming. */
static int check_training(loader_options_t *self, int training_given)
{
    if (!self->train) {
        if (training_given) {
            fprintf(stderr, "loaderd: --val, --workers, --global-batch-size, --chunk, --epochs, "
                            "--seed, --augment, --rotate, --start-epoch and --start-step need "
                            "--train\n");
            return -1;
        }
        return 0;
    }
    if (!self->global_batch) {
        if (self->batch_size > LONG_MAX / self->workers) {
            fprintf(stderr, "loaderd: --batch-size x --workers overflows\n");
            return -1;
        }
        self->global_batch = self->batch_size * self->workers;
    }
    if (self->chunk && self->global_batch % self->chunk != 0) {
        fprintf(stderr, "loaderd: --chunk %ld: the global batch %ld (--global-batch-size, or "
                        "--batch-size x --workers) is not a multiple of it (every step but an "
                        "epoch's last must be whole chunks)\n",
                self->chunk, self->global_batch);
        return -1;
    }
    /* the largest shard is ceil(G / W) samples (with --chunk: ceil(G / N / W)
     * whole chunks): it must fit one BATCH */
    long unit = self->chunk ? self->chunk : 1, units = self->global_batch / unit;
    long most = (units + self->workers - 1) / self->workers * unit;
    if (most > DDP_MAX_BATCH) {  /* sampler_chunked_max_shard's bound, G a multiple of N */
        fprintf(stderr, "loaderd: a global batch of %ld over %ld workers gives shards over %d "
                        "samples; use more workers or a smaller --global-batch-size\n",
                self->global_batch, self->workers, DDP_MAX_BATCH);
        return -1;
    }
    if (self->start_epoch >= self->epochs) {
        fprintf(stderr, "loaderd: --start-epoch %ld is not below --epochs %ld: nothing to train\n",
                self->start_epoch, self->epochs);
        return -1;
    }
    return 0;
}

int loader_options_parse(loader_options_t *self, int argc, char **argv)
{
    if (zs_security_args(&argc, argv) < 0)
        return -1;
    int rc = options_parse(&loader_options_table, argc, argv, self, NULL);
    if (rc != 0)
        return rc;
    if (read_values(self) < 0)
        return -1;
    if (!self->data || !self->bind || !self->reducer) {
        fprintf(stderr, "loaderd: --data, --bind and --reducer are required\n");
        options_usage(&loader_options_table, stderr);
        return -1;
    }
    if (!self->threads)
        self->threads = cpus_available();
    return check_training(self, training_options_given(argc, argv));
}
