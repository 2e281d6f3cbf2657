/* host_bn_add — the residual block's tail in one pass on the cpu backend's
 * NHWC fp32 activations (bk_kernels_t.bn_add_relu, the tape's fusion,
 * gpud/tape_fuse.c): y = relu(bn(x) + res).
 *
 * bn(x) is the value oneDNN's BatchNorm with given statistics stores
 * (dnnl_layers.c's cpu_bn_fwd; bnorm_jit, checked bit for bit against it):
 * the scale gamma / sqrtf(var + eps) in float, then one fused multiply-add
 * fmaf(x - mean, scale, beta). The sum and the ReLU are hk_add's. So the
 * fused pass gives the bits of the two ops it replaces, reading x and res
 * and writing y once. The hot loop is built for AVX-512 and AVX2+FMA
 * (simd_clones.h's SIMD_CLONES_FMA). */
#include <math.h>
#include <stdlib.h>

#include "gpud/cpu/host_kernels.h"
#include "gpud/simd_clones.h"

SIMD_CLONES_FMA static void rows(float *y, const float *x, const float *res, size_t r0,
                                 size_t r1, size_t c, const float *mean, const float *scale,
                                 const float *beta)
{
    for (size_t r = r0; r < r1; r++) {
        const float *px = x + r * c, *pr = res + r * c;
        float *py = y + r * c;
#pragma omp simd
        for (size_t j = 0; j < c; j++) {
            float v = fmaf(px[j] - mean[j], scale[j], beta[j]) + pr[j];
            py[j] = v > 0.0f ? v : 0.0f;
        }
    }
}

float *hk_bn_scale_new(const float *gamma, const float *var, float eps, int c)
{
    float *scale = malloc((size_t)c * sizeof *scale);
    for (int j = 0; scale && j < c; j++)
        scale[j] = gamma[j] / sqrtf(var[j] + eps);
    return scale;
}

int hk_bn_add_relu(bk_ctx_t *g, float *y, const float *x, const float *res, size_t npix,
                   int c, const float *gamma, const float *beta, const float *mean,
                   const float *var, float eps)
{
    float *scale = hk_bn_scale_new(gamma, var, eps, c);
    if (!scale) {
        bk_ctx_fail(g, "out of memory");
        return -1;
    }
    int nt = g->be->threads > 0 ? g->be->threads : 1;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int t = 0; t < nt; t++)
        rows(y, x, res, npix * (size_t)t / (size_t)nt, npix * (size_t)(t + 1) / (size_t)nt,
             (size_t)c, mean, scale, beta);
    free(scale);
    return 0;
}
