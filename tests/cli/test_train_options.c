/* Unit test of cli/train_options: Python's str(float) for the seed CSV name,
 * batch arithmetic, defaults, and --resume reading and refusing checkpoints. */
#include "cli/child_defaults.h"
#include "cli/train_options.h"
#include "common/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int s_fail = 0;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
            s_fail++;                                                     \
        }                                                                 \
    } while (0)

static void test_py_float_str(void)
{
    /* expected values are Python 3's str(float(x)) */
    struct { double x; const char *want; } cases[] = {
        {0.0, "0.0"}, {0.1, "0.1"}, {0.9, "0.9"}, {1.0, "1.0"}, {0.01, "0.01"}, {5e-4, "0.0005"},
        {1e-4, "0.0001"}, {1e-5, "1e-05"}, {2.5e-5, "2.5e-05"}, {123.456, "123.456"},
        {1e16, "1e+16"}, {1.5e16, "1.5e+16"}, {1e15, "1000000000000000.0"}, {-0.5, "-0.5"},
        {0.30000000000000004, "0.30000000000000004"}, {1.0 / 3, "0.3333333333333333"},
        {100.0, "100.0"}, {0.000123, "0.000123"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        py_float_str(cases[i].x, buf, sizeof buf);
        CHECK(strcmp(buf, cases[i].want) == 0, "py_float_str(%.17g) = %s, want %s", cases[i].x, buf,
              cases[i].want);
    }
}

/* optarg points into the split line: each parse gets its own buffer. */
static int parse(train_options_t *o, const char *line)
{
    static char keep[16][2048];
    static int k = 0;
    char *buf = keep[k++ % 16];
    snprintf(buf, sizeof keep[0], "train %s", line);
    char *argv[64];
    int argc = 0;
    for (char *t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    return train_options_parse(argc, argv, o);
}

static void test_batches_and_names(void)
{
    train_options_t o;
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 2 --batch-size 128 "
                    "--lr 0.01 --weight-decay 5e-4 --warmup-epochs 5") == 0, "parse");
    CHECK(o.global_batch == 256 && o.val_batch == 128, "G=%ld vb=%ld", o.global_batch, o.val_batch);
    char name[256];
    train_seed_csv_name(&o, name, sizeof name);
    CHECK(strcmp(name, "2ranks-128bs-0.01lr-0.9m-5.0w.csv") == 0, "csv %s", name);

    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 3 --global-batch-size 100") == 0,
          "parse G");
    CHECK(o.global_batch == 100 && o.val_batch == 34, "G=%ld vb=%ld", o.global_batch, o.val_batch);
    CHECK(o.lr == 0.1 && o.momentum == 0.9 && o.weight_decay == 0, "sgd defaults");
    train_seed_csv_name(&o, name, sizeof name);
    CHECK(strcmp(name, "3ranks-34bs-0.1lr-0.9m-0.0w.csv") == 0, "csv %s", name);

    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --optimizer adamw") == 0, "adamw");
    CHECK(o.lr == 0.001 && o.momentum == 0 && o.weight_decay == 0.01, "adamw defaults");
    /* gpud's rows pass on as parsed: no --eps means gpud's (NAN: not emitted), not 0 */
    CHECK(isnan(o.eps) && o.step_size == 0 && o.t_max == 0, "eps %g step %ld t_max %ld", o.eps,
          o.step_size, o.t_max);
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --optimizer adam --eps 1e-6") == 0
          && o.eps == 1e-6, "--eps 1e-6: %g", o.eps);

    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --optimizer lamb") < 0, "bad optimizer");
    /* --device: cpu or cuda (gpud says at start whether this build has cuda) */
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --device cuda") == 0 &&
              strcmp(o.device, "cuda") == 0, "--device cuda");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --device tpu") < 0, "bad device");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --device cuda --precision bf16") == 0,
          "bf16 training on cuda");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 2 --fault 2:3") < 0, "bad fault rank");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 3 --fault 1:5,2:5") == 0,
          "two faults");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 3 --fault 1:5,") < 0,
          "a trailing comma");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 3 --fault 1:5;2:5") < 0,
          "another separator");
    long step;
    CHECK(train_fault_step("1:5,2:7", 2, 3, &step) == 0 && step == 7, "rank 2's step %ld", step);
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --lr-schedule cosine") < 0,
          "cosine without --t-max");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --lr-schedule cosine "
                    "--t-max 10") == 0, "cosine with --t-max");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --lr-schedule step") < 0,
          "step without --step-size");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 3 "
                    "--fault-hold-epoch 2:0") == 0 && strcmp(o.fault_hold_epoch, "2:0") == 0,
          "--fault-hold-epoch");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 2 "
                    "--fault-hold-epoch 2:0") < 0, "bad --fault-hold-epoch rank");
    CHECK(train_fault_step("1:5,2:7", 0, 3, &step) == 0 && step == -1, "rank 0: none");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 4 --global-batch-size 3") < 0,
          "G < W");
    CHECK(parse(&o, "--model wideresnet --out /tmp/r") < 0, "missing --data");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 3") == 0 &&
          o.min_workers == 1, "--min-workers defaults to 1: %ld", o.min_workers);
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 3 --min-workers 3") == 0 &&
          o.min_workers == 3, "--min-workers 3");
    CHECK(parse(&o, "--data idx:x --model wideresnet --out /tmp/r --workers 2 --min-workers 3") < 0,
          "--min-workers above --workers");
}

