/* cuda_pool_win — a pooling window's first maximum and divisor, for the
 * fp32 NCHW kernels (cuda_kernels.cu) and the 16-bit NHWC ones
 * (cuda_train16_kernels.cu) alike: xp is the (sample, channel)'s first
 * element and `stride` the distance between neighbouring pixels (1 in
 * NCHW, c in NHWC), so both pick the same element by the same rule (ref's:
 * the first maximum in window order). Only for .cu files. */
#ifndef DDP_CUDA_POOL_WIN_H
#define DDP_CUDA_POOL_WIN_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "gpud/cuda/cuda_kernels.h"

__device__ static inline float pool_ld(float v)
{
    return v;
}

__device__ static inline float pool_ld(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

__device__ static inline float pool_ld(__half v)
{
    return __half2float(v);
}

/* Window of output (r, q): the pixel index (yy * iw + xx) of its first
 * maximum, -1 when the window holds no input pixel. */
template <typename T>
__device__ static int pool_argmax(const ck_pool_t p, const T *xp, size_t stride, int r, int q)
{
    float m = -INFINITY;
    int at = -1;
    for (int i = 0; i < p.kh; i++)
        for (int j = 0; j < p.kw; j++) {
            int yy = r * p.sh - p.ph + i, xx = q * p.sw - p.pw + j;
            if (yy < 0 || yy >= p.ih || xx < 0 || xx >= p.iw)
                continue;
            float v = pool_ld(xp[(size_t)(yy * p.iw + xx) * stride]);
            if (at < 0 || v > m) {
                m = v;
                at = yy * p.iw + xx;
            }
        }
    return at;
}

/* Its divisor (avg: count_include_pad per alg 1, else the pixels inside). */
__device__ static inline int pool_div(const ck_pool_t p, int r, int q)
{
    int cnt = 0, cnt_pad = 0;
    for (int i = 0; i < p.kh; i++)
        for (int j = 0; j < p.kw; j++) {
            int yy = r * p.sh - p.ph + i, xx = q * p.sw - p.pw + j;
            cnt_pad += yy < p.ih + p.ph && xx < p.iw + p.pw;
            cnt += yy >= 0 && yy < p.ih && xx >= 0 && xx < p.iw;
        }
    return p.alg == 1 ? cnt_pad : cnt;
}

/* The outputs whose windows cover input pixel (yy, xx): rows [*r0, *r1],
 * columns [*q0, *q1] (r1, q1 may pass the output's edge: the callers stop
 * at oh, ow): r * sh - ph <= yy < r * sh - ph + kh. */
__device__ static inline void pool_covering(const ck_pool_t p, int yy, int xx, int *r0, int *r1,
                                            int *q0, int *q1)
{
    *r0 = yy + p.ph - p.kh + 1 > 0 ? (yy + p.ph - p.kh + p.sh) / p.sh : 0;
    *r1 = (yy + p.ph) / p.sh;
    *q0 = xx + p.pw - p.kw + 1 > 0 ? (xx + p.pw - p.kw + p.sw) / p.sw : 0;
    *q1 = (xx + p.pw) / p.sw;
}

#endif
