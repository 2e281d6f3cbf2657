/* graph_fold — eval-mode BatchNorm folded into the convolution before it,
 * for the inference plan (graph_plan.c): conv(x, w, b) then bn is
 * conv(x, w * s, (b - mean) * s + beta) with s = gamma / sqrt(var + eps)
 * per output channel. The arithmetic is in double, rounded once per value,
 * and is exactly that of the models' load-time fold (models/layers.c
 * bn_fold), so a tape graph run as fused ops gives the bits of the
 * old folded eval graph. */
#include <math.h>

#include "gpud/half.h"
#include "gpud/tape_priv.h"

void bk_bn_fold(float *w, float *bias, int oc, size_t per_oc, const float *gamma,
                const float *beta, const float *mean, const float *var, float eps)
{
    for (int o = 0; o < oc; o++) {
        double s = (double)gamma[o] / sqrt((double)var[o] + (double)eps);
        for (size_t i = 0; i < per_oc; i++)
            w[(size_t)o * per_oc + i] = (float)(w[(size_t)o * per_oc + i] * s);
        bias[o] = (float)(((double)bias[o] - mean[o]) * s + beta[o]);
    }
}

int bk_fold_round16(bk_half_t fmt, float *w, size_t nw, float *bias, int oc)
{
    half_round(fmt, w, w, nw);
    for (size_t i = 0; i < nw; i++)
        if (!isfinite(w[i]))
            return -1;
    for (int o = 0; bias && o < oc; o++) {
        float r;
        half_round(fmt, &r, &bias[o], 1);
        if (isfinite(r) || !isfinite(bias[o]))
            bias[o] = r;
    }
    return 0;
}
