/* cuda_infer_kernels — see cuda_infer_kernels.h. One thread per output
 * element (grid-stride; 8 channels a thread where they are a multiple of
 * 8), the output index in the output's layout so that stores are
 * coalesced; each element computed as gpud/cpu/ref_ops.c's loops do, then
 * one rounding to bf16. */
#include "gpud/cuda/cuda_half16.h"
#include "gpud/cuda/cuda_infer_kernels.h"
#include "gpud/cuda/cuda_launch.h"

#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ layouts */

template <typename T>
__global__ static void k_from_nchw(const float *x, size_t count, int c, size_t hw, void *yv)
{
    T *y = (T *)yv;
    GRID_STRIDE(i, count)
    {
        size_t ch = i % (size_t)c, p = (i / (size_t)c) % hw, b = i / ((size_t)c * hw);
        y[i] = h16<T>::st(x[(b * c + ch) * hw + p]);
    }
}

cudaError_t ckb_from_nchw(cudaStream_t s, int fp16, const float *x, int n, int c, int hw,
                          void *y)
{
    size_t count = (size_t)n * c * hw;
    return LAUNCH16(fp16, k_from_nchw, count, x, count, c, (size_t)hw, y);
}

template <typename T>
__global__ static void k_from_u8(const uint8_t *px, size_t count, int c, size_t hw,
                                 const float *lut, void *yv)
{
    T *y = (T *)yv;
    GRID_STRIDE_IDX3(w, count, (size_t)c, hw, 1)   /* channel, pixel, sample */
    {
        size_t ch = w.v[0].r, p = w.v[1].r, b = w.v[1].q;
        y[w.i] = h16<T>::st(lut[ch * 256 + px[(b * c + ch) * hw + p]]);
    }
}

cudaError_t ckb_from_u8(cudaStream_t s, int fp16, const uint8_t *px, int n, int c, int hw,
                        const float *lut, void *y)
{
    size_t count = (size_t)n * c * hw;
    return LAUNCH16(fp16, k_from_u8, count, px, count, c, (size_t)hw, lut, y);
}

/* out[i] (NCHW index i) = x (NHWC) of the same element */
__device__ static size_t nhwc_of_nchw(size_t i, int c, size_t hw)
{
    size_t p = i % hw, ch = (i / hw) % (size_t)c, b = i / ((size_t)c * hw);
    return (b * hw + p) * c + ch;
}

template <typename T>
__global__ static void k_to_nchw(const void *xv, size_t count, int c, size_t hw, float *y)
{
    const T *x = (const T *)xv;
    GRID_STRIDE(i, count)
    y[i] = h16<T>::ld(x[nhwc_of_nchw(i, c, hw)]);
}

cudaError_t ckb_to_nchw(cudaStream_t s, int fp16, const void *x, int n, int c, int hw,
                        float *y)
{
    size_t count = (size_t)n * c * hw;
    return LAUNCH16(fp16, k_to_nchw, count, x, count, c, (size_t)hw, y);
}

template <typename T>
__global__ static void k_flatten(const void *xv, size_t count, int c, size_t hw, void *yv)
{
    const T *x = (const T *)xv;
    T *y = (T *)yv;
    GRID_STRIDE(i, count)
    y[i] = x[nhwc_of_nchw(i, c, hw)];
}

cudaError_t ckb_flatten(cudaStream_t s, int fp16, const void *x, int n, int c, int hw, void *y)
{
    size_t count = (size_t)n * c * hw;
    return LAUNCH16(fp16, k_flatten, count, x, count, c, (size_t)hw, y);
}

template <typename T>
__global__ static void k_weights(const float *w, size_t count, int o, int in, int k, int ip,
                                 void *yv)
{
    T *y = (T *)yv;
    GRID_STRIDE(i, count)
    {
        size_t ci = i % (size_t)ip, kk = (i / (size_t)ip) % (size_t)k;
        size_t oo = i / ((size_t)ip * k);
        y[i] = h16<T>::st(oo < (size_t)o && ci < (size_t)in ? w[(oo * in + ci) * k + kk] : 0.0f);
    }
}

cudaError_t ckb_weights(cudaStream_t s, int fp16, const float *w, int o, int i, int k, int op,
                        int ip, void *y)
{
    size_t count = (size_t)op * ip * k;
    return LAUNCH16(fp16, k_weights, count, w, count, o, i, k, ip, y);
}

