/* cuda_resnet18 — ResNet-18 throughput of ddpipe's cuda backend, as gpud
 * runs it: model_forward_u8 (eval, normalisation included) or
 * model_train_step_u8 + a plain SGD update (train) on batches of uint8
 * images. Compare with bench/cuda_resnet18_torch.py on the same GPU; both are
 * run by scripts/gpu-check.sh.
 *
 *   cuda_resnet18 eval|train [--batch 256] [--iters 10] [--warmup 2]
 *                 [--size 224] [--precision fp32|tf32|bf16|fp16] [--weights W]
 *                 [--arch resnet18|resnet50] [--micro-batch N] [--segments N]
 *                 [--verbose]
 *
 * --segments N (train): a grad queue as a multi-rank job's buckets set
 * (model_set_grad_queue): its mark says "flush" every ceil(G / N)
 * gradients, its flush queues nothing, so the recorded pass runs in about
 * N segments with the host's marks between them: what cutting the pass
 * where buckets go costs against one recording (no sum is made: one
 * process). DDPIPE_CUDA_GRAPHS=0 gives the op-by-op step beside it.
 *
 * --micro-batch N (eval; default: the batch): the model's micro-batch, as
 * gpud's --micro-batch (gpud's default 16): a batch then runs as several
 * forwards, the next one's input staged while the one before runs.
 *
 * eval runs as gpud's eval job does (gpud/eval.c): a batch's forward
 * queued (model_eval_begin_u8), the next batch's first micro-batch staged
 * while it runs (model_eval_stage_u8: the host's copy of its bytes
 * overlaps the device's work), then its logits read (model_eval_end).
 * DDPIPE_EVAL_OVERLAP=0: each batch and micro-batch written, run and read
 * in turn (model_forward.c), gpud's too. train likewise runs as gpud's
 * trainer: the step queued (model_train_begin_u8), the next step's batch
 * staged while it runs (model_train_stage_u8), its outputs read
 * (model_train_end), then the update; DDPIPE_TRAIN_OVERLAP=0 in turn.
 *
 * --verbose: the engine's debug lines too (a graph's plan, its recording
 * and replays, as gpud --verbose logs them).
 *
 * --arch resnet50: torchvision's ResNet-50 with PyTorch-default initial
 * weights (seed 1; no weights file), the second training bar;
 * --weights is for resnet18 (default: the test golden's).
 *
 * bf16: --precision bf16 (eval: the inference plan in bf16 NHWC on tensor
 * cores, gpud/cuda/cuda_infer.c; train: autocast's rounding points on fp32
 * buffers, convolutions on TF32 tensor cores, docs/CUDA.md "bf16 training").
 * fp16: train, the same with fp16 values and gpud's dynamic loss
 * scaling per step (the loss's gradient times S, the device scan for
 * inf/NaN, the unscale, GradScaler's update: docs/FP16.md), the peer of
 * cuda_resnet18_torch.py --mode cl-amp (autocast float16 + GradScaler);
 * eval, the inference plan in fp16 NHWC (BatchNorm folded, as bf16's:
 * docs/FP16.md "The inference plan"; DDPIPE_FP16_EVAL=tape: the tape with
 * autocast's rounding points), the peer of cl-amp's eval.
 *
 * Prints one line: "ddpipe-cuda ARCH MODE img/s=X ... device=NAME".
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_model.h"
#include "common/clock.h"
#include "common/log.h"
#include "gpud/backend.h"
#include "gpud/cuda/cuda_backend.h"
#include "gpud/backend_arena.h"
#include "gpud/loss_scale.h"
#include "gpud/model.h"

typedef struct {
    const char *mode, *weights, *precision, *arch;
    long batch, iters, warmup, size, micro, segments;
} opts_t;

/* --segments: the stand-in grad queue */
static struct {
    int every, waiting;
    long flushes;
} s_q;

static int q_mark(void *ctx, const float *grad)
{
    (void)ctx;
    (void)grad;
    return ++s_q.waiting >= s_q.every;
}

static void q_flush(void *ctx)
{
    (void)ctx;
    s_q.waiting = 0;
    s_q.flushes++;
}

