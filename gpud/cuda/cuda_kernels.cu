/* cuda_kernels — see cuda_kernels.h. Simple kernels: threads walk output
 * elements (grid-stride), slices of a channel per block for reductions;
 * each element computed as gpud/cpu/ref_ops.c does. Cross-entropy and
 * top-k: cuda_ce_kernels.cu. */
#include "gpud/cuda/cuda_kernels.h"
#include "gpud/bn_math.h"
#include "gpud/dropout_key.h"
#include "gpud/fp16_math.h"
#include "gpud/cuda/cuda_launch.h"
#include "gpud/cuda/cuda_pool_win.h"

#include <math.h>

/* ------------------------------------------------------------ element-wise */

__global__ static void k_u8_normalize(const uint8_t *px, size_t count, int c, int hw,
                                      const float *lut, float *y)
{
    GRID_STRIDE_IDX3(w, count, (size_t)hw, (size_t)c, 1)   /* v[1].r: the channel */
        y[w.i] = lut[w.v[1].r * 256 + px[w.i]];
}

cudaError_t ck_u8_normalize(cudaStream_t s, const uint8_t *px, int n, int c, int hw,
                            const float *lut, float *y)
{
    size_t count = (size_t)n * c * hw;
    k_u8_normalize<<<blocks_for(count), THREADS, 0, s>>>(px, count, c, hw, lut, y);
    return cudaGetLastError();
}

__global__ static void k_bias_post(float *y, const float *x, const float *bias, size_t count,
                                   int c, int hw, ck_post_t post, const float *res)
{
    GRID_STRIDE_IDX3(w, count, (size_t)hw, (size_t)c, 1)   /* v[1].r: the channel */
    {
        size_t i = w.i;
        float v = x[i];
        if (bias)
            v = __fadd_rn(v, bias[w.v[1].r]);
        for (int k = 0; k < post.n_post; k++)
            v = post.post[k] == 1 ? (v > 0.0f ? v : 0.0f) : __fadd_rn(v, res[i]);
        y[i] = v;   /* res[i] was read: y may be res */
    }
}

cudaError_t ck_bias_post(cudaStream_t s, float *y, const float *x, const float *bias, int n,
                         int c, int hw, ck_post_t post, const float *res)
{
    size_t count = (size_t)n * c * hw;
    k_bias_post<<<blocks_for(count), THREADS, 0, s>>>(y, x, bias, count, c, hw, post, res);
    return cudaGetLastError();
}

__global__ static void k_bias_rows(float *y, const float *bias, size_t count, int out)
{
    GRID_STRIDE(i, count)
    y[i] = __fadd_rn(y[i], bias[i % (size_t)out]);
}

cudaError_t ck_bias_rows(cudaStream_t s, float *y, const float *bias, int n, int out)
{
    size_t count = (size_t)n * out;
    k_bias_rows<<<blocks_for(count), THREADS, 0, s>>>(y, bias, count, out);
    return cudaGetLastError();
}

__global__ static void k_col_sums(const float *gy, int n, int out, float *gb)
{
    GRID_STRIDE(o, (size_t)out)
    {
        double acc = 0.0;
        for (int b = 0; b < n; b++)
            acc += gy[(size_t)b * out + o];
        gb[o] = (float)acc;
    }
}

cudaError_t ck_col_sums(cudaStream_t s, const float *gy, int n, int out, float *gb)
{
    k_col_sums<<<blocks_for((size_t)out), THREADS, 0, s>>>(gy, n, out, gb);
    return cudaGetLastError();
}

__global__ static void k_round_bf16(const float *x, size_t n, float *y)
{
    GRID_STRIDE(i, n)
    {
        unsigned u = __float_as_uint(x[i]);
        unsigned r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        y[i] = __uint_as_float((u & 0x7fffffffu) > 0x7f800000u ? 0xffff0000u : r);
    }
}

cudaError_t ck_round_bf16(cudaStream_t s, const float *x, size_t n, float *y)
{
    k_round_bf16<<<blocks_for(n), THREADS, 0, s>>>(x, n, y);
    return cudaGetLastError();
}

__global__ static void k_round_fp16(const float *x, size_t n, float *y)
{
    GRID_STRIDE(i, n)
    y[i] = fp16_round1(x[i]);
}

