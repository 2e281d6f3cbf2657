/* cuda_train16_kernels — see cuda_train16_kernels.h. Threads walk output
 * elements (grid-stride; 8 channels a thread where they are a multiple of
 * 8), each element the fp32 kernel's followed by the engine's rounding; each a template on the 16-bit type T
 * (cuda_half16.h), launched for the launcher's fp16. */
#include "gpud/cuda/cuda_half16.h"
#include "gpud/cuda/cuda_kernels.h"
#include "gpud/dropout_key.h"
#include "gpud/cuda/cuda_launch.h"
#include "gpud/cuda/cuda_pool_win.h"
#include "gpud/cuda/cuda_train16_kernels.h"

#include <math.h>

template <typename T> __global__ static void k_acc(void *yv, const void *xv, size_t count)
{
    T *y = (T *)yv;
    const T *x = (const T *)xv;
    GRID_STRIDE(i, count)
    y[i] = h16<T>::st(h16<T>::ld(y[i]) + h16<T>::ld(x[i]));
}

template <typename T> __global__ static void k_acc8(void *yv, const void *xv, size_t n8)
{
    T *y = (T *)yv;
    const T *x = (const T *)xv;
    GRID_STRIDE(i, n8)
    {
        h16x8<T> vy = ld8(y + i * 8), vx = ld8(x + i * 8);
        for (int l = 0; l < 8; l++)
            vy.v[l] = h16<T>::st(h16<T>::ld(vy.v[l]) + h16<T>::ld(vx.v[l]));
        st8(y + i * 8, vy);
    }
}

cudaError_t ckb_acc(cudaStream_t s, int fp16, void *y, const void *x, size_t count)
{
    if (vec8_ok(count, y, x, y))
        return LAUNCH16(fp16, k_acc8, count / 8, y, x, count / 8);
    return LAUNCH16(fp16, k_acc, count, y, x, count);
}

template <typename T>
__global__ static void k_relu_bwd(void *gxv, const void *yv, const void *gyv, size_t count)
{
    T *gx = (T *)gxv;
    const T *y = (const T *)yv, *gy = (const T *)gyv;
    GRID_STRIDE(i, count)
    gx[i] = h16<T>::ld(y[i]) > 0.0f ? gy[i] : h16<T>::st(0.0f);
}

template <typename T>
__global__ static void k_relu_bwd8(void *gxv, const void *yv, const void *gyv, size_t n8)
{
    T *gx = (T *)gxv;
    const T *y = (const T *)yv, *gy = (const T *)gyv;
    GRID_STRIDE(i, n8)
    {
        h16x8<T> vy = ld8(y + i * 8), vg = ld8(gy + i * 8);
        for (int l = 0; l < 8; l++)
            vg.v[l] = h16<T>::ld(vy.v[l]) > 0.0f ? vg.v[l] : h16<T>::st(0.0f);
        st8(gx + i * 8, vg);
    }
}

cudaError_t ckb_relu_bwd(cudaStream_t s, int fp16, void *gx, const void *y, const void *gy,
                         size_t count)
{
    if (vec8_ok(count, gx, y, gy))
        return LAUNCH16(fp16, k_relu_bwd8, count / 8, gx, y, gy, count / 8);
    return LAUNCH16(fp16, k_relu_bwd, count, gx, y, gy, count);
}

/* gw[(oo * i + ii) * k + kk] = dw[(oo * k + kk) * ip + ii] */
template <typename T>
__global__ static void k_weights_back(const void *dwv, int o, int i, int k, int ip, float *gw)
{
    const T *dw = (const T *)dwv;
    size_t count = (size_t)o * i * k;
    GRID_STRIDE(j, count)
    {
        size_t kk = j % (size_t)k, ii = (j / (size_t)k) % (size_t)i, oo = j / ((size_t)k * i);
        gw[j] = h16<T>::ld(dw[(oo * k + kk) * ip + ii]);
    }
}

cudaError_t ckb_weights_back(cudaStream_t s, int fp16, const void *dw, int o, int i, int k,
                             int ip, float *gw)
{
    size_t count = (size_t)o * i * k;
    return LAUNCH16(fp16, k_weights_back, count, dw, o, i, k, ip, gw);
}

template <typename T>
__global__ static void k_s2d_back(const void *dxv, size_t count, int h, int w, int c, int ph,
                                  int pw, int hs, int ws, int cp, void *gxv)
{
    const T *dx = (const T *)dxv;
    T *gx = (T *)gxv;
    GRID_STRIDE_IDX3(v, count, (size_t)c, (size_t)w, (size_t)h)
    {
        int ch = (int)v.v[0].r, yy = (int)v.v[2].r + ph, xx = (int)v.v[1].r + pw;
        size_t b = v.v[2].q;
        int blk = (yy & 1) * 2 + (xx & 1);
        gx[v.i] = dx[((b * hs + (size_t)(yy >> 1)) * ws + (size_t)(xx >> 1)) * cp + blk * c + ch];
    }
}

