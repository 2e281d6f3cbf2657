/* ref_ops — reference kernels. Each output element is computed on its own
 * with a double accumulator, so results do not depend on threading; the
 * OpenMP pragmas only split independent outputs (ignored without -fopenmp). */
#include "gpud/cpu/ref_ops.h"

#include <float.h>
#include <math.h>

static double conv_point(const float *x, int ic, int ih, int iw, const float *w, int kh,
                         int kw, int y0, int x0)
{
    double acc = 0.0;
    for (int c = 0; c < ic; c++)
        for (int i = 0; i < kh; i++) {
            int yy = y0 + i;
            if (yy < 0 || yy >= ih)
                continue;
            const float *xr = x + ((size_t)c * ih + yy) * iw;
            const float *wr = w + ((size_t)c * kh + i) * kw;
            for (int j = 0; j < kw; j++) {
                int xx = x0 + j;
                if (xx >= 0 && xx < iw)
                    acc += (double)xr[xx] * wr[j];
            }
        }
    return acc;
}

void ref_conv2d(const float *x, int n, int ic, int ih, int iw, const float *w,
                const float *bias, int oc, int kh, int kw, int sh, int sw, int ph, int pw,
                float *y, int oh, int ow)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < n; b++)
        for (int o = 0; o < oc; o++) {
            const float *xb = x + (size_t)b * ic * ih * iw;
            const float *wo = w + (size_t)o * ic * kh * kw;
            float *yo = y + ((size_t)b * oc + o) * oh * ow;
            for (int r = 0; r < oh; r++)
                for (int s = 0; s < ow; s++) {
                    double acc = conv_point(xb, ic, ih, iw, wo, kh, kw, r * sh - ph, s * sw - pw);
                    yo[(size_t)r * ow + s] = (float)(acc + (bias ? bias[o] : 0.0));
                }
        }
}

void ref_batchnorm(float *x, int n, int c, int hw, const float *gamma, const float *beta,
                   const float *mean, const float *var, float eps)
{
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++) {
            double inv = 1.0 / sqrt((double)var[ch] + eps);
            float *p = x + ((size_t)b * c + ch) * hw;
            for (int i = 0; i < hw; i++)
                p[i] = (float)(((double)p[i] - mean[ch]) * inv * gamma[ch] + beta[ch]);
        }
}

void ref_relu(float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ref_add(const float *a, const float *b, float *y, size_t count)
{
    for (size_t i = 0; i < count; i++)
        y[i] = a[i] + b[i];
}

void ref_maxpool2d(const float *x, int n, int c, int ih, int iw, int kh, int kw, int sh,
                   int sw, int ph, int pw, float *y, int oh, int ow)
{
    for (int p = 0; p < n * c; p++) {
        const float *xp = x + (size_t)p * ih * iw;
        for (int r = 0; r < oh; r++)
            for (int s = 0; s < ow; s++) {
                float m = -INFINITY;
                for (int i = 0; i < kh; i++)
                    for (int j = 0; j < kw; j++) {
                        int yy = r * sh - ph + i, xx = s * sw - pw + j;
                        if (yy >= 0 && yy < ih && xx >= 0 && xx < iw && xp[yy * iw + xx] > m)
                            m = xp[yy * iw + xx];
                    }
                y[((size_t)p * oh + r) * ow + s] = m;
            }
    }
}

void ref_avgpool2d(const float *x, int n, int c, int ih, int iw, int kh, int kw, int sh,
                   int sw, int ph, int pw, int count_include_pad, float *y, int oh, int ow)
{
    for (int p = 0; p < n * c; p++) {
        const float *xp = x + (size_t)p * ih * iw;
        for (int r = 0; r < oh; r++)
            for (int s = 0; s < ow; s++) {
                double acc = 0.0;
                int cnt = 0, cnt_pad = 0;
                for (int i = 0; i < kh; i++)
                    for (int j = 0; j < kw; j++) {
                        int yy = r * sh - ph + i, xx = s * sw - pw + j;
                        /* PyTorch counts the padded window clipped to input+pad */
                        if (yy < ih + ph && xx < iw + pw)
                            cnt_pad++;
                        if (yy >= 0 && yy < ih && xx >= 0 && xx < iw) {
                            acc += xp[yy * iw + xx];
                            cnt++;
                        }
                    }
                int div = count_include_pad ? cnt_pad : cnt;
                y[((size_t)p * oh + r) * ow + s] = (float)(div ? acc / div : 0.0);
            }
    }
}

void ref_linear(const float *x, int n, int in, const float *w, const float *bias, int out,
                float *y)
{
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < n; b++)
        for (int o = 0; o < out; o++) {
            double acc = bias ? bias[o] : 0.0;
            const float *xb = x + (size_t)b * in, *wo = w + (size_t)o * in;
            for (int i = 0; i < in; i++)
                acc += (double)xb[i] * wo[i];
            y[(size_t)b * out + o] = (float)acc;
        }
}