cudaError_t ck_round_fp16(cudaStream_t s, const float *x, size_t n, float *y)
{
    k_round_fp16<<<blocks_for(n), THREADS, 0, s>>>(x, n, y);
    return cudaGetLastError();
}

__global__ static void k_scale(float *x, size_t n, float factor)
{
    GRID_STRIDE(i, n)
    x[i] = __fmul_rn(x[i], factor);
}

cudaError_t ck_scale(cudaStream_t s, float *x, size_t n, float factor)
{
    k_scale<<<blocks_for(n), THREADS, 0, s>>>(x, n, factor);
    return cudaGetLastError();
}

__global__ static void k_d2f(const double *x, size_t n, float *y)
{
    GRID_STRIDE(i, n)
    y[i] = __double2float_rn(x[i]);
}

cudaError_t ck_d2f(cudaStream_t s, const double *x, size_t n, float *y)
{
    k_d2f<<<blocks_for(n), THREADS, 0, s>>>(x, n, y);
    return cudaGetLastError();
}

/* atomicMin keeps the lowest index whatever order the threads run in */
__global__ static void k_find_nonfinite(const float *x, size_t n, unsigned long long *first)
{
    GRID_STRIDE(i, n)
    if (!isfinite(x[i]))
        atomicMin(first, (unsigned long long)i);
}

cudaError_t ck_find_nonfinite(cudaStream_t s, const float *x, size_t n,
                              unsigned long long *first)
{
    k_find_nonfinite<<<blocks_for(n), THREADS, 0, s>>>(x, n, first);
    return cudaGetLastError();
}