cudaError_t ckb_s2d_back(cudaStream_t s, int fp16, const void *dxs, int n, int h, int w, int c,
                         int ph, int pw, int hs, int ws, int cp, void *gx)
{
    size_t count = (size_t)n * h * w * c;
    return LAUNCH16(fp16, k_s2d_back, count, dxs, count, h, w, c, ph, pw, hs, ws, cp, gx);
}

template <typename T>
__global__ static void k_weights_back_s2d(const void *dwv, int count, int c, int kh, int kw,
                                          int kh2, int kw2, int cp, float *gw)
{
    const T *dw = (const T *)dwv;
    GRID_STRIDE(t, (size_t)count)
    {
        int k = (int)t, j = k % kw, i = k / kw % kh, ch = k / (kw * kh) % c, oo = k / (kw * kh * c);
        int blk = (i & 1) * 2 + (j & 1);
        size_t at = (((size_t)oo * kh2 + (i >> 1)) * kw2 + (j >> 1)) * cp + blk * c + ch;
        gw[t] = h16<T>::ld(dw[at]);
    }
}

cudaError_t ckb_weights_back_s2d(cudaStream_t s, int fp16, const void *dws, int o, int c, int kh,
                                 int kw, int kh2, int kw2, int cp, float *gw)
{
    int count = o * c * kh * kw;
    return LAUNCH16(fp16, k_weights_back_s2d, (size_t)count, dws, count, c, kh, kw, kh2, kw2, cp,
                    gw);
}

template <typename T>
__global__ static void k_unpad(const void *xv, size_t count, int c, int cp, void *yv)
{
    const T *x = (const T *)xv;
    T *y = (T *)yv;
    GRID_STRIDE(i, count)
    y[i] = x[(i / (size_t)c) * cp + i % (size_t)c];
}

cudaError_t ckb_unpad(cudaStream_t s, int fp16, const void *x, size_t npix, int c, int cp,
                      void *y)
{
    size_t count = npix * c;
    return LAUNCH16(fp16, k_unpad, count, x, count, c, cp, y);
}

/* ------------------------------------------- layouts: 2-byte moves, exact */

/* i walks x (npix, cx): its channel ch of pixel q is y's channel off + ch */
__global__ static void k_concat16(uint16_t *y, int cy, uint16_t *x, size_t count, int cx,
                                  int off, int to_y)
{
    GRID_STRIDE(i, count)
    {
        size_t at = (i / (size_t)cx) * cy + off + i % (size_t)cx;
        if (to_y)
            y[at] = x[i];
        else
            x[i] = y[at];
    }
}

cudaError_t ckb_concat(cudaStream_t s, void *y, int cy, void *x, size_t npix, int cx, int off,
                       int to_y)
{
    size_t count = npix * cx;
    k_concat16<<<blocks_for(count), THREADS, 0, s>>>((uint16_t *)y, cy, (uint16_t *)x, count,
                                                     cx, off, to_y);
    return cudaGetLastError();
}

/* y (NHWC of (n, c, hw)) = x in PyTorch's flatten order (NCHW): the inverse
 * of ckb_flatten */
__global__ static void k_unflatten16(const uint16_t *x, size_t count, int c, size_t hw,
                                     uint16_t *y)
{
    GRID_STRIDE(i, count)   /* i walks x: element (b, ch, p) */
    {
        size_t p = i % hw, ch = (i / hw) % (size_t)c, b = i / ((size_t)c * hw);
        y[(b * hw + p) * c + ch] = x[i];
    }
}

cudaError_t ckb_unflatten(cudaStream_t s, const void *x, int n, int c, int hw, void *y)
{
    size_t count = (size_t)n * c * hw;
    k_unflatten16<<<blocks_for(count), THREADS, 0, s>>>((const uint16_t *)x, count, c,
                                                        (size_t)hw, (uint16_t *)y);
    return cudaGetLastError();
}

/* ck_dropout's mask (the host's hash of the logical NCHW index, bit for
 * bit) on NHWC: element r of a sample is channel r % c of pixel r / c */
template <typename T>
__global__ static void k16_dropout(void *yv, const void *xv, size_t count, int c, size_t hw,
                                   float p, float scale, uint32_t op, const uint64_t *keys)
{
    T *y = (T *)yv;
    const T *x = (const T *)xv;
    size_t per = (size_t)c * hw;
    GRID_STRIDE(i, count)
    {
        size_t b = i / per, r = i % per, idx = (r % (size_t)c) * hw + r / (size_t)c;
        uint64_t key = dropout_op_key(keys[b], op);
        double u = (double)(dropout_mix(key ^ dropout_mix(idx)) >> 40) / 16777216.0;
        y[i] = h16<T>::st(u >= (double)p ? __fmul_rn(h16<T>::ld(x[i]), scale) : 0.0f);
    }
}

