/* ref_ops — reference kernels (the convolutions are in ref_conv.c). Each
 * output element is computed on its own with a double accumulator, so
 * results do not depend on threading; the OpenMP pragmas only split
 * independent outputs (ignored without -fopenmp). */
#include "gpud/cpu/ref_ops.h"

#include <float.h>
#include <math.h>

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

/* ------------------------------------------------------------ backward */

void ref_bn_train_fwd(const float *x, int n, int c, int hw, const float *gamma,
                      const float *beta, float eps, float *mean, float *var, float *y)
{
    double cnt = (double)n * hw;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        double s = 0.0, ss = 0.0;
        for (int b = 0; b < n; b++) {
            const float *p = x + ((size_t)b * c + ch) * hw;
            for (int i = 0; i < hw; i++)
                s += p[i];
        }
        double m = s / cnt;
        for (int b = 0; b < n; b++) {
            const float *p = x + ((size_t)b * c + ch) * hw;
            for (int i = 0; i < hw; i++)
                ss += (p[i] - m) * (p[i] - m);
        }
        double v = ss / cnt, inv = 1.0 / sqrt(v + eps);
        mean[ch] = (float)m;
        var[ch] = (float)v;
        for (int b = 0; b < n; b++) {
            const float *p = x + ((size_t)b * c + ch) * hw;
            float *q = y + ((size_t)b * c + ch) * hw;
            for (int i = 0; i < hw; i++)
                q[i] = (float)((p[i] - m) * inv * gamma[ch] + beta[ch]);
        }
    }
}

void ref_bn_eval_fwd(const float *x, int n, int c, int hw, const float *gamma,
                     const float *beta, const float *mean, const float *var, float eps,
                     float *y)
{
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++) {
            double inv = 1.0 / sqrt((double)var[ch] + eps);
            const float *p = x + ((size_t)b * c + ch) * hw;
            float *q = y + ((size_t)b * c + ch) * hw;
            for (int i = 0; i < hw; i++)
                q[i] = (float)(((double)p[i] - mean[ch]) * inv * gamma[ch] + beta[ch]);
        }
}

void ref_bn_bwd(const float *x, const float *gy, int n, int c, int hw, const float *gamma,
                const float *mean, const float *var, float eps, int training, float *gx,
                float *ggamma, float *gbeta)
{
    double cnt = (double)n * hw;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < c; ch++) {
        double inv = 1.0 / sqrt((double)var[ch] + eps), sg = 0.0, sgx = 0.0;
        for (int b = 0; b < n; b++) {
            const float *p = x + ((size_t)b * c + ch) * hw;
            const float *g = gy + ((size_t)b * c + ch) * hw;
            for (int i = 0; i < hw; i++) {
                sg += g[i];
                sgx += g[i] * ((p[i] - (double)mean[ch]) * inv);
            }
        }
        if (ggamma)
            ggamma[ch] = (float)sgx;
        if (gbeta)
            gbeta[ch] = (float)sg;
        if (!gx)
            continue;
        for (int b = 0; b < n; b++) {
            const float *p = x + ((size_t)b * c + ch) * hw;
            const float *g = gy + ((size_t)b * c + ch) * hw;
            float *q = gx + ((size_t)b * c + ch) * hw;
            for (int i = 0; i < hw; i++) {
                double d = g[i];
                if (training) {
                    double xh = (p[i] - (double)mean[ch]) * inv;
                    d = d - sg / cnt - xh * sgx / cnt;
                }
                q[i] = (float)(d * gamma[ch] * inv);
            }
        }
    }
}

void ref_relu_bwd(const float *y, const float *gy, float *gx, size_t count)
{
    for (size_t i = 0; i < count; i++)
        gx[i] = y[i] > 0.0f ? gy[i] : 0.0f;
}

void ref_maxpool2d_bwd(const float *x, const float *gy, int n, int c, int ih, int iw, int kh,
                       int kw, int sh, int sw, int ph, int pw, float *gx, int oh, int ow)
{
    for (size_t i = 0; i < (size_t)n * c * ih * iw; i++)
        gx[i] = 0.0f;
    for (int p = 0; p < n * c; p++) {
        const float *xp = x + (size_t)p * ih * iw;
        float *gp = gx + (size_t)p * ih * iw;
        for (int r = 0; r < oh; r++)
            for (int s = 0; s < ow; s++) {
                float m = -INFINITY;
                int at = -1;
                for (int i = 0; i < kh; i++)
                    for (int j = 0; j < kw; j++) {
                        int yy = r * sh - ph + i, xx = s * sw - pw + j;
                        if (yy >= 0 && yy < ih && xx >= 0 && xx < iw &&
                            (at < 0 || xp[yy * iw + xx] > m)) {
                            m = xp[yy * iw + xx];
                            at = yy * iw + xx;
                        }
                    }
                if (at >= 0)
                    gp[at] += gy[((size_t)p * oh + r) * ow + s];
            }
    }
}