__global__ static void k_relu(float *y, const float *x, size_t count)
{
    GRID_STRIDE(i, count)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

cudaError_t ck_relu(cudaStream_t s, float *y, const float *x, size_t count)
{
    k_relu<<<blocks_for(count), THREADS, 0, s>>>(y, x, count);
    return cudaGetLastError();
}

__global__ static void k_relu_bwd(float *gx, const float *y, const float *gy, size_t count)
{
    GRID_STRIDE(i, count)
    gx[i] = y[i] > 0.0f ? gy[i] : 0.0f;
}

cudaError_t ck_relu_bwd(cudaStream_t s, float *gx, const float *y, const float *gy,
                        size_t count)
{
    k_relu_bwd<<<blocks_for(count), THREADS, 0, s>>>(gx, y, gy, count);
    return cudaGetLastError();
}

__global__ static void k_add(float *y, const float *a, const float *b, size_t count, int relu)
{
    GRID_STRIDE(i, count)
    {
        float v = __fadd_rn(a[i], b[i]);
        y[i] = relu && !(v > 0.0f) ? 0.0f : v;
    }
}

cudaError_t ck_add(cudaStream_t s, float *y, const float *a, const float *b, size_t count,
                   int relu)
{
    k_add<<<blocks_for(count), THREADS, 0, s>>>(y, a, b, count, relu);
    return cudaGetLastError();
}

__global__ static void k_acc(float *y, const float *x, size_t count)
{
    GRID_STRIDE(i, count)
    y[i] = __fadd_rn(y[i], x[i]);
}

cudaError_t ck_acc(cudaStream_t s, float *y, const float *x, size_t count)
{
    k_acc<<<blocks_for(count), THREADS, 0, s>>>(y, x, count);
    return cudaGetLastError();
}

__global__ static void k_concat(float *y, int cy, float *x, size_t count, int cx, int hw,
                                int off, int to_y)
{
    GRID_STRIDE(i, count)   /* i walks x (n, cx, hw) */
    {
        size_t per = (size_t)cx * hw, b = i / per, r = i % per;
        size_t at = b * (size_t)cy * hw + (size_t)off * hw + r;
        if (to_y)
            y[at] = x[i];
        else
            x[i] = y[at];
    }
}

cudaError_t ck_concat(cudaStream_t s, float *y, int cy, float *x, int n, int cx, int hw,
                      int off, int to_y)
{
    size_t count = (size_t)n * cx * hw;
    k_concat<<<blocks_for(count), THREADS, 0, s>>>(y, cy, x, count, cx, hw, off, to_y);
    return cudaGetLastError();
}

/* keys[b]: sample b's key, the op mixed in here: the host's hash
 * (gpud/dropout_key.h, ref_dropout_keep), bit for bit */
__global__ static void k_dropout(float *y, const float *x, size_t count, size_t per, float p,
                                 float scale, uint32_t op, const uint64_t *keys)
{
    GRID_STRIDE(i, count)
    {
        size_t b = i / per, idx = i % per;
        uint64_t key = dropout_op_key(keys[b], op);
        double u = (double)(dropout_mix(key ^ dropout_mix(idx)) >> 40) / 16777216.0;
        y[i] = u >= (double)p ? __fmul_rn(x[i], scale) : 0.0f;
    }
}

cudaError_t ck_dropout(cudaStream_t s, float *y, const float *x, int n, size_t per, float p,
                       uint32_t op, const uint64_t *keys)
{
    size_t count = (size_t)n * per;
    if (p == 0.0f)
        return y == x ? cudaSuccess
                      : cudaMemcpyAsync(y, x, count * sizeof(float), cudaMemcpyDeviceToDevice, s);
    float scale = 1.0f / (1.0f - p);
    k_dropout<<<blocks_for(count), THREADS, 0, s>>>(y, x, count, per, p, scale, op, keys);
    return cudaGetLastError();
}

/* ------------------------------------------------------------- batch-norm */

/* The j-th element (b, p) of channel ch, at x[(b*c + ch)*hw + p], for j,
 * j + THREADS, ... (a thread's share of a channel): one division where the
 * walk starts, then additions (no 64-bit division per element). */
typedef struct {
    size_t j, at;      /* the element's rank in the channel, its offset in x */
    int p, dp, hw;     /* its pixel; THREADS % hw */
    size_t dat, wrap;  /* at's step; at a pixel wrap, c*hw - hw more */
} chan_walk_t;

__device__ static chan_walk_t chan_walk(size_t j, int ch, int c, int hw)
{
    chan_walk_t w;
    w.j = j;
    w.p = (int)(j % hw);
    w.at = ((j / hw) * (size_t)c + ch) * hw + w.p;
    w.dp = THREADS % hw;
    w.hw = hw;
    w.dat = (size_t)(THREADS / hw) * c * hw + w.dp;
    w.wrap = (size_t)c * hw - hw;
    return w;
}

__device__ static void chan_next(chan_walk_t *w)
{
    w->j += THREADS;
    w->p += w->dp;
    w->at += w->dat;
    if (w->p >= w->hw) {
        w->p -= w->hw;
        w->at += w->wrap;
    }
}

/* Per-channel reductions in two passes, so that a few channels still fill
 * the device: block (ch, sl) sums slice sl of channel ch's cnt values into
 * part[ch * S + sl] (S = ck_sum_parts(cnt)), then one thread per row sums
 * its S partials in order. The slicing is a function of the shapes alone:
 * the same bits in every process. */
int ck_sum_parts(size_t cnt)
{
    size_t s = (cnt + THREADS * 16 - 1) / (THREADS * 16);   /* >= 16 values a thread */
    return s < 1 ? 1 : s > 64 ? 64 : (int)s;
}

/* The slice [*lo, *hi) of block (ch, sl), channel ch = blockIdx.x / S. */
__device__ static int slice_of(size_t cnt, int parts, size_t *lo, size_t *hi)
{
    int sl = blockIdx.x % parts;
    size_t len = (cnt + parts - 1) / parts;
    *lo = sl * len;
    *hi = *lo + len < cnt ? *lo + len : cnt;
    return blockIdx.x / parts;
}

__global__ static void k_sum_rows(const double *part, int rows, int parts, double *out)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows)
        return;
    double acc = 0.0;
    for (int i = 0; i < parts; i++)
        acc += part[(size_t)r * parts + i];
    out[r] = acc;
}

__global__ static void k_chan_sums(const float *x, size_t cnt, int c, int hw,
                                   const float *center, int parts, double *part)
{
    size_t lo, hi;
    int ch = slice_of(cnt, parts, &lo, &hi);
    double acc = 0.0, m = center ? center[ch] : 0.0;
    for (chan_walk_t w = chan_walk(lo + threadIdx.x, ch, c, hw); w.j < hi; chan_next(&w)) {
        double v = x[w.at];
        acc += center ? (v - m) * (v - m) : v;
    }
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        part[blockIdx.x] = acc;
}