/* --launcher: local (workers default 1), slurm only inside an allocation
 * (SLURM_JOB_ID), its worker count from SLURM_NTASKS unless --workers. */
static void test_launcher(void)
{
    train_options_t o;
    const char *base = "--data idx:x --model wideresnet --out /tmp/r";
    char line[256];
    unsetenv("SLURM_JOB_ID");
    unsetenv("SLURM_NTASKS");
    unsetenv("SLURM_JOB_NUM_NODES");
    CHECK(parse(&o, base) == 0 && o.workers == 1 && strcmp(o.launcher, "local") == 0,
          "default: 1 local worker (%ld, %s)", o.workers, o.launcher);
    snprintf(line, sizeof line, "%s --launcher slurm", base);
    CHECK(parse(&o, line) < 0, "--launcher slurm outside an allocation is refused");
    snprintf(line, sizeof line, "%s --launcher pbs", base);
    CHECK(parse(&o, line) < 0, "--launcher pbs is refused");
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("SLURM_NTASKS", "3", 1);
    snprintf(line, sizeof line, "%s --launcher slurm", base);
    CHECK(parse(&o, line) == 0 && o.workers == 3 && o.global_batch == 3 * 64,
          "slurm: W = SLURM_NTASKS (%ld, G %ld)", o.workers, o.global_batch);
    snprintf(line, sizeof line, "%s --launcher slurm --workers 2", base);
    CHECK(parse(&o, line) == 0 && o.workers == 2, "slurm: --workers wins (%ld)", o.workers);
    CHECK(parse(&o, base) == 0 && o.workers == 1, "local inside an allocation: 1 (%ld)", o.workers);
    setenv("SLURM_NTASKS", "x", 1);
    snprintf(line, sizeof line, "%s --launcher slurm", base);
    CHECK(parse(&o, line) < 0, "a bad SLURM_NTASKS is refused");
    unsetenv("SLURM_NTASKS");
    setenv("SLURM_JOB_NUM_NODES", "2", 1);
    CHECK(parse(&o, line) == 0 && o.workers == 2, "slurm without SLURM_NTASKS: one per node (%ld)",
          o.workers);
    snprintf(line, sizeof line, "%s --launcher slurm --workers 2 --fault 1:3", base);
    CHECK(parse(&o, line) < 0, "--fault is refused with slurm");
    unsetenv("SLURM_JOB_ID");
    unsetenv("SLURM_JOB_NUM_NODES");
}

static const char *s_ckpt_chunk;   /* ckpt.chunk of the next write_ckpt; NULL: none */