cudaError_t ckb_dropout(cudaStream_t s, int fp16, void *y, const void *x, int n, int c, int hw,
                        float p, uint32_t op, const uint64_t *keys)
{
    size_t count = (size_t)n * c * hw;
    if (p == 0.0f)
        return y == x ? cudaSuccess : cudaMemcpyAsync(y, x, count * 2, cudaMemcpyDeviceToDevice, s);
    float scale = 1.0f / (1.0f - p);
    return LAUNCH16(fp16, k16_dropout, count, y, x, count, c, (size_t)hw, p, scale, op, keys);
}

/* ---------------------------------------------------------------- pooling */

/* ck_pool_bwd's gather on NHWC: each input element sums, in the same order,
 * the gradients of the windows that chose it (max) or contain it (avg), in
 * fp32, rounded once. A thread takes L channels of an input pixel (L = 8:
 * 16-byte loads of gy, 8 bytes of choices), each channel summed alone: the
 * same bits for every L. The forward's choice that points at (yy, xx) in
 * window (r, q) is one position, a0 * kw + e0, compared whole; without the
 * choices each window's first maximum is found again. */
template <typename T, int L>
__device__ static void pool_bwd(const ck_pool_t p, int c, const void *xv, const void *gyv,
                                void *gxv, const uint8_t *win)
{
    const T *x = (const T *)xv, *gy = (const T *)gyv;
    T *gx = (T *)gxv;
    size_t count = (size_t)p.nc * p.ih * p.iw / L;
    GRID_STRIDE_IDX3(w, count, (size_t)(c / L), p.iw, p.ih)
    {
        int ch = (int)w.v[0].r * L, xx = (int)w.v[1].r, yy = (int)w.v[2].r;
        size_t b = w.v[2].q;
        const T *gp = gy + b * p.oh * p.ow * (size_t)c + ch;
        const uint8_t *wp = win ? win + b * p.oh * p.ow * (size_t)c + ch : NULL;
        float acc[L];
        for (int l = 0; l < L; l++)
            acc[l] = 0.0f;
        int r0, r1, q0, q1;
        pool_covering(p, yy, xx, &r0, &r1, &q0, &q1);
        for (int r = r0; r <= r1 && r < p.oh; r++)
            for (int q = q0; q <= q1 && q < p.ow; q++) {
                size_t o = ((size_t)r * p.ow + q) * c;
                h16v<T, L> g = ldv<T, L>(gp + o);
                if (p.alg == 0 && wp) {
                    int pos = (yy - (r * p.sh - p.ph)) * p.kw + (xx - (q * p.sw - p.pw));
                    u8v<L> chosen = ldu8<L>(wp + o);
                    for (int l = 0; l < L; l++)
                        if (chosen.v[l] == pos)
                            acc[l] += h16<T>::ld(g.v[l]);
                } else if (p.alg == 0) {
                    const T *xp = x + b * p.ih * p.iw * (size_t)c + ch;
                    for (int l = 0; l < L; l++)
                        if (pool_argmax(p, xp + l, (size_t)c, r, q) == yy * p.iw + xx)
                            acc[l] += h16<T>::ld(g.v[l]);
                } else {
                    int div = pool_div(p, r, q);
                    for (int l = 0; div && l < L; l++)
                        acc[l] += (float)((double)h16<T>::ld(g.v[l]) / div);
                }
            }
        h16v<T, L> out;
        for (int l = 0; l < L; l++)
            out.v[l] = h16<T>::st(acc[l]);
        stv<T, L>(gx + w.i * L, out);
    }
}

template <typename T>
__global__ static void k16_pool_bwd(const ck_pool_t p, int c, const void *x, const void *gy,
                                    void *gx, const uint8_t *win)
{
    pool_bwd<T, 1>(p, c, x, gy, gx, win);
}

template <typename T>
__global__ static void k16_pool_bwd8(const ck_pool_t p, int c, const void *x, const void *gy,
                                     void *gx, const uint8_t *win)
{
    pool_bwd<T, 8>(p, c, x, gy, gx, win);
}

cudaError_t ckb_pool_bwd(cudaStream_t s, int fp16, const ck_pool_t *p, int c, const void *x,
                         const void *gy, void *gx, const uint8_t *win)
{
    size_t count = (size_t)p->nc * p->ih * p->iw;
    if (c % 8 == 0 && vec8_ok(count, gy, gx, gx) && ((uintptr_t)win & 7) == 0)
        return LAUNCH16(fp16, k16_pool_bwd8, count / 8, *p, c, x, gy, gx, win);
    return LAUNCH16(fp16, k16_pool_bwd, count, *p, c, x, gy, gx, win);
}