cudaError_t ck_sum_rows(cudaStream_t s, const double *part, int rows, int parts, double *out)
{
    k_sum_rows<<<blocks_for((size_t)rows), THREADS, 0, s>>>(part, rows, parts, out);
    return cudaGetLastError();
}

cudaError_t ck_chan_sums(cudaStream_t s, const float *x, int n, int c, int hw,
                         const float *center, double *out, double *part)
{
    size_t cnt = (size_t)n * hw;
    int parts = ck_sum_parts(cnt);
    k_chan_sums<<<c * parts, THREADS, 0, s>>>(x, cnt, c, hw, center, parts, part);
    k_sum_rows<<<blocks_for((size_t)c), THREADS, 0, s>>>(part, c, parts, out);
    return cudaGetLastError();
}

/* The element-wise passes over NCHW go plane by plane: a block takes
 * THREADS / hw whole planes at a time (at least one), so a thread stays in
 * one plane, one channel, while it works through its pixels. It works out
 * the channel's constants (a square root and divisions in double) once a
 * plane instead of once an element, and never divides a 64-bit index (slow
 * on a GPU) to find the channel. Each element's arithmetic is the same
 * expression as in the grid-stride form these replace: the same bits. */
typedef struct {
    int p0, step;          /* this thread's pixels: p0, p0 + step, ... < hw */
    size_t first, stride;  /* its planes: first, first + stride, ... */
} plane_walk_t;

__device__ static int plane_walk(int hw, plane_walk_t *w)
{
    int ppb = hw >= THREADS ? 1 : THREADS / hw, lp = ppb > 1 ? (int)threadIdx.x / hw : 0;
    w->p0 = ppb > 1 ? (int)threadIdx.x % hw : (int)threadIdx.x;
    w->step = ppb > 1 ? hw : THREADS;
    w->first = (size_t)blockIdx.x * ppb + lp;
    w->stride = (size_t)gridDim.x * ppb;
    return lp < ppb;
}

/* for each plane pl (channel ch) this thread owns; its pixels in the
 * plane are w.p0, w.p0 + w.step, ... < hw */
#define PLANE_STRIDE(w, pl, ch, planes, c, hw)                                       \
    plane_walk_t w;                                                                  \
    if (plane_walk(hw, &w))                                                          \
        for (size_t pl = w.first, ch = pl % (size_t)(c); pl < (planes);              \
             pl += w.stride, ch = pl % (size_t)(c))

static unsigned plane_blocks(size_t planes, int hw)
{
    size_t ppb = hw >= THREADS ? 1 : THREADS / hw, b = (planes + ppb - 1) / ppb;
    return b < 1 ? 1 : b > CK_GRID_CAP ? CK_GRID_CAP : (unsigned)b;
}

__global__ static void k_chan_axpb(float *y, const float *x, size_t planes, int c, int hw,
                                   const float *center, const float *a, const float *b)
{
    PLANE_STRIDE(w, pl, ch, planes, c, hw)
    {
        double ac = a[ch], m = center[ch], bc = b[ch];
        for (int p = w.p0; p < hw; p += w.step) {
            size_t i = pl * hw + p;
            y[i] += (float)(ac * ((double)x[i] - m) + bc);
        }
    }
}

cudaError_t ck_chan_axpb(cudaStream_t s, float *y, const float *x, int n, int c, int hw,
                         const float *center, const float *a, const float *b)
{
    size_t planes = (size_t)n * c;
    k_chan_axpb<<<plane_blocks(planes, hw), THREADS, 0, s>>>(y, x, planes, c, hw, center, a, b);
    return cudaGetLastError();
}

__global__ static void k_bn_stats(const float *x, size_t cnt, int c, int hw, float *mean,
                                  float *var)
{
    int ch = blockIdx.x;
    double s = 0.0;
    for (chan_walk_t w = chan_walk(threadIdx.x, ch, c, hw); w.j < cnt; chan_next(&w))
        s += x[w.at];
    double m = block_sum(s) / (double)cnt, ss = 0.0;
    for (chan_walk_t w = chan_walk(threadIdx.x, ch, c, hw); w.j < cnt; chan_next(&w)) {
        double d = x[w.at] - m;
        ss += d * d;
    }
    ss = block_sum(ss);
    if (threadIdx.x == 0) {
        mean[ch] = (float)m;
        var[ch] = (float)(ss / (double)cnt);
    }
}

