/* bench_model — what the ResNet-18 step benchmarks (train_resnet18 on the
 * CPU backends, cuda_resnet18 on the GPU) share so their numbers stay
 * comparable: the same pseudo-random batch, the same labels and the same
 * plain SGD update. Header-only:
 * each benchmark is one source file built by its backend's CMakeLists. */
#ifndef DDP_BENCH_MODEL_H
#define DDP_BENCH_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <stdio.h>

#include "gpud/backend_arena.h"
#include "gpud/model.h"
#include "gpud/optim/optim.h"

/* ImageNet normalisation, as gpud applies it to resnet18's input. */
static const float BENCH_MEAN[3] = {0.485f, 0.456f, 0.406f};
static const float BENCH_STD[3] = {0.229f, 0.224f, 0.225f};

/* n pixels of an LCG stream from seed 1: the same batch every run. */
static inline void bench_pixels(uint8_t *px, size_t n)
{
    uint32_t s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        px[i] = (uint8_t)(s >> 24);
    }
}

/* Labels spread over every class, so the loss is not a degenerate case. */
static inline void bench_labels(int32_t *labels, size_t n, int classes)
{
    for (size_t i = 0; i < n; i++)
        labels[i] = (int32_t)(i * 7919 % (size_t)classes);
}

/* Plain SGD (torch.optim.SGD without momentum: w -= lr * g) over every
 * trainable parameter, as the model's arena's optimizer slot: on the host
 * for cpu/ref, device kernels on cuda, where the parameters are device
 * memory the host cannot touch. Running stats are left to BatchNorm.
 * NULL with the reason printed. */
static inline optim_t *bench_sgd_new(model_t *m)
{
    char err[512];
    optim_cfg_t c = optim_cfg_default(OPTIM_SGD);
    optim_t *o = optim_new(&c, err, sizeof err);
    for (int i = 0; o && i < model_param_count(m); i++) {
        model_param_t p;
        if (model_param_at(m, i, &p) == 0 && p.grad &&
            optim_add_param(o, p.name, p.value, p.grad, p.ndim, p.shape, 1, err, sizeof err) < 0)
            optim_destroy(&o);
    }
    if (o && optim_set_arena(o, model_params_arena(m)->ops, NULL, err, sizeof err) < 0)
        optim_destroy(&o);
    if (!o)
        fprintf(stderr, "bench: SGD: %s\n", err);
    return o;
}

static inline void bench_sgd(optim_t *o, float lr)
{
    optim_step(o, lr);
}

#endif
