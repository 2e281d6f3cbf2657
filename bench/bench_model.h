/* bench_model — what the ResNet-18 step benchmarks (train_resnet18 on the
 * CPU backends, cuda_resnet18 on the GPU) share so their numbers stay
 * comparable: the same pseudo-random batch, the same labels and the same
 * plain SGD update. Header-only:
 * each benchmark is one source file built by its backend's CMakeLists. */
#ifndef DDP_BENCH_MODEL_H
#define DDP_BENCH_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gpud/model.h"

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

/* w -= lr * g for every trainable parameter (what torch.optim.SGD does
 * without momentum); running stats are left to BatchNorm. */
static inline void bench_sgd(model_t *m, float lr)
{
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t p;
        if (model_param_at(m, i, &p) == 0 && p.grad)
            for (size_t j = 0; j < p.numel; j++)
                p.value[j] -= lr * p.grad[j];
    }
}

#endif