cudaError_t ck_bn_stats(cudaStream_t s, const float *x, int n, int c, int hw, float *mean,
                        float *var)
{
    k_bn_stats<<<c, THREADS, 0, s>>>(x, (size_t)n * hw, c, hw, mean, var);
    return cudaGetLastError();
}

__global__ static void k_bn_apply(float *y, const float *x, size_t planes, int c, int hw,
                                  const float *gamma, const float *beta, const float *mean,
                                  const float *var, float eps, int relu, const float *res)
{
    PLANE_STRIDE(w, pl, ch, planes, c, hw)
    {
        double inv = 1.0 / sqrt((double)var[ch] + eps), m = mean[ch], g = gamma[ch];
        double b = beta[ch];
        for (int p = w.p0; p < hw; p += w.step) {
            size_t i = pl * hw + p;
            float v = (float)(((double)x[i] - m) * inv * g + b);
            if (res)   /* k_add's sum of the value stored without it */
                v = __fadd_rn(v, res[i]);
            y[i] = relu && !(v > 0.0f) ? 0.0f : v;
        }
    }
}

cudaError_t ck_bn_apply(cudaStream_t s, float *y, const float *x, int n, int c, int hw,
                        const float *gamma, const float *beta, const float *mean,
                        const float *var, float eps, int relu, const float *res)
{
    size_t planes = (size_t)n * c;
    k_bn_apply<<<plane_blocks(planes, hw), THREADS, 0, s>>>(y, x, planes, c, hw, gamma, beta,
                                                            mean, var, eps, relu, res);
    return cudaGetLastError();
}

__device__ static float masked(const float *y, const float *gy, size_t at)
{
    return y && !(y[at] > 0.0f) ? 0.0f : gy[at];
}

__global__ static void k_bn_bwd_sums(const float *x, const float *y, const float *gy,
                                     size_t cnt, int c, int hw, const float *mean,
                                     const float *var, float eps, double *sums)
{
    int ch = blockIdx.x;
    double inv = 1.0 / sqrt((double)var[ch] + eps), sg = 0.0, sgx = 0.0;
    for (chan_walk_t w = chan_walk(threadIdx.x, ch, c, hw); w.j < cnt; chan_next(&w)) {
        size_t at = w.at;
        double g = masked(y, gy, at);
        sg += g;
        sgx += g * ((x[at] - (double)mean[ch]) * inv);
    }
    sg = block_sum(sg);
    sgx = block_sum(sgx);
    if (threadIdx.x == 0) {
        sums[ch] = sg;
        sums[c + ch] = sgx;
    }
}

cudaError_t ck_bn_bwd_sums(cudaStream_t s, const float *x, const float *y, const float *gy,
                           int n, int c, int hw, const float *mean, const float *var,
                           float eps, double *sums)
{
    k_bn_bwd_sums<<<c, THREADS, 0, s>>>(x, y, gy, (size_t)n * hw, c, hw, mean, var, eps, sums);
    return cudaGetLastError();
}

__global__ static void k_bn_bwd_data(float *gx, const float *x, const float *y, const float *gy,
                                     size_t planes, double cnt, int c, int hw,
                                     const float *gamma, const float *mean, const float *var,
                                     float eps, int training, const double *sums)
{
    PLANE_STRIDE(w, pl, ch, planes, c, hw)
    {
        double inv = 1.0 / sqrt((double)var[ch] + eps), m = mean[ch], g = gamma[ch];
        double s0 = training ? sums[ch] / cnt : 0.0, s1 = training ? sums[c + ch] : 0.0;
        for (int p = w.p0; p < hw; p += w.step) {
            size_t i = pl * hw + p;
            double d = masked(y, gy, i);
            if (training) {
                double xh = (x[i] - m) * inv;
                d = d - s0 - xh * s1 / cnt;
            }
            gx[i] = (float)(d * g * inv);
        }
    }
}

cudaError_t ck_bn_bwd_data(cudaStream_t s, float *gx, const float *x, const float *y,
                           const float *gy, int n, int c, int hw, const float *gamma,
                           const float *mean, const float *var, float eps, int training,
                           const double *sums)
{
    size_t planes = (size_t)n * c;
    k_bn_bwd_data<<<plane_blocks(planes, hw), THREADS, 0, s>>>(gx, x, y, gy, planes,
                                                               (double)n * hw, c, hw, gamma,
                                                               mean, var, eps, training, sums);
    return cudaGetLastError();
}

