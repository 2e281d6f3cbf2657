/* train_fmnist — a short Fashion-MNIST training run of ddpipe's compute
 * engine in one process, to set its loss curve beside PyTorch's
 * (bench/train_fmnist_torch.py writes the initial weights and the data
 * order; bench/run_train_fmnist.sh runs both and prints the table).
 *
 * The seed WideResNet opened for training from DIR/init.safetensors; step k
 * takes the images order[k*B .. k*B+B) of the training set (DIR/order.u32,
 * little-endian u32), ToTensor only (x/255), model_train_step_u8 with
 * global_batch B and dropout off, then SGD (lr, momentum 0.9, no weight
 * decay) through gpud/optim — what torch.optim.SGD does. After the last
 * step: model_sync_eval and top-1 on the first TEST t10k images.
 *
 *   train_fmnist --dir DIR [--data /usr/share/datasets/fashion-mnist]
 *                [--steps 200] [--batch 64] [--lr 0.05] [--threads 2]
 *                [--test 2000] [--channels 8,16,32,64]
 *
 * Prints "step K loss L" per step (the batch's mean loss), then one line
 * "ddpipe fmnist-train img/s=X top1=T ..." (img/s over steps 2..STEPS: the
 * first step also compiles the training graph).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/dataset.h"
#include "common/errbuf.h"
#include "common/flags.h"
#include "gpud/model.h"
#include "gpud/optim/optim.h"

#define SIDE 28
#define PX (SIDE * SIDE)

typedef struct {
    const char *dir, *data;
    long steps, batch, threads, test;
    double lr;
    int channels[4], n_channels;
    int bf16;   /* --bf16: --precision bf16 (the torch side stays fp32) */
} fm_opts_t;

static int parse(int argc, char **argv, fm_opts_t *o)
{
    static const struct option longs[] = {
        {"dir", required_argument, 0, 'd'},      {"data", required_argument, 0, 'D'},
        {"steps", required_argument, 0, 's'},    {"batch", required_argument, 0, 'b'},
        {"lr", required_argument, 0, 'l'},       {"threads", required_argument, 0, 't'},
        {"test", required_argument, 0, 'T'},     {"channels", required_argument, 0, 'c'},
        {"bf16", no_argument, 0, 'f'},           {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'd': o->dir = optarg; break;
        case 'f': o->bf16 = 1; break;
        case 'D': o->data = optarg; break;
        case 's': rc = flags_long("steps", optarg, 1, 100000, &o->steps); break;
        case 'b': rc = flags_long("batch", optarg, 1, 4096, &o->batch); break;
        case 'l': rc = flags_double("lr", optarg, 0, 10, &o->lr); break;
        case 't': rc = flags_long("threads", optarg, 0, 1024, &o->threads); break;
        case 'T': rc = flags_long("test", optarg, 1, 10000, &o->test); break;
        case 'c': rc = flags_ints("channels", optarg, o->channels, 4, &o->n_channels); break;
        default: rc = -1; break;
        }
        if (rc < 0)
            goto usage;
    }
    if (o->dir && o->n_channels == 4)
        return 0;
usage:
    fprintf(stderr, "usage: train_fmnist --dir DIR [--data DIR] [--steps 200] [--batch 64] "
            "[--lr 0.05] [--threads 2] [--test 2000] [--channels 8,16,32,64] [--bf16]\n"
            "  DIR holds init.safetensors and order.u32 (bench/train_fmnist_torch.py)\n");
    return -1;
}

/* The data order: n little-endian u32 sample ids, each < size. NULL after
 * printing why. */