void ref_avgpool2d_bwd(const float *gy, int n, int c, int ih, int iw, int kh, int kw, int sh,
                       int sw, int ph, int pw, int count_include_pad, float *gx, int oh,
                       int ow)
{
    for (size_t i = 0; i < (size_t)n * c * ih * iw; i++)
        gx[i] = 0.0f;
    for (int p = 0; p < n * c; p++) {
        float *gp = gx + (size_t)p * ih * iw;
        for (int r = 0; r < oh; r++)
            for (int s = 0; s < ow; s++) {
                int cnt = 0, cnt_pad = 0;
                for (int i = 0; i < kh; i++)
                    for (int j = 0; j < kw; j++) {
                        int yy = r * sh - ph + i, xx = s * sw - pw + j;
                        cnt_pad += yy < ih + ph && xx < iw + pw;
                        cnt += yy >= 0 && yy < ih && xx >= 0 && xx < iw;
                    }
                int div = count_include_pad ? cnt_pad : cnt;
                if (!div)
                    continue;
                float g = (float)((double)gy[((size_t)p * oh + r) * ow + s] / div);
                for (int i = 0; i < kh; i++)
                    for (int j = 0; j < kw; j++) {
                        int yy = r * sh - ph + i, xx = s * sw - pw + j;
                        if (yy >= 0 && yy < ih && xx >= 0 && xx < iw)
                            gp[yy * iw + xx] += g;
                    }
            }
    }
}

void ref_linear_bwd(const float *x, const float *gy, int n, int in, const float *w, int out,
                    float *gx, float *gw, float *gb)
{
    if (gx) {
#pragma omp parallel for collapse(2) schedule(static)
        for (int b = 0; b < n; b++)
            for (int i = 0; i < in; i++) {
                double acc = 0.0;
                for (int o = 0; o < out; o++)
                    acc += (double)gy[(size_t)b * out + o] * w[(size_t)o * in + i];
                gx[(size_t)b * in + i] = (float)acc;
            }
    }
#pragma omp parallel for schedule(static)
    for (int o = 0; o < out; o++) {
        if (gb) {
            double acc = 0.0;
            for (int b = 0; b < n; b++)
                acc += gy[(size_t)b * out + o];
            gb[o] = (float)acc;
        }
        for (int i = 0; gw && i < in; i++) {
            double acc = 0.0;
            for (int b = 0; b < n; b++)
                acc += (double)gy[(size_t)b * out + o] * x[(size_t)b * in + i];
            gw[(size_t)o * in + i] = (float)acc;
        }
    }
}

uint64_t ref_dropout_key(uint64_t seed, uint64_t step, int64_t id, uint32_t op)
{
    return dropout_op_key(dropout_sample_key(seed, step, id), op);
}

/* u = bits / 2^24 >= p, with bits an integer and p * 2^24 exact in double,
 * holds exactly when bits >= ceil(p * 2^24) */
uint64_t ref_dropout_threshold(float p)
{
    double t = (double)p * 16777216.0;
    uint64_t c = (uint64_t)t;
    return (double)c < t ? c + 1 : c;
}

int ref_dropout_keep(uint64_t key, uint64_t idx, float p)
{
    /* 24 uniform bits: u in [0, 1) with float-exact steps */
    double u = (double)(dropout_mix(key ^ dropout_mix(idx)) >> 40) / 16777216.0;
    return u >= (double)p;
}

void ref_ce_fwd(const float *logits, const int32_t *labels, int n, int k, float eps,
                float *loss)
{
    for (int i = 0; i < n; i++) {
        const float *l = logits + (size_t)i * k;
        double mx = -INFINITY, s = 0.0, sum = 0.0;
        for (int c = 0; c < k; c++)
            mx = l[c] > mx ? l[c] : mx;
        for (int c = 0; c < k; c++) {
            s += exp((double)l[c] - mx);
            sum += l[c];
        }
        double lse = mx + log(s);
        loss[i] = (float)(lse - (1.0 - eps) * l[labels[i]] - (double)eps / k * sum);
    }
}

void ref_ce_bwd(const float *logits, const int32_t *labels, int n, int k, float eps,
                const float *dloss, float *glogits)
{
    for (int i = 0; i < n; i++) {
        const float *l = logits + (size_t)i * k;
        float *g = glogits + (size_t)i * k;
        double mx = -INFINITY, s = 0.0;
        for (int c = 0; c < k; c++)
            mx = l[c] > mx ? l[c] : mx;
        for (int c = 0; c < k; c++)
            s += exp((double)l[c] - mx);
        for (int c = 0; c < k; c++) {
            double t = (double)eps / k + (c == labels[i] ? 1.0 - eps : 0.0);
            g[c] = (float)(dloss[i] * (exp((double)l[c] - mx) / s - t));
        }
    }
}