__global__ static void k_bn_grad_sums(const float *x, const float *y, const float *gy,
                                      const float *gy2, float *gout, size_t cnt, int c, int hw,
                                      const float *center, int parts, double *part)
{
    size_t lo, hi;
    int ch = slice_of(cnt, parts, &lo, &hi);
    double sg = 0.0, sgx = 0.0, m = center[ch];
    for (chan_walk_t w = chan_walk(lo + threadIdx.x, ch, c, hw); w.j < hi; chan_next(&w)) {
        size_t at = w.at;
        /* gy's last term as ck_acc adds it (gy2: the tape's fold) */
        float d = y && !(y[at] > 0.0f) ? 0.0f : gy2 ? gy[at] + gy2[at] : gy[at];
        if (gout)   /* as ck_relu_bwd stores it */
            gout[at] = d;
        double g = d;
        sg += g;
        sgx += g * (x[at] - m);
    }
    sg = block_sum(sg);
    sgx = block_sum(sgx);
    if (threadIdx.x == 0) {   /* rows [0, c): sum dy'; [c, 2c): sum dy' (x - m) */
        part[blockIdx.x] = sg;
        part[(size_t)c * parts + blockIdx.x] = sgx;
    }
}

cudaError_t ck_bn_grad_sums(cudaStream_t s, const float *x, const float *y, const float *gy,
                            const float *gy2, float *gout, int n, int c, int hw,
                            const float *center, double *out, double *part)
{
    size_t cnt = (size_t)n * hw;
    int parts = ck_sum_parts(cnt);
    if (gy2 && !gout)
        return cudaErrorInvalidValue;   /* the apply pass reads dy' from gout */
    k_bn_grad_sums<<<c * parts, THREADS, 0, s>>>(x, y, gy, gy2, gout, cnt, c, hw, center, parts,
                                                 part);
    k_sum_rows<<<blocks_for((size_t)2 * c), THREADS, 0, s>>>(part, 2 * c, parts, out);
    return cudaGetLastError();
}

__global__ static void k_bn_grad_apply(float *gx, const float *x, const float *y,
                                       const float *gy, size_t planes, int c, int hw,
                                       const float *center, const float *scale, const float *a,
                                       const float *b)
{
    PLANE_STRIDE(w, pl, ch, planes, c, hw)
    {
        double sc = scale[ch], ac = a[ch], m = center[ch], bc = b[ch];
        for (int p = w.p0; p < hw; p += w.step) {
            size_t i = pl * hw + p;
            gx[i] = (float)(sc * masked(y, gy, i) + ac * ((double)x[i] - m) + bc);
        }
    }
}

cudaError_t ck_bn_grad_apply(cudaStream_t s, float *gx, const float *x, const float *y,
                             const float *gy, int n, int c, int hw, const float *center,
                             const float *scale, const float *a, const float *b)
{
    size_t planes = (size_t)n * c;
    k_bn_grad_apply<<<plane_blocks(planes, hw), THREADS, 0, s>>>(gx, x, y, gy, planes, c, hw,
                                                                 center, scale, a, b);
    return cudaGetLastError();
}

__global__ static void k_bn_stat(const double *sum, int c, double count, float *out)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < c)
        out[ch] = bnm_stat(sum[ch], count);
}

cudaError_t ck_bn_stat(cudaStream_t s, const double *sum, int c, double count, float *out)
{
    k_bn_stat<<<blocks_for((size_t)c), THREADS, 0, s>>>(sum, c, count, out);
    return cudaGetLastError();
}

__global__ static void k_bn_running(float *rm, float *rv, const float *stat, int c, double m,
                                    double unbias)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch < c) {
        rm[ch] = bnm_running(rm[ch], stat[ch], m, 1.0);
        rv[ch] = bnm_running(rv[ch], stat[c + ch], m, unbias);
    }
}

cudaError_t ck_bn_running(cudaStream_t s, float *rm, float *rv, const float *stat, int c,
                          double m, double unbias)
{
    k_bn_running<<<blocks_for((size_t)c), THREADS, 0, s>>>(rm, rv, stat, c, m, unbias);
    return cudaGetLastError();
}