static void write_ckpt(const char *path, const char *epoch, const char *step, const char *gb, const char *spe)
{
    char err[256];
    st_writer_t *w = st_writer_new();
    float x = 1;
    int64_t shape[1] = {1};
    st_writer_add(w, "fc.bias", ST_F32, 1, shape, &x, err, sizeof err);
    const char *kv[][2] = {{"ckpt.epoch", epoch}, {"ckpt.step", step}, {"ckpt.streak", "1"},
                           {"ckpt.global_batch", gb}, {"ckpt.steps_per_epoch", spe}, {"ckpt.seed", "7"},
                           {"ckpt.chunk", s_ckpt_chunk}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (kv[i][1])
            st_writer_meta(w, kv[i][0], kv[i][1], err, sizeof err);
    if (st_writer_save(w, path, err, sizeof err) < 0)
        fprintf(stderr, "cannot write %s: %s\n", path, err);
    st_writer_destroy(&w);
}

static void test_resume(void)
{
    char dir[] = "/tmp/ddpipe-test-train-opts-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char path[256], line[512], err[256];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    write_ckpt(path, "2", "23", "64", "10");
    train_resume_t r;
    CHECK(train_resume_read(dir, &r, err, sizeof err) == 0, "read: %s", err);
    CHECK(r.epoch == 2 && r.step == 23 && r.start_step == 3 && r.streak == 1 && r.seed == 7 &&
          r.global_batch == 64, "resume %ld %ld %ld %ld", r.epoch, r.step, r.start_step, r.streak);

    train_options_t o;
    snprintf(line, sizeof line, "--data idx:x --model wideresnet --out %s --epochs 5 --workers 2 "
             "--batch-size 32 --resume %s", dir, dir);
    CHECK(parse(&o, line) == 0 && o.resuming && o.seed == 7, "resume parse");
    snprintf(line, sizeof line, "--data idx:x --model wideresnet --out %s --epochs 5 --workers 3 "
             "--batch-size 32 --resume %s", dir, dir);
    CHECK(parse(&o, line) < 0, "a different global batch must be refused");
    snprintf(line, sizeof line, "--data idx:x --model wideresnet --out %s --epochs 2 --global-batch-size 64 "
             "--resume %s", dir, dir);
    CHECK(parse(&o, line) < 0, "nothing left to do must be refused");
    snprintf(line, sizeof line, "--data idx:x --model wideresnet --out %s --epochs 5 --global-batch-size 64 "
             "--seed 8 --resume %s", dir, dir);
    CHECK(parse(&o, line) < 0, "a different seed must be refused");
    /* a checkpoint without ckpt.chunk (an older build): any --chunk */
    CHECK(r.chunk == -1, "no ckpt.chunk: %ld", r.chunk);
    snprintf(line, sizeof line, "--data idx:x --model wideresnet --out %s --epochs 5 "
             "--global-batch-size 64 --chunk 8 --resume %s", dir, dir);
    CHECK(parse(&o, line) == 0, "--chunk resuming a checkpoint without ckpt.chunk");
    /* with it: the same --chunk only */
    s_ckpt_chunk = "8";
    write_ckpt(path, "2", "23", "64", "10");
    CHECK(train_resume_read(dir, &r, err, sizeof err) == 0 && r.chunk == 8, "ckpt.chunk 8");
    CHECK(parse(&o, line) == 0, "the same --chunk resumes");
    snprintf(line, sizeof line, "--data idx:x --model wideresnet --out %s --epochs 5 "
             "--global-batch-size 64 --resume %s", dir, dir);
    CHECK(parse(&o, line) < 0, "no --chunk resuming a --chunk 8 checkpoint must be refused");
    snprintf(line, sizeof line, "--data idx:x --model wideresnet --out %s --epochs 5 "
             "--global-batch-size 64 --chunk 4 --resume %s", dir, dir);
    CHECK(parse(&o, line) < 0, "--chunk 4 resuming a --chunk 8 checkpoint must be refused");
    s_ckpt_chunk = "0";
    write_ckpt(path, "2", "23", "64", "10");
    snprintf(line, sizeof line, "--data idx:x --model wideresnet --out %s --epochs 5 "
             "--global-batch-size 64 --chunk 8 --resume %s", dir, dir);
    CHECK(parse(&o, line) < 0, "--chunk 8 resuming a checkpoint without it must be refused");
    s_ckpt_chunk = NULL;

    write_ckpt(path, "2", "35", "64", "10"); /* step beyond the epoch */
    CHECK(train_resume_read(dir, &r, err, sizeof err) < 0 && strstr(err, "inconsistent"), "bad step: %s", err);
    /* the first epoch's count may be 0 (learned at its end): the steps done are `step` */
    write_ckpt(path, "0", "3", "64", "0");
    CHECK(train_resume_read(dir, &r, err, sizeof err) == 0 && r.start_step == 3,
          "first-epoch checkpoint: %s", err);
    write_ckpt(path, "1", "3", "64", "0"); /* a later epoch needs the count */
    CHECK(train_resume_read(dir, &r, err, sizeof err) < 0 && strstr(err, "inconsistent"),
          "epoch 1 without steps per epoch: %s", err);
    write_ckpt(path, "2", "23", NULL, "10");
    CHECK(train_resume_read(path, &r, err, sizeof err) < 0 && strstr(err, "ckpt.global_batch"),
          "missing key: %s", err);
    unlink(path);
    CHECK(train_resume_read(dir, &r, err, sizeof err) < 0, "missing file");
    rmdir(dir);
}

/* Default threads: every core shared below 8 cores; from 8, one core in 8
 * for decoding and the rest split over the workers; given values stay. */
static void test_default_threads(void)
{
    static const struct {
        long cores, workers, threads, loader;
    } cases[] = {{1, 1, 1, 1},   {2, 1, 2, 2},   {2, 2, 1, 2},   {2, 4, 1, 2},  {7, 2, 3, 7},
                 {8, 1, 7, 1},   {8, 2, 3, 1},   {16, 2, 7, 2},  {16, 1, 14, 2}, {64, 8, 7, 8},
                 {16, 32, 1, 2}, {0, 1, 1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        long t = 0, l = 0;
        dd_threads_for(cases[i].cores, cases[i].workers, &t, &l);
        CHECK(t == cases[i].threads && l == cases[i].loader,
              "%ld cores, %ld workers: threads %ld loader %ld, want %ld %ld", cases[i].cores,
              cases[i].workers, t, l, cases[i].threads, cases[i].loader);
    }
    long t = 5, l = 3;
    dd_threads_for(16, 2, &t, &l);
    CHECK(t == 5 && l == 3, "given threads changed: %ld %ld", t, l);
}

/* --chunk: a fixed global batch that it divides, on cuda not with
 * engines timed per gpud; several
 * loaderds and --wire jpeg keep the chunks and are allowed. */
static void test_chunk(void)
{
    train_options_t o;
#define BASE "--data idx:x --model wideresnet --out /tmp/r "
    CHECK(parse(&o, BASE "--workers 3 --global-batch-size 96 --chunk 8") == 0 && o.chunk == 8 &&
              o.global_batch == 96, "--chunk 8 with G 96");
    CHECK(parse(&o, BASE "--workers 3 --global-batch-size 96") == 0 && o.chunk == 0,
          "no --chunk: 0 (off)");
    CHECK(parse(&o, BASE "--workers 3 --global-batch-size 96 --chunk 0") == 0 && o.chunk == 0,
          "--chunk 0: off");
    CHECK(parse(&o, BASE "--workers 2 --batch-size 48 --chunk 8") < 0,
          "--chunk without --global-batch-size refused");
    CHECK(parse(&o, BASE "--workers 2 --global-batch-size 100 --chunk 8") < 0,
          "G not a multiple of --chunk refused");
    CHECK(parse(&o, BASE "--workers 2 --global-batch-size 96 --chunk 8 --device cuda") == 0,
          "--chunk on cuda");
    setenv("DDPIPE_CUDNN_TUNE", "1", 1);
    CHECK(parse(&o, BASE "--workers 2 --global-batch-size 96 --chunk 8 --device cuda") < 0,
          "--chunk on cuda with DDPIPE_CUDNN_TUNE=1 refused");
    unsetenv("DDPIPE_CUDNN_TUNE");
    CHECK(parse(&o, BASE "--workers 2 --global-batch-size 96 --device cuda") == 0,
          "cuda without --chunk still accepted");
    CHECK(parse(&o, BASE "--workers 2 --global-batch-size 96 --chunk 8 --loaders 2") == 0,
          "--chunk with several loaderds");
    CHECK(parse(&o, BASE "--workers 2 --global-batch-size 96 --chunk 8 --wire jpeg") == 0,
          "--chunk with --wire jpeg");
    CHECK(parse(&o, BASE "--workers 8 --global-batch-size 16 --chunk 8 --quiet") == 0,
          "fewer chunks than workers: a note, not an error");
    CHECK(parse(&o, BASE "--global-batch-size 96 --chunk -1") < 0, "--chunk -1 refused");
#undef BASE
}

static void test_val_limit(void)
{
    train_options_t o;
#define BASE "--data idx:x --model wideresnet --out /tmp/r --limit 100 "
    CHECK(parse(&o, BASE "--val idx:v") == 0 && o.val_limit == -1, "no --val-limit: --limit's");
    CHECK(parse(&o, BASE "--val idx:v --val-limit 0") == 0 && o.val_limit == 0,
          "--val-limit 0: the whole --val set");
    CHECK(parse(&o, BASE "--val idx:v --val-limit 500") == 0 && o.val_limit == 500,
          "--val-limit above --limit");
    CHECK(parse(&o, BASE "--val-limit 500") < 0, "--val-limit without --val refused");
    CHECK(parse(&o, BASE "--val idx:v --val-limit -1") < 0, "--val-limit -1 refused");
#undef BASE
}

int main(void)
{
    test_default_threads();
    test_py_float_str();
    test_batches_and_names();
    test_resume();
    test_launcher();
    test_chunk();
    test_val_limit();
    if (s_fail)
        fprintf(stderr, "%d failed\n", s_fail);
    else
        printf("test_train_options: all passed\n");
    return s_fail ? 1 : 0;
}