static uint32_t *read_order(const char *dir, size_t n, uint64_t size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/order.u32", dir);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "train_fmnist: %s: %s (run bench/train_fmnist_torch.py first)\n", path,
                strerror(errno));
        return NULL;
    }
    uint32_t *ord = malloc(n * sizeof *ord);
    uint8_t b[4];
    size_t i = 0;
    int bad = 0;
    for (; ord && !bad && i < n && fread(b, 1, 4, f) == 4; i++) {
        ord[i] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                 (uint32_t)b[3] << 24;
        bad = ord[i] >= size;
    }
    fclose(f);
    if (ord && !bad && i == n)
        return ord;
    if (!ord)
        fprintf(stderr, "train_fmnist: out of memory for the order\n");
    else if (bad)
        fprintf(stderr, "train_fmnist: %s: id %u at %zu is past the %llu training images\n",
                path, ord[i - 1], i - 1, (unsigned long long)size);
    else
        fprintf(stderr, "train_fmnist: %s has %zu ids, steps x batch need %zu\n", path, i, n);
    free(ord);
    return NULL;
}

static dataset_t *open_idx(const char *data, const char *split)
{
    char spec[1024], err[512];
    snprintf(spec, sizeof spec, "idx:%s/%s", data, split);
    dataset_t *ds = dataset_open(spec, err, sizeof err);
    if (!ds)
        fprintf(stderr, "train_fmnist: %s\n", err);
    return ds;
}

/* Pixels (n x 1 x 28 x 28) and labels of samples ids[0..n), or of 0..n-1
 * when ids is NULL. */
static int gather(const dataset_t *ds, const uint32_t *ids, size_t n, uint8_t *px,
                  int32_t *labels)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t id = ids ? ids[i] : i;
        int h = 0, w = 0;
        const uint8_t *p = dataset_idx_pixels(ds, id, &h, &w);
        if (!p || h != SIDE || w != SIDE) {
            fprintf(stderr, "train_fmnist: sample %llu: not a 28x28 image\n",
                    (unsigned long long)id);
            return -1;
        }
        memcpy(px + i * PX, p, PX);
        labels[i] = dataset_label(ds, id);
    }
    return 0;
}

static model_t *open_model(const fm_opts_t *o)
{
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/init.safetensors", o->dir);
    model_opts_t mo = {.arch = "wideresnet", .threads = (int)o->threads, .train = 1,
                       .n_channels = 4, .bf16 = o->bf16};
    memcpy(mo.channels, o->channels, sizeof mo.channels);
    model_t *m = model_new(&mo, "cpu", path, err, sizeof err);
    if (!m)
        fprintf(stderr, "train_fmnist: %s\n", err);
    return m;
}

/* torch.optim.SGD(model.parameters(), lr, momentum=0.9) over the model's
 * trainable parameters. */
static optim_t *sgd_new(model_t *m)
{
    char err[512];
    optim_cfg_t cfg = optim_cfg_default(OPTIM_SGD);
    cfg.momentum = 0.9;
    optim_t *opt = optim_new(&cfg, err, sizeof err);
    for (int i = 0; opt && i < model_param_count(m); i++) {
        model_param_t p;
        if (model_param_at(m, i, &p) != 0) {
            err_set(err, sizeof err, "model parameter %d unreadable", i);
            optim_destroy(&opt);
        } else if (p.grad && optim_add_param(opt, p.name, p.value, p.grad, p.ndim, p.shape, true,
                                             err, sizeof err) < 0) {
            optim_destroy(&opt);
        }
    }
    if (!opt)
        fprintf(stderr, "train_fmnist: optimizer: %s\n", err);
    return opt;
}