__global__ static void k_bn_grad_finish(double *sums, int c, const float *gamma,
                                        const float *var, float eps, double count,
                                        float *ggamma, float *gbeta, float *coef)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    double sdy = sums[ch], sdyxh = BNM_DIV(sums[c + ch], bnm_std(var[ch], eps));
    sums[c + ch] = sdyxh;
    if (ggamma)
        ggamma[ch] = (float)sdyxh;
    if (gbeta)
        gbeta[ch] = (float)sdy;
    bnm_coeffs(gamma[ch], var[ch], eps, sdy, sdyxh, count, &coef[ch], &coef[c + ch],
               &coef[2 * c + ch]);
}

cudaError_t ck_bn_grad_finish(cudaStream_t s, double *sums, int c, const float *gamma,
                              const float *var, float eps, double count, float *ggamma,
                              float *gbeta, float *coef)
{
    k_bn_grad_finish<<<blocks_for((size_t)c), THREADS, 0, s>>>(sums, c, gamma, var, eps, count,
                                                               ggamma, gbeta, coef);
    return cudaGetLastError();
}

/* ---------------------------------------------------------------- pooling */

__global__ static void k_pool_fwd(const ck_pool_t p, const float *x, float *y)
{
    size_t count = (size_t)p.nc * p.oh * p.ow;
    GRID_STRIDE_IDX3(w, count, p.ow, p.oh, 1)
    {
        size_t i = w.i;
        int q = (int)w.v[0].r, r = (int)w.v[1].r;
        const float *xp = x + w.v[2].q * p.ih * p.iw;
        if (p.alg == 0) {
            int at = pool_argmax(p, xp, 1, r, q);
            y[i] = at < 0 ? -INFINITY : xp[at];
            continue;
        }
        double acc = 0.0;
        for (int a = 0; a < p.kh; a++)
            for (int b = 0; b < p.kw; b++) {
                int yy = r * p.sh - p.ph + a, xx = q * p.sw - p.pw + b;
                if (yy >= 0 && yy < p.ih && xx >= 0 && xx < p.iw)
                    acc += xp[yy * p.iw + xx];
            }
        int div = pool_div(p, r, q);
        y[i] = (float)(div ? acc / div : 0.0);
    }
}

cudaError_t ck_pool_fwd(cudaStream_t s, const ck_pool_t *p, const float *x, float *y)
{
    size_t count = (size_t)p->nc * p->oh * p->ow;
    k_pool_fwd<<<blocks_for(count), THREADS, 0, s>>>(*p, x, y);
    return cudaGetLastError();
}

/* Gather: each input element sums the gradients of the windows that chose
 * it (max) or contain it (avg), in the order of ref's scatter loop. */
__global__ static void k_pool_bwd(const ck_pool_t p, const float *x, const float *gy, float *gx)
{
    size_t count = (size_t)p.nc * p.ih * p.iw;
    GRID_STRIDE_IDX3(w, count, p.iw, p.ih, 1)
    {
        size_t i = w.i;
        int xx = (int)w.v[0].r, yy = (int)w.v[1].r;
        size_t plane = w.v[2].q;
        const float *xp = x + plane * p.ih * p.iw, *gp = gy + plane * p.oh * p.ow;
        float acc = 0.0f;
        int r0, r1, q0, q1;
        pool_covering(p, yy, xx, &r0, &r1, &q0, &q1);
        for (int r = r0; r <= r1 && r < p.oh; r++)
            for (int q = q0; q <= q1 && q < p.ow; q++) {
                if (p.alg == 0) {
                    if (pool_argmax(p, xp, 1, r, q) == yy * p.iw + xx)
                        acc += gp[r * p.ow + q];
                } else {
                    int div = pool_div(p, r, q);
                    if (div)
                        acc += (float)((double)gp[r * p.ow + q] / div);
                }
            }
        gx[i] = acc;
    }
}

cudaError_t ck_pool_bwd(cudaStream_t s, const ck_pool_t *p, const float *x, const float *gy,
                        float *gx)
{
    size_t count = (size_t)p->nc * p->ih * p->iw;
    k_pool_bwd<<<blocks_for(count), THREADS, 0, s>>>(*p, x, gy, gx);
    return cudaGetLastError();
}
