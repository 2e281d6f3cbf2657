/* host_bn_drop — a BatchNorm with its own ReLU and the dropout after it in
 * one pass on the cpu backend's NHWC fp32 activations (bk_kernels_t.
 * bn_relu_drop, the tape's fusion, gpud/tape_fuse.c): y = dropout(relu(bn(x))).
 * WideResNet's blocks run conv, BatchNorm + ReLU, dropout, conv; apart,
 * the dropout reads and writes the whole activation once more.
 *
 * bn(x) is hk_bn_add_relu's (the value oneDNN's BatchNorm with given
 * statistics stores: scale = gamma / sqrtf(var + eps) in float, then
 * fmaf(x - mean, scale, beta)), the ReLU v > 0 ? v : +0, and the dropout
 * hk_dropout's arithmetic on that value: v * (1 / (1 - p)), its bits
 * cleared where the mask drops it, the mask drawn by the logical NCHW
 * index (gpud/dropout_key.h). So the fused pass stores the bits the two
 * ops stored. */
#include <math.h>
#include <stdlib.h>

#include "gpud/cpu/host_kernels.h"
#include "gpud/cpu/ref_ops.h"
#include "gpud/dropout_key.h"
#include "gpud/simd_clones.h"

/* What a row needs besides its x and y. */
typedef struct {
    const float *mean, *scale, *beta;
    const uint64_t *ix;      /* one sample's index mixes, NHWC order; NULL: no mask */
    uint64_t thr;
    float keep_scale;        /* 1 / (1 - p) */
} drop_row_t;

SIMD_CLONES_FMA static void row_drop(float *y, const float *x, const drop_row_t *d,
                                     const uint64_t *ix, uint64_t key, size_t c)
{
    const float *mean = d->mean, *scale = d->scale, *beta = d->beta;
    float ks = d->keep_scale;
    uint64_t thr = d->thr;
#pragma omp simd
    for (size_t j = 0; j < c; j++) {
        float v = fmaf(x[j] - mean[j], scale[j], beta[j]);
        y[j] = hk_drop_keep((v > 0.0f ? v : 0.0f) * ks, ref_dropout_bits(key, ix[j]), thr);
    }
}

SIMD_CLONES_FMA static void row_plain(float *y, const float *x, const drop_row_t *d, size_t c)
{
    const float *mean = d->mean, *scale = d->scale, *beta = d->beta;
#pragma omp simd
    for (size_t j = 0; j < c; j++) {
        float v = fmaf(x[j] - mean[j], scale[j], beta[j]);
        y[j] = v > 0.0f ? v : 0.0f;
    }
}

/* Rows [r0, r1) of rows_per sample rows each; keys: each sample's key with
 * the op mixed in. */
static void rows(float *y, const float *x, const drop_row_t *d, const uint64_t *keys,
                 size_t rows_per, size_t r0, size_t r1, size_t c)
{
    for (size_t r = r0; r < r1; r++) {
        if (d->ix)
            row_drop(y + r * c, x + r * c, d, d->ix + (r % rows_per) * c, keys[r / rows_per], c);
        else
            row_plain(y + r * c, x + r * c, d, c);
    }
}

int hk_bn_relu_drop(bk_ctx_t *g, float *y, const float *x, const int s[4], const float *gamma,
                    const float *beta, const float *mean, const float *var, float eps, float p,
                    uint32_t op, const uint64_t *keys)
{
    int n = s[0], c = s[1];
    size_t rows_per = (size_t)s[2] * s[3], npix = (size_t)n * rows_per, cc = (size_t)c;
    int masked = p != 0.0f;
    float *scale = hk_bn_scale_new(gamma, var, eps, c);
    uint64_t *ix = masked ? hk_dropout_ix_new(s, 1) : NULL;
    uint64_t *kk = masked ? malloc((size_t)(n > 0 ? n : 1) * sizeof *kk) : NULL;
    if (!scale || (masked && (!ix || !kk))) {
        free(scale);
        free(ix);
        free(kk);
        bk_ctx_fail(g, "out of memory for the BatchNorm + dropout pass (%zu rows of %d "
                    "channels)", rows_per, c);
        return -1;
    }
    drop_row_t d = {.mean = mean, .scale = scale, .beta = beta, .ix = ix};
    if (masked) {
        d.thr = ref_dropout_threshold(p);
        d.keep_scale = 1.0f / (1.0f - p);
        for (int b = 0; b < n; b++)
            kk[b] = dropout_op_key(keys[b], op);
    }
    int nt = g->be->threads > 0 ? g->be->threads : 1;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int t = 0; t < nt; t++)
        rows(y, x, &d, kk, rows_per, npix * (size_t)t / (size_t)nt,
             npix * (size_t)(t + 1) / (size_t)nt, cc);
    free(scale);
    free(ix);
    free(kk);
    return 0;
}