template <typename T>
__global__ static void k_pad(const void *xv, size_t count, int c, int cp, void *yv)
{
    const T *x = (const T *)xv;
    T *y = (T *)yv;
    GRID_STRIDE(i, count)
    {
        size_t ch = i % (size_t)cp, p = i / (size_t)cp;
        y[i] = ch < (size_t)c ? x[p * c + ch] : h16<T>::st(0.0f);
    }
}

cudaError_t ckb_pad(cudaStream_t s, int fp16, const void *x, size_t npix, int c, int cp,
                    void *y)
{
    size_t count = npix * cp;
    return LAUNCH16(fp16, k_pad, count, x, count, c, cp, y);
}

/* ckb_s2d: one thread a few output elements (its index digits carried by
 * additions); the channel's block and position in 32-bit arithmetic */
template <typename T>
__global__ static void k_s2d(const void *xv, size_t count, int h, int w, int c, int ph, int pw,
                             int hs, int ws, int cp, void *yv)
{
    const T *x = (const T *)xv;
    T *y = (T *)yv;
    GRID_STRIDE_IDX3(v, count, (size_t)cp, (size_t)ws, (size_t)hs)
    {
        int ch = (int)v.v[0].r, X = (int)v.v[1].r, Y = (int)v.v[2].r;
        size_t b = v.v[2].q;
        T out = h16<T>::st(0.0f);
        if (ch < 4 * c) {
            int blk = ch / c, cc = ch - blk * c;
            int yy = 2 * Y + (blk >> 1) - ph, xx = 2 * X + (blk & 1) - pw;
            if (yy >= 0 && yy < h && xx >= 0 && xx < w)
                out = x[((b * h + (size_t)yy) * w + (size_t)xx) * c + cc];
        }
        y[v.i] = out;
    }
}

cudaError_t ckb_s2d(cudaStream_t s, int fp16, const void *x, int n, int h, int w, int c, int ph,
                    int pw, int hs, int ws, int cp, void *y)
{
    size_t count = (size_t)n * hs * ws * cp;
    return LAUNCH16(fp16, k_s2d, count, x, count, h, w, c, ph, pw, hs, ws, cp, y);
}

template <typename T>
__global__ static void k_weights_s2d(const float *w, int count, int c, int kh, int kw, int kh2,
                                     int kw2, int cp, void *yv)
{
    T *y = (T *)yv;
    GRID_STRIDE(i, (size_t)count)
    {
        int t = (int)i, ch = t % cp, dx = t / cp % kw2, dy = t / (cp * kw2) % kh2;
        int oo = t / (cp * kw2 * kh2);
        float v = 0.0f;
        if (ch < 4 * c) {
            int blk = ch / c, cc = ch - blk * c;
            int i2 = 2 * dy + (blk >> 1), j2 = 2 * dx + (blk & 1);
            if (i2 < kh && j2 < kw)
                v = w[(((size_t)oo * c + cc) * kh + i2) * kw + j2];
        }
        y[i] = h16<T>::st(v);   /* rounded once (RNE), as the engine's copy would be */
    }
}

cudaError_t ckb_weights_s2d(cudaStream_t s, int fp16, const float *w, int o, int c, int kh,
                            int kw, int kh2, int kw2, int cp, void *wy)
{
    int count = o * kh2 * kw2 * cp;
    return LAUNCH16(fp16, k_weights_s2d, (size_t)count, w, count, c, kh, kw, kh2, kw2, cp, wy);
}

int ckb_s2d_shape(int c, int h, int w, int kh, int kw, int sh, int sw, int ph, int pw, int oh,
                  int ow, int s2d[4])
{
    const char *v = getenv("DDPIPE_CUDA_S2D");
    if ((v && strcmp(v, "0") == 0) || sh != 2 || sw != 2 || c > 4 || kh < 2 || kw < 2)
        return 0;
    s2d[0] = (h + 2 * ph + 1) / 2;
    s2d[1] = (w + 2 * pw + 1) / 2;
    s2d[2] = (kh + 1) / 2;
    s2d[3] = (kw + 1) / 2;
    return s2d[0] - s2d[2] + 1 == oh && s2d[1] - s2d[3] + 1 == ow;
}

/* ---------------------------------------------------------- epilogues */

