/* eval_resnet18 — ResNet-18 eval throughput of ddpipe's compute engine:
 * model_forward_u8 (normalisation included) on batches of uint8 224x224
 * images, as gpud runs it. Compare with bench/eval_resnet18_torch.py; both
 * are driven by bench/resnet18_vs_torch.sh eval.
 *
 *   eval_resnet18 [--weights W] [--batch 32] [--threads 2] [--iters 6]
 *                 [--warmup 1] [--micro-batch 0] [--size 224]
 *
 * Prints one line: "ddpipe resnet18 img/s=X batch=B threads=T ...".
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/flags.h"
#include "gpud/model.h"

static const float MEAN[3] = {0.485f, 0.456f, 0.406f}, STD[3] = {0.229f, 0.224f, 0.225f};

typedef struct {
    const char *weights;
    long batch, threads, iters, warmup, micro_batch, size;
    int bf16;                   /* --bf16: --precision bf16 */
} bench_opts_t;

static int parse(int argc, char **argv, bench_opts_t *o)
{
    static const struct option longs[] = {
        {"weights", required_argument, 0, 'w'}, {"batch", required_argument, 0, 'b'},
        {"threads", required_argument, 0, 't'}, {"iters", required_argument, 0, 'i'},
        {"warmup", required_argument, 0, 'u'},  {"micro-batch", required_argument, 0, 'm'},
        {"size", required_argument, 0, 's'},    {"bf16", no_argument, 0, 'f'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'w': o->weights = optarg; break;
        case 'f': o->bf16 = 1; break;
        case 'b': rc = flags_long("batch", optarg, 1, 4096, &o->batch); break;
        case 't': rc = flags_long("threads", optarg, 0, 1024, &o->threads); break;
        case 'i': rc = flags_long("iters", optarg, 1, 100000, &o->iters); break;
        case 'u': rc = flags_long("warmup", optarg, 0, 1000, &o->warmup); break;
        case 'm': rc = flags_long("micro-batch", optarg, 0, MODEL_MAX_MICRO_BATCH,
                                  &o->micro_batch); break;
        case 's': rc = flags_long("size", optarg, 32, 1024, &o->size); break;
        default:
            fprintf(stderr, "usage: eval_resnet18 [--bf16] [--weights W] [--batch 32] [--threads 2] "
                    "[--iters 6] [--warmup 1] [--micro-batch 0] [--size 224]\n");
            return -1;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}


int main(int argc, char **argv)
{
    bench_opts_t o = {"tests/golden/resnet18.safetensors", 32, 2, 6, 1, 0, 224, 0};
    if (parse(argc, argv, &o) < 0)
        return 2;
    char err[512];
    model_opts_t mo = {.arch = "resnet18", .threads = (int)o.threads, .bf16 = o.bf16,
                       .micro_batch = (int)o.micro_batch};
    double t0 = clock_mono_s();
    model_t *m = model_new(&mo, "cpu", o.weights, err, sizeof err);
    if (!m) {
        fprintf(stderr, "eval_resnet18: %s\n", err);
        return 1;
    }
    double t_load = clock_mono_s() - t0;
    size_t per = 3 * (size_t)o.size * o.size;
    uint8_t *px = malloc((size_t)o.batch * per);
    float *logits = malloc((size_t)o.batch * model_num_classes(m) * sizeof *logits);
    if (!px || !logits) {
        fprintf(stderr, "eval_resnet18: out of memory\n");
        return 1;
    }
    uint32_t s = 1;
    for (size_t i = 0; i < (size_t)o.batch * per; i++) {
        s = s * 1664525u + 1013904223u;
        px[i] = (uint8_t)(s >> 24);
    }
    int rc = 0;
    double best = 1e30, total = 0, cpu = 0;
    for (long it = 0; it < o.warmup + o.iters && rc == 0; it++) {
        double a = clock_mono_s(), c0 = clock_cpu_s();
        rc = model_forward_u8(m, px, (int)o.batch, 3, (int)o.size, (int)o.size, MEAN, STD,
                              logits, err, sizeof err);
        double dt = clock_mono_s() - a;
        if (it >= o.warmup) {
            cpu += clock_cpu_s() - c0;
            total += dt;
            best = dt < best ? dt : best;
        }
    }
    if (rc != 0) {
        fprintf(stderr, "eval_resnet18: %s\n", err);
        return 1;
    }
    printf("ddpipe resnet18 img/s=%.2f best_img/s=%.2f batch=%ld threads=%ld iters=%ld "
           "micro_batch=%d size=%ld load_s=%.2f cpu_ms/img=%.1f precision=%s\n",
           (double)o.batch * o.iters / total, (double)o.batch / best, o.batch, o.threads, o.iters,
           model_micro_batch(m), o.size, t_load, 1e3 * cpu / ((double)o.batch * o.iters),
           model_precision(m));
    model_destroy(&m);
    free(px);
    free(logits);
    return 0;
}
