/* train_resnet18 — ResNet-18 training-step throughput of ddpipe's compute
 * engine: model_train_step_u8 (normalise, forward in training mode with
 * batch-statistics BatchNorm, softmax cross-entropy, backward of every
 * layer) plus a plain SGD update of every parameter in place, on batches
 * of uint8 224x224 images, as gpud runs a training step on one worker.
 * Compare with bench/train_resnet18_torch.py; bench/resnet18_vs_torch.sh train runs
 * both interleaved.
 *
 *   train_resnet18 [--weights W] [--batch 32] [--threads 2] [--iters 3]
 *                  [--warmup 1] [--size 224] [--backend cpu]
 *
 * Prints one line: "ddpipe resnet18-train img/s=X batch=B threads=T ...".
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_model.h"
#include "common/clock.h"
#include "common/flags.h"
#include "gpud/model.h"

typedef struct {
    const char *weights, *backend;
    long batch, threads, iters, warmup, size;
    int bf16;                   /* --bf16: --precision bf16 */
} bench_opts_t;

static int parse(int argc, char **argv, bench_opts_t *o)
{
    static const struct option longs[] = {
        {"weights", required_argument, 0, 'w'}, {"batch", required_argument, 0, 'b'},
        {"threads", required_argument, 0, 't'}, {"iters", required_argument, 0, 'i'},
        {"warmup", required_argument, 0, 'u'},  {"size", required_argument, 0, 's'},
        {"backend", required_argument, 0, 'k'}, {"bf16", no_argument, 0, 'f'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'w': o->weights = optarg; break;
        case 'f': o->bf16 = 1; break;
        case 'k': o->backend = optarg; break;
        case 'b': rc = flags_long("batch", optarg, 1, 4096, &o->batch); break;
        case 't': rc = flags_long("threads", optarg, 0, 1024, &o->threads); break;
        case 'i': rc = flags_long("iters", optarg, 1, 100000, &o->iters); break;
        case 'u': rc = flags_long("warmup", optarg, 0, 1000, &o->warmup); break;
        case 's': rc = flags_long("size", optarg, 32, 1024, &o->size); break;
        default:
            fprintf(stderr, "usage: train_resnet18 [--bf16] [--weights W] [--batch 32] [--threads 2] "
                    "[--iters 3] [--warmup 1] [--size 224] [--backend cpu]\n");
            return -1;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts_t o = {"tests/golden/resnet18.safetensors", "cpu", 32, 2, 3, 1, 224, 0};
    if (parse(argc, argv, &o) < 0)
        return 2;
    char err[512];
    model_opts_t mo = {.arch = "resnet18", .threads = (int)o.threads, .bf16 = o.bf16, .train = 1};
    model_t *m = model_new(&mo, o.backend, o.weights, err, sizeof err);
    if (!m) {
        fprintf(stderr, "train_resnet18: %s\n", err);
        return 1;
    }
    optim_t *sgd = bench_sgd_new(m);
    if (!sgd)
        return 1;
    size_t per = 3 * (size_t)o.size * o.size;
    uint8_t *px = malloc((size_t)o.batch * per);
    int32_t *labels = malloc((size_t)o.batch * sizeof *labels);
    float *loss = malloc((size_t)o.batch * sizeof *loss);
    if (!px || !labels || !loss) {
        fprintf(stderr, "train_resnet18: out of memory\n");
        return 1;
    }
    bench_pixels(px, (size_t)o.batch * per);
    bench_labels(labels, (size_t)o.batch, model_num_classes(m));
    int rc = 0;
    double best = 1e30, total = 0, cpu = 0, first = 0;
    for (long it = 0; it < o.warmup + o.iters && rc == 0; it++) {
        double a = clock_mono_s(), c0 = clock_cpu_s();
        model_step_t st = {.global_batch = (int)o.batch, .seed = 1, .step = (uint64_t)it};
        rc = model_train_step_u8(m, px, (int)o.batch, 3, (int)o.size, (int)o.size, BENCH_MEAN,
                                 BENCH_STD, labels, &st, loss, NULL, err, sizeof err);
        bench_sgd(sgd, 0.01f);
        double dt = clock_mono_s() - a;
        if (it == 0)
            first = dt;
        if (it >= o.warmup) {
            cpu += clock_cpu_s() - c0;
            total += dt;
            best = dt < best ? dt : best;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "train_resnet18: %s\n", err);
        return 1;
    }
    double mean_loss = 0;
    for (long i = 0; i < o.batch; i++)
        mean_loss += loss[i] / o.batch;
    printf("ddpipe resnet18-train img/s=%.2f best_img/s=%.2f batch=%ld threads=%ld iters=%ld "
           "size=%ld first_step_s=%.2f cpu_ms/img=%.1f last_loss=%.3f precision=%s\n",
           (double)o.batch * o.iters / total, (double)o.batch / best, o.batch, o.threads, o.iters,
           o.size, first, 1e3 * cpu / ((double)o.batch * o.iters), mean_loss,
           model_precision(m));
    optim_destroy(&sgd);
    model_destroy(&m);
    free(px);
    free(labels);
    free(loss);
    return 0;
}