template <typename T>
__global__ static void k_epilogue(void *yv, const void *xv, int xc, const float *bias,
                                  size_t count, int c, ck_post_t post, const void *resv)
{
    T *y = (T *)yv;
    const T *x = (const T *)xv, *res = (const T *)resv;
    GRID_STRIDE_IDX3(w, count, (size_t)c, 1, 1)   /* v[0].r channel, v[0].q pixel */
    {
        size_t i = w.i, ch = w.v[0].r;
        float v = h16<T>::ld(x[w.v[0].q * xc + ch]);
        if (bias)
            v = __fadd_rn(v, bias[ch]);
        for (int k = 0; k < post.n_post; k++)
            v = post.post[k] == 1 ? (v > 0.0f ? v : 0.0f) : __fadd_rn(v, h16<T>::ld(res[i]));
        y[i] = h16<T>::st(v);   /* x's and res[i] were read: y may be either */
    }
}

cudaError_t ckb_epilogue(cudaStream_t s, int fp16, void *y, const void *x, int xc,
                         const float *bias, size_t count, int c, ck_post_t post, const void *res)
{
    return LAUNCH16(fp16, k_epilogue, count, y, x, xc, bias, count, c, post, res);
}

template <typename T>
__global__ static void k_linear_out(void *yv, const float *acc, const float *bias, size_t count,
                                    int out)
{
    T *y = (T *)yv;
    GRID_STRIDE(i, count)
    {
        float v = acc[i];
        if (bias)
            v = __fadd_rn(v, bias[i % (size_t)out]);
        y[i] = h16<T>::st(v);
    }
}

cudaError_t ckb_linear_out(cudaStream_t s, int fp16, void *y, const float *acc,
                           const float *bias, int n, int out)
{
    size_t count = (size_t)n * out;
    return LAUNCH16(fp16, k_linear_out, count, y, acc, bias, count, out);
}

/* ------------------------------------------------------- element-wise */

template <typename T>
__global__ static void k_add(void *yv, const void *av, const void *bv, size_t count, int relu)
{
    T *y = (T *)yv;
    const T *a = (const T *)av, *b = (const T *)bv;
    GRID_STRIDE(i, count)
    {
        float v = __fadd_rn(h16<T>::ld(a[i]), h16<T>::ld(b[i]));
        y[i] = h16<T>::st(relu && !(v > 0.0f) ? 0.0f : v);
    }
}

/* k_add, 8 elements a thread (the same expression each) */
template <typename T>
__global__ static void k_add8(void *yv, const void *av, const void *bv, size_t n8, int relu)
{
    T *y = (T *)yv;
    const T *a = (const T *)av, *b = (const T *)bv;
    GRID_STRIDE(i, n8)
    {
        h16x8<T> va = ld8(a + i * 8), vb = ld8(b + i * 8), out;
        for (int l = 0; l < 8; l++) {
            float v = __fadd_rn(h16<T>::ld(va.v[l]), h16<T>::ld(vb.v[l]));
            out.v[l] = h16<T>::st(relu && !(v > 0.0f) ? 0.0f : v);
        }
        st8(y + i * 8, out);
    }
}

cudaError_t ckb_add(cudaStream_t s, int fp16, void *y, const void *a, const void *b,
                    size_t count, int relu)
{
    if (vec8_ok(count, y, a, b))
        return LAUNCH16(fp16, k_add8, count / 8, y, a, b, count / 8, relu);
    return LAUNCH16(fp16, k_add, count, y, a, b, count, relu);
}

template <typename T>
__global__ static void k_relu(void *yv, const void *xv, size_t count)
{
    T *y = (T *)yv;
    const T *x = (const T *)xv;
    GRID_STRIDE(i, count)
    {
        float v = h16<T>::ld(x[i]);
        y[i] = h16<T>::st(v > 0.0f ? v : 0.0f);   /* exact: v is a 16-bit value */
    }
}

template <typename T> __global__ static void k_relu8(void *yv, const void *xv, size_t n8)
{
    T *y = (T *)yv;
    const T *x = (const T *)xv;
    GRID_STRIDE(i, n8)
    {
        h16x8<T> v = ld8(x + i * 8), out;
        for (int l = 0; l < 8; l++) {
            float f = h16<T>::ld(v.v[l]);
            out.v[l] = h16<T>::st(f > 0.0f ? f : 0.0f);
        }
        st8(y + i * 8, out);
    }
}

cudaError_t ckb_relu(cudaStream_t s, int fp16, void *y, const void *x, size_t count)
{
    if (vec8_ok(count, y, x, y))
        return LAUNCH16(fp16, k_relu8, count / 8, y, x, count / 8);
    return LAUNCH16(fp16, k_relu, count, y, x, count);
}

/* ------------------------------------------------------------ pooling */