/* The training loop; *timed_s: wall time of steps 2..steps. */
static int train(model_t *m, optim_t *opt, const dataset_t *ds, const uint32_t *order,
                 const fm_opts_t *o, double *timed_s, double *first_s)
{
    size_t b = (size_t)o->batch;
    uint8_t *px = malloc(b * PX);
    int32_t *labels = malloc(b * sizeof *labels);
    float *loss = malloc(b * sizeof *loss);
    int rc = px && labels && loss ? 0 : -1;
    if (rc < 0)
        fprintf(stderr, "train_fmnist: out of memory for a batch\n");
    char err[512];
    *timed_s = 0;
    for (long k = 0; k < o->steps && rc == 0; k++) {
        double t0 = clock_mono_s();
        rc = gather(ds, order + (size_t)k * b, b, px, labels);
        model_step_t s = {.global_batch = (int)b, .seed = 1, .step = (uint64_t)k,
                          .ids = NULL, .no_dropout = 1};
        if (rc == 0 && model_train_step_u8(m, px, (int)b, 1, SIDE, SIDE, NULL, NULL, labels, &s,
                                           loss, NULL, err, sizeof err) != 0) {
            fprintf(stderr, "train_fmnist: step %ld: %s\n", k + 1, err);
            rc = -1;
        }
        if (rc == 0)
            optim_step(opt, o->lr);
        double dt = clock_mono_s() - t0;
        *(k == 0 ? first_s : timed_s) += dt;
        double mean = 0;
        for (size_t i = 0; rc == 0 && i < b; i++)
            mean += loss[i];
        if (rc == 0)
            printf("step %ld loss %.7f\n", k + 1, mean / (double)b);
    }
    free(px);
    free(labels);
    free(loss);
    return rc;
}

/* Top-1 of the trained weights on the first n t10k images; -1 on error. */
static double test_top1(model_t *m, const char *data, size_t n)
{
    char err[512];
    if (model_sync_eval(m, err, sizeof err) != 0) {
        fprintf(stderr, "train_fmnist: model_sync_eval: %s\n", err);
        return -1;
    }
    dataset_t *ds = open_idx(data, "t10k");
    uint8_t *px = malloc(n * PX);
    int32_t *labels = malloc(n * sizeof *labels), *top = malloc(n * sizeof *top);
    float *logits = malloc(n * 10 * sizeof *logits);
    double acc = -1;
    if (!ds || !px || !labels || !top || !logits || dataset_size(ds) < n ||
        gather(ds, NULL, n, px, labels) != 0) {
        fprintf(stderr, "train_fmnist: cannot read %zu test images\n", n);
    } else if (model_forward_u8(m, px, (int)n, 1, SIDE, SIDE, NULL, NULL, logits, err,
                                sizeof err) != 0) {
        fprintf(stderr, "train_fmnist: test forward: %s\n", err);
    } else {
        model_topk_ce(logits, (int)n, model_num_classes(m), labels, 1, top, NULL);
        size_t hit = 0;
        for (size_t i = 0; i < n; i++)
            hit += top[i] == labels[i];
        acc = (double)hit / (double)n;
    }
    dataset_destroy(&ds);
    free(px);
    free(labels);
    free(top);
    free(logits);
    return acc;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    fm_opts_t o = {.data = "/usr/share/datasets/fashion-mnist", .steps = 200, .batch = 64,
                   .threads = 2, .test = 2000, .lr = 0.05,
                   .channels = {8, 16, 32, 64}, .n_channels = 4};
    if (parse(argc, argv, &o) < 0)
        return 2;
    dataset_t *ds = open_idx(o.data, "train");
    uint32_t *order = ds ? read_order(o.dir, (size_t)(o.steps * o.batch), dataset_size(ds)) : NULL;
    model_t *m = order ? open_model(&o) : NULL;
    optim_t *opt = m ? sgd_new(m) : NULL;
    double timed = 0, first = 0, top1 = -1;
    int rc = opt ? train(m, opt, ds, order, &o, &timed, &first) : -1;
    if (rc == 0)
        top1 = test_top1(m, o.data, (size_t)o.test);
    if (top1 >= 0)
        printf("ddpipe fmnist-train img/s=%.2f top1=%.4f steps=%ld batch=%ld threads=%ld "
               "test=%ld first_step_s=%.3f precision=%s\n",
               o.steps > 1 ? (double)o.batch * (double)(o.steps - 1) / timed : 0.0, top1,
               o.steps, o.batch, o.threads, o.test, first, model_precision(m));
    optim_destroy(&opt);
    model_destroy(&m);
    free(order);
    dataset_destroy(&ds);
    return top1 >= 0 ? 0 : 1;
}