static int parse(int argc, char **argv, opts_t *o)
{
    static const struct option longs[] = {
        {"batch", 1, 0, 'b'},  {"iters", 1, 0, 'i'},     {"warmup", 1, 0, 'u'},
        {"size", 1, 0, 's'},   {"precision", 1, 0, 'p'}, {"weights", 1, 0, 'w'},
        {"arch", 1, 0, 'a'},   {"micro-batch", 1, 0, 'm'}, {"segments", 1, 0, 'g'},
        {"verbose", 0, 0, 'v'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'b': o->batch = atol(optarg); break;
        case 'i': o->iters = atol(optarg); break;
        case 'u': o->warmup = atol(optarg); break;
        case 's': o->size = atol(optarg); break;
        case 'p': o->precision = optarg; break;
        case 'w': o->weights = optarg; break;
        case 'a': o->arch = optarg; break;
        case 'm': o->micro = atol(optarg); break;
        case 'g': o->segments = atol(optarg); break;
        case 'v': log_init("cuda_resnet18", -1, 1); break;
        default: return -1;
        }
    }
    if (optind != argc - 1 || (strcmp(argv[optind], "eval") && strcmp(argv[optind], "train")) ||
        o->batch < 1 || o->batch > MODEL_MAX_MICRO_BATCH || o->iters < 1 || o->warmup < 0 ||
        o->size < 32 || o->micro < 0 || o->micro > o->batch ||
        (o->micro && strcmp(argv[optind], "eval")) || o->segments < 0 || o->segments > 64 ||
        (o->segments && strcmp(argv[optind], "train"))) {
        fprintf(stderr, "usage: cuda_resnet18 eval|train [--batch 1..%d] [--iters N] "
                "[--warmup N] [--size 224] [--precision fp32|tf32|bf16|fp16] [--weights W] "
                "[--arch resnet18|resnet50] [--micro-batch 1..batch (eval)] "
                "[--segments 1..64 (train)] [--verbose]\n",
                MODEL_MAX_MICRO_BATCH);
        return -1;
    }
    o->mode = argv[optind];
    if (strcmp(o->arch, "resnet18") && strcmp(o->arch, "resnet50")) {
        fprintf(stderr, "cuda_resnet18: --arch %s: resnet18 or resnet50\n", o->arch);
        return -1;
    }
    if (strcmp(o->precision, "fp32") && strcmp(o->precision, "tf32") &&
        strcmp(o->precision, "bf16") && strcmp(o->precision, "fp16")) {
        fprintf(stderr, "cuda_resnet18: --precision %s: fp32, tf32, bf16 or fp16\n",
                o->precision);
        return -1;
    }
    return 0;
}

/* fp16: the trainer's unscale (gpud/trainer.c) on the grads arena: 1 when
 * a gradient is inf/NaN (the step is skipped), 0 after dividing by S, -1
 * when the device scan or kernel failed; then GradScaler's update. */
static int bench_unscale(model_t *m, loss_scale_t *ls)
{
    const bk_arena_t *a = model_grads_arena(m);
    int64_t at = -1;
    if (bk_arena_scan(a, 0, a->floats, &at) < 0 ||
        (at < 0 && bk_arena_scale(a, 0, a->floats, 1.0f / ls->scale) < 0))
        return -1;
    loss_scale_update(ls, at >= 0);
    return at >= 0;
}