/* ck_pool_fwd's windows (cuda_kernels.cu, ref_maxpool2d / ref_avgpool2d):
 * max takes the first maximum and padding never wins; avg sums in double
 * and divides by the window's count with (alg 1) or without (alg 2) the
 * padding. A thread takes L channels of an output pixel (L = 8: 16-byte
 * loads and stores, the window's bounds and addresses once for the 8),
 * each channel computed alone: the same bits for every L. xp: sample b's
 * (ih, iw, c) plane set from channel ch. */
template <typename T, int L>
__device__ static void pool_fwd(const ck_pool_t p, int c, const void *xv, void *yv,
                                uint8_t *win)
{
    const T *x = (const T *)xv;
    T *y = (T *)yv;
    size_t count = (size_t)p.nc * p.oh * p.ow / L;
    GRID_STRIDE_IDX3(w, count, (size_t)(c / L), p.ow, p.oh)
    {
        size_t i = w.i * L;
        int ch = (int)w.v[0].r * L, q = (int)w.v[1].r, r = (int)w.v[2].r;
        size_t b = w.v[2].q;
        const T *xp = x + b * p.ih * p.iw * (size_t)c + ch;
        h16v<T, L> out;
        if (p.alg == 0) {
            float m[L];
            int at[L];   /* not a byte: without win the window may pass 255 positions */
            for (int l = 0; l < L; l++) {
                m[l] = -INFINITY;
                at[l] = CKB_NO_WIN;
            }
            for (int a = 0; a < p.kh; a++)
                for (int e = 0; e < p.kw; e++) {
                    int yy = r * p.sh - p.ph + a, xx = q * p.sw - p.pw + e;
                    if (yy < 0 || yy >= p.ih || xx < 0 || xx >= p.iw)
                        continue;
                    h16v<T, L> v = ldv<T, L>(xp + ((size_t)yy * p.iw + xx) * c);
                    for (int l = 0; l < L; l++) {
                        float f = h16<T>::ld(v.v[l]);
                        if (at[l] == CKB_NO_WIN || f > m[l]) {
                            m[l] = f;
                            at[l] = a * p.kw + e;
                        }
                    }
                }
            u8v<L> chosen;
            for (int l = 0; l < L; l++) {
                out.v[l] = h16<T>::st(m[l]);   /* an input's value: exact */
                chosen.v[l] = (uint8_t)at[l];
            }
            stv<T, L>(y + i, out);
            if (win)
                stu8<L>(win + i, chosen);
            continue;
        }
        double acc[L];
        for (int l = 0; l < L; l++)
            acc[l] = 0.0;
        int cnt = 0, cnt_pad = 0;
        for (int a = 0; a < p.kh; a++)
            for (int e = 0; e < p.kw; e++) {
                int yy = r * p.sh - p.ph + a, xx = q * p.sw - p.pw + e;
                cnt_pad += yy < p.ih + p.ph && xx < p.iw + p.pw;
                if (yy >= 0 && yy < p.ih && xx >= 0 && xx < p.iw) {
                    h16v<T, L> v = ldv<T, L>(xp + ((size_t)yy * p.iw + xx) * c);
                    for (int l = 0; l < L; l++)
                        acc[l] += h16<T>::ld(v.v[l]);
                    cnt++;
                }
            }
        int div = p.alg == 1 ? cnt_pad : cnt;
        for (int l = 0; l < L; l++)
            out.v[l] = h16<T>::st((float)(div ? acc[l] / div : 0.0));
        stv<T, L>(y + i, out);
    }
}

template <typename T>
__global__ static void k_pool(const ck_pool_t p, int c, const void *x, void *y, uint8_t *win)
{
    pool_fwd<T, 1>(p, c, x, y, win);
}

template <typename T>
__global__ static void k_pool8(const ck_pool_t p, int c, const void *x, void *y, uint8_t *win)
{
    pool_fwd<T, 8>(p, c, x, y, win);
}

cudaError_t ckb_pool(cudaStream_t s, int fp16, const ck_pool_t *p, int c, const void *x,
                     void *y, uint8_t *win)
{
    size_t count = (size_t)p->nc * p->oh * p->ow;
    if (win && (p->alg != 0 || p->kh * p->kw > CKB_NO_WIN))
        return cudaErrorInvalidValue;   /* the positions fit a byte, CKB_NO_WIN apart */
    if (c % 8 == 0 && vec8_ok(count, x, y, x) && ((uintptr_t)win & 7) == 0)
        return LAUNCH16(fp16, k_pool8, count / 8, *p, c, x, y, win);
    return LAUNCH16(fp16, k_pool, count, *p, c, x, y, win);
}