int main(int argc, char **argv)
{
    opts_t o = {NULL, "tests/golden/resnet18.safetensors", "fp32", "resnet18", 256, 10, 2, 224, 0,
                0};
    if (parse(argc, argv, &o) < 0)
        return 2;
    int bf16 = strcmp(o.precision, "bf16") == 0, fp16 = strcmp(o.precision, "fp16") == 0;
    /* bf16/fp16 is the model's precision; the backend's float math stays fp32 */
    setenv("DDPIPE_CUDA_PRECISION", bf16 || fp16 ? "fp32" : o.precision, 1);
    char err[512], device[256] = "?";
    backend_t *be = backend_new("cuda", 1, err, sizeof err);
    if (!be) {
        fprintf(stderr, "cuda_resnet18: %s\n", err);
        return 1;
    }
    snprintf(device, sizeof device, "%s", cuda_backend_device_name(be));
    backend_destroy(&be);
    int train = strcmp(o.mode, "train") == 0;
    int r50 = strcmp(o.arch, "resnet50") == 0;
    model_opts_t mo = {.arch = o.arch, .threads = 1,
                       .micro_batch = (int)(o.micro ? o.micro : o.batch),
                       .train = train, .bf16 = bf16, .fp16 = fp16, .init = r50,
                       .init_seed = 1};
    if (r50) {   /* torchvision's defaults */
        mo.num_classes = 1000;
        mo.in_channels = 3;
    }
    model_t *m = model_new(&mo, "cuda", r50 ? NULL : o.weights, err, sizeof err);
    if (!m) {
        fprintf(stderr, "cuda_resnet18: %s\n", err);
        return 1;
    }
    optim_t *sgd = train ? bench_sgd_new(m) : NULL;
    if (train && !sgd)
        return 1;
    if (o.segments) {
        int grads = 0;
        for (int i = 0; i < model_param_count(m); i++) {
            model_param_t p;
            grads += model_param_at(m, i, &p) == 0 && p.grad;
        }
        s_q.every = (grads + (int)o.segments - 1) / (int)o.segments;
        if (model_set_grad_queue(m, q_mark, q_flush, NULL) < 0) {
            fprintf(stderr, "cuda_resnet18: the model refuses the grad queue\n");
            return 1;
        }
    }
    size_t per = 3 * (size_t)o.size * o.size, n = (size_t)o.batch;
    uint8_t *px = malloc(n * per);
    float *logits = malloc(n * model_num_classes(m) * sizeof *logits);
    int32_t *labels = malloc(n * sizeof *labels);
    if (!px || !logits || !labels) {
        fprintf(stderr, "cuda_resnet18: out of memory\n");
        return 1;
    }
    bench_pixels(px, n * per);
    bench_labels(labels, n, model_num_classes(m));
    int rc = 0;
    double best = 1e30, total = 0;
    loss_scale_t ls = loss_scale_new(LOSS_SCALE_INIT, LOSS_SCALE_INTERVAL);
    for (long it = 0; it < o.warmup + o.iters && rc == 0; it++) {
        double a = clock_mono_s();
        if (train) {
            model_step_t st = {.global_batch = (int)o.batch, .seed = 1, .step = (uint64_t)it,
                               .loss_scale = fp16 ? ls.scale : 0};
            s_q.waiting = 0;   /* a step's buckets begin (bucket_issue_begin) */
            /* as gpud's trainer: the step queued, the next step's batch
             * staged while it runs, then its outputs read */
            rc = model_train_begin_u8(m, px, (int)n, 3, (int)o.size, (int)o.size, BENCH_MEAN,
                                      BENCH_STD, labels, &st, NULL, logits, err, sizeof err);
            if (rc == 0 && it + 1 < o.warmup + o.iters && model_train_overlap() &&
                model_train_stage_u8(m, px, (int)n, 3, (int)o.size, (int)o.size, BENCH_MEAN,
                                     BENCH_STD, err, sizeof err) < 0)
                rc = -1;
            if (rc == 0)
                rc = model_train_end(m, err, sizeof err);
            int skip = rc == 0 && fp16 ? bench_unscale(m, &ls) : 0;
            if (skip < 0) {
                snprintf(err, sizeof err, "the loss scaler's scan or unscale failed");
                rc = -1;
            }
            if (rc == 0 && !skip)
                bench_sgd(sgd, 0.01f);
        } else {
            /* as gpud's eval job: the batch's forward queued, the next
             * batch staged while it runs, then its logits read */
            rc = model_eval_begin_u8(m, px, (int)n, 3, (int)o.size, (int)o.size, BENCH_MEAN,
                                     BENCH_STD, logits, err, sizeof err);
            if (rc == 0 && it + 1 < o.warmup + o.iters &&
                model_eval_stage_u8(m, px, (int)n, 3, (int)o.size, (int)o.size, BENCH_MEAN,
                                    BENCH_STD, err, sizeof err) < 0)
                rc = -1;
            if (rc == 0)
                rc = model_eval_end(m, err, sizeof err);
        }
        double dt = clock_mono_s() - a;
        if (it >= o.warmup) {
            total += dt;
            best = dt < best ? dt : best;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "cuda_resnet18: %s\n", err);
        return 1;
    }
    printf("ddpipe-cuda %s %s img/s=%.1f best_img/s=%.1f batch=%ld iters=%ld size=%ld "
           "precision=%s device=%s", o.arch, o.mode, (double)n * o.iters / total, (double)n / best,
           o.batch, o.iters, o.size, o.precision, device);
    if (o.micro)
        printf(" micro_batch=%ld", o.micro);
    if (fp16 && train)
        printf(" skipped_steps=%lld loss_scale=%g", (long long)ls.skipped, (double)ls.scale);
    if (o.segments)
        printf(" segments=%ld flushes_per_step=%.1f", o.segments,
               (double)s_q.flushes / (double)(o.warmup + o.iters));
    printf("\n");
    optim_destroy(&sgd);
    model_destroy(&m);
    free(px);
    free(logits);
    free(labels);
    return 0;
}
